using System.Buffers.Binary;
using QuickSilver.Core.Io;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>Message types: request-channel frames (0x01–0x0F) and multicast datagrams (0x10 and up).</summary>
public enum MessageType : byte
{
    Request = 0x01,
    Welcome = 0x02,
    Want = 0x03,
    Nak = 0x04,
    Done = 0x05,
    Announce = 0x10,
    Data = 0x20,
}

/// <summary>Why a frame or datagram was dropped (docs/dissemination.md, "Wire formats").</summary>
public enum DisseminationDrop
{
    /// <summary>Too short, too long, a field past the end, or bytes left over.</summary>
    Malformed,
    BadVersion,
    BadType,
    /// <summary>A field out of its range (file ordinal, page run, lost count, k, packet index, page length).</summary>
    OutOfRange,
    /// <summary>A frame that is well-formed but not allowed now (a second Request, a Want before Request).</summary>
    OutOfOrder,
    /// <summary>A NAK for a page not sent to this client recently (never requested, not yet sent, or already NAKed).</summary>
    NakUnsolicited,
    /// <summary>Data or announcement for a file or transmission this client does not know.</summary>
    Unknown,

    /// <summary>A NAK for a page this client is already waiting for (its request is pending, e.g. the NAK is for a
    /// transmission that began before the request arrived, or a repeat): nothing to do.</summary>
    NakStale,
}

public sealed record RequestMessage(byte Capacity, IReadOnlyList<string> Names);

/// <summary>One requested file in the Welcome; <paramref name="Number"/> is the server's number for it, which its data
/// packets carry.</summary>
public sealed record WelcomeFile(bool Found, string Name, ushort Number, ulong FileId, long Size, byte[] Sha256);

public sealed record WelcomeMessage(
    int PacketPayload,
    int PageSize,
    NetAddress Announce,
    int ChannelBytesPerSecond,
    IReadOnlyList<NetAddress> Channels,
    IReadOnlyList<WelcomeFile> Files);

public readonly record struct PageRun(uint First, uint Count);

public sealed record WantMessage(ushort File, IReadOnlyList<PageRun> Runs);

public readonly record struct NakMessage(ulong FileId, ulong Offset, uint Transmission, byte Lost);

public readonly record struct AnnounceEntry(byte Channel, ulong FileId, ulong Offset, uint Transmission, byte K, byte Count, uint StartDelayMicros, uint DurationMicros);

/// <summary>The data packet header; the payload (one packet of the page, or one repair packet) follows it. The page is
/// (file number from the Welcome, page number in the file); k and the page's length follow from the file list.</summary>
public readonly record struct DataHeader(byte Channel, ushort File, uint Page, uint Transmission, byte Index, byte Seq, byte Count);

/// <summary>
/// The hand-coded wire formats: little-endian, a version byte then a type byte first in every frame and datagram.
/// Every decoder returns false on anything malformed (truncated, trailing bytes, out-of-range counts) and never
/// allocates more than the bounds below allow; the caller counts the drop.
/// </summary>
public static class Wire
{
    /// <summary>2 since the 16-byte data header (1 had a 30-byte one, and no file numbers in the Welcome).</summary>
    public const byte Version = 2;

    /// <summary>The largest packet payload: with the 16-byte header, a 1,472-byte datagram, what a 1,500-byte
    /// Ethernet MTU carries over IPv4 and UDP.</summary>
    public const int MaxPacketPayload = 1456;

    /// <summary>Largest request-channel frame accepted (a length prefix above it closes the connection).</summary>
    public const int MaxFrameBytes = 256 * 1024;

    public const int MaxNamesPerRequest = 1024;
    public const int MaxNameBytes = 1024;
    public const int MaxRunsPerWant = 4096;
    public const int MaxChannels = 64;

    public const int AnnounceHeaderBytes = 8;
    public const int AnnounceEntryBytes = 31;
    public const int DataHeaderBytes = 16;

    // ---- request channel -------------------------------------------------------------------------------------

    internal static void WriteRequest(FrameWriter w, RequestMessage m)
    {
        w.Reset();
        w.U8(Version);
        w.U8((byte)MessageType.Request);
        w.U8(m.Capacity);
        w.U16((ushort)m.Names.Count);
        foreach (var name in m.Names)
        {
            w.String(name);
        }
    }

    internal static void WriteWelcome(FrameWriter w, WelcomeMessage m)
    {
        w.Reset();
        w.U8(Version);
        w.U8((byte)MessageType.Welcome);
        w.U16((ushort)m.PacketPayload);
        w.U32((uint)m.PageSize);
        w.U32(m.Announce.Ip);
        w.U16(m.Announce.Port);
        w.U32((uint)m.ChannelBytesPerSecond);
        w.U8((byte)m.Channels.Count);
        foreach (var c in m.Channels)
        {
            w.U32(c.Ip);
            w.U16(c.Port);
        }

        w.U16((ushort)m.Files.Count);
        foreach (var f in m.Files)
        {
            w.U8(f.Found ? (byte)1 : (byte)0);
            w.String(f.Name);
            w.U16(f.Number);
            w.U64(f.FileId);
            w.U64((ulong)f.Size);
            w.Bytes(f.Sha256);
        }
    }

    internal static void WriteWant(FrameWriter w, ushort file, ReadOnlySpan<PageRun> runs)
    {
        w.Reset();
        w.U8(Version);
        w.U8((byte)MessageType.Want);
        w.U16(file);
        w.U16((ushort)runs.Length);
        foreach (var r in runs)
        {
            w.U32(r.First);
            w.U32(r.Count);
        }
    }

    /// <summary>NAK: 24 bytes.</summary>
    public static int WriteNak(Span<byte> to, NakMessage m)
    {
        to[0] = Version;
        to[1] = (byte)MessageType.Nak;
        BinaryPrimitives.WriteUInt64LittleEndian(to[2..], m.FileId);
        BinaryPrimitives.WriteUInt64LittleEndian(to[10..], m.Offset);
        BinaryPrimitives.WriteUInt32LittleEndian(to[18..], m.Transmission);
        to[22] = m.Lost;
        to[23] = 0;
        return 24;
    }

    public static int WriteDone(Span<byte> to)
    {
        to[0] = Version;
        to[1] = (byte)MessageType.Done;
        return 2;
    }

    /// <summary>Reads the version and type of a frame or datagram.</summary>
    public static DisseminationDrop? PeekType(ReadOnlySpan<byte> message, out MessageType type)
    {
        type = 0;
        if (message.Length < 2)
        {
            return DisseminationDrop.Malformed;
        }

        if (message[0] != Version)
        {
            return DisseminationDrop.BadVersion;
        }

        type = (MessageType)message[1];
        return null;
    }

    public static bool TryReadRequest(ReadOnlySpan<byte> frame, out RequestMessage message)
    {
        message = null!;
        var r = new SpanReader(frame[2..]);
        if (!r.U8(out byte capacity) || capacity == 0 || !r.U16(out ushort count) || count == 0 || count > MaxNamesPerRequest)
        {
            return false;
        }

        var names = new List<string>(Math.Min((int)count, r.Remaining / 2));
        for (int i = 0; i < count; i++)
        {
            if (!r.String(MaxNameBytes, out string name) || name.Length == 0)
            {
                return false;
            }

            names.Add(name);
        }

        if (r.Remaining != 0)
        {
            return false;
        }

        message = new RequestMessage(capacity, names);
        return true;
    }

    public static bool TryReadWelcome(ReadOnlySpan<byte> frame, out WelcomeMessage message)
    {
        message = null!;
        var r = new SpanReader(frame[2..]);
        if (!r.U16(out ushort payload) || payload < 16 || payload > MaxPacketPayload
            || !r.U32(out uint pageSize) || pageSize < payload || pageSize > Pages.PageOptions.MaxPageSize || pageSize % payload != 0 || pageSize / payload > 255
            || !r.U32(out uint aip) || !r.U16(out ushort aport)
            || !r.U32(out uint rate) || rate == 0 || rate > int.MaxValue
            || !r.U8(out byte channels) || channels == 0 || channels > MaxChannels)
        {
            return false;
        }

        var list = new NetAddress[channels];
        for (int i = 0; i < channels; i++)
        {
            if (!r.U32(out uint ip) || !r.U16(out ushort port))
            {
                return false;
            }

            list[i] = new NetAddress(ip, port);
        }

        if (!r.U16(out ushort count) || count > MaxNamesPerRequest)
        {
            return false;
        }

        var files = new List<WelcomeFile>(Math.Min((int)count, r.Remaining / 53));
        for (int i = 0; i < count; i++)
        {
            if (!r.U8(out byte found) || found > 1 || !r.String(MaxNameBytes, out string name) || !r.U16(out ushort number)
                || !r.U64(out ulong id) || !r.U64(out ulong size) || size > long.MaxValue / 2 || !r.Bytes(32, out var sha))
            {
                return false;
            }

            files.Add(new WelcomeFile(found == 1, name, number, id, (long)size, sha.ToArray()));
        }

        if (r.Remaining != 0)
        {
            return false;
        }

        message = new WelcomeMessage(payload, (int)pageSize, new NetAddress(aip, aport), (int)rate, list, files);
        return true;
    }

    /// <summary>Reads a Want's file ordinal and runs into <paramref name="runs"/> (cleared first).</summary>
    public static bool TryReadWant(ReadOnlySpan<byte> frame, out ushort file, List<PageRun> runs)
    {
        runs.Clear();
        file = 0;
        var r = new SpanReader(frame[2..]);
        if (!r.U16(out file) || !r.U16(out ushort count) || count > MaxRunsPerWant || r.Remaining != count * 8)
        {
            return false;
        }

        for (int i = 0; i < count; i++)
        {
            r.U32(out uint first);
            r.U32(out uint n);
            if (n == 0)
            {
                return false;
            }

            runs.Add(new PageRun(first, n));
        }

        return true;
    }

    public static bool TryReadNak(ReadOnlySpan<byte> frame, out NakMessage message)
    {
        message = default;
        if (frame.Length != 24 || frame[23] != 0)
        {
            return false;
        }

        message = new NakMessage(
            BinaryPrimitives.ReadUInt64LittleEndian(frame[2..]),
            BinaryPrimitives.ReadUInt64LittleEndian(frame[10..]),
            BinaryPrimitives.ReadUInt32LittleEndian(frame[18..]),
            frame[22]);
        return message.Lost > 0;
    }

    // ---- multicast datagrams ---------------------------------------------------------------------------------

    public static void WriteAnnounceHeader(Span<byte> to, byte count, uint seq)
    {
        to[0] = Version;
        to[1] = (byte)MessageType.Announce;
        to[2] = count;
        to[3] = 0;
        BinaryPrimitives.WriteUInt32LittleEndian(to[4..], seq);
    }

    public static void WriteAnnounceEntry(Span<byte> to, in AnnounceEntry e)
    {
        to[0] = e.Channel;
        BinaryPrimitives.WriteUInt64LittleEndian(to[1..], e.FileId);
        BinaryPrimitives.WriteUInt64LittleEndian(to[9..], e.Offset);
        BinaryPrimitives.WriteUInt32LittleEndian(to[17..], e.Transmission);
        to[21] = e.K;
        to[22] = e.Count;
        BinaryPrimitives.WriteUInt32LittleEndian(to[23..], e.StartDelayMicros);
        BinaryPrimitives.WriteUInt32LittleEndian(to[27..], e.DurationMicros);
    }

    /// <summary>Checks an announcement's header and length; entries are then read with <see cref="ReadAnnounceEntry"/>.</summary>
    public static bool TryReadAnnounce(ReadOnlySpan<byte> datagram, out int count, out uint seq)
    {
        count = 0;
        seq = 0;
        if (datagram.Length < AnnounceHeaderBytes || datagram[3] != 0)
        {
            return false;
        }

        count = datagram[2];
        seq = BinaryPrimitives.ReadUInt32LittleEndian(datagram[4..]);
        return datagram.Length == AnnounceHeaderBytes + (count * AnnounceEntryBytes);
    }

    public static AnnounceEntry ReadAnnounceEntry(ReadOnlySpan<byte> datagram, int index)
    {
        var e = datagram.Slice(AnnounceHeaderBytes + (index * AnnounceEntryBytes), AnnounceEntryBytes);
        return new AnnounceEntry(
            e[0],
            BinaryPrimitives.ReadUInt64LittleEndian(e[1..]),
            BinaryPrimitives.ReadUInt64LittleEndian(e[9..]),
            BinaryPrimitives.ReadUInt32LittleEndian(e[17..]),
            e[21],
            e[22],
            BinaryPrimitives.ReadUInt32LittleEndian(e[23..]),
            BinaryPrimitives.ReadUInt32LittleEndian(e[27..]));
    }

    /// <summary>Writes the 16-byte data header: version, type, channel u8, code index u8, seq u8, packets u8, file
    /// number u16, page number u32, transmission u32.</summary>
    public static void WriteDataHeader(Span<byte> to, in DataHeader h)
    {
        to[0] = Version;
        to[1] = (byte)MessageType.Data;
        to[2] = h.Channel;
        to[3] = h.Index;
        to[4] = h.Seq;
        to[5] = h.Count;
        BinaryPrimitives.WriteUInt16LittleEndian(to[6..], h.File);
        BinaryPrimitives.WriteUInt32LittleEndian(to[8..], h.Page);
        BinaryPrimitives.WriteUInt32LittleEndian(to[12..], h.Transmission);
    }

    /// <summary>Reads a data header; checks only what needs no context (index &lt; 255, seq &lt; count). The client
    /// checks the file number, page number and channel against its file list.</summary>
    public static bool TryReadDataHeader(ReadOnlySpan<byte> datagram, out DataHeader h)
    {
        h = default;
        if (datagram.Length <= DataHeaderBytes)
        {
            return false;
        }

        h = new DataHeader(
            datagram[2],
            BinaryPrimitives.ReadUInt16LittleEndian(datagram[6..]),
            BinaryPrimitives.ReadUInt32LittleEndian(datagram[8..]),
            BinaryPrimitives.ReadUInt32LittleEndian(datagram[12..]),
            datagram[3],
            datagram[4],
            datagram[5]);
        return h.Index < 255 && h.Seq < h.Count;
    }
}
