using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>A data packet's fixed fields: the session, its sequence number (from 1) and the source's send time (ticks on
/// the source's clock, echoed by the nominee so the source measures its round trip).</summary>
public readonly record struct AerData(uint Session, long Seq, long SentTicks, bool Repair);

/// <summary>A source path message (AER §4.1.1): who sent it first, who rewrote it last (the upstream repair server of
/// whoever receives this copy), how many repair servers rewrote it, how far the source has sent, what it can still
/// repair, and the round trip from the source to the rewriting node (NCA's T for the nodes below it).</summary>
public readonly record struct SourcePathMessage(uint Session, NetAddress Source, NetAddress Upstream, int Depth, long SpmSeq,
    long HighestSeq, long LowestAvailable, int PathRttMicros);

/// <summary>A NAK for one packet: unicast upstream, or (Downstream) subcast by a repair server to suppress its children's.</summary>
public readonly record struct AerNak(uint Session, long Seq, bool Downstream);

/// <summary>A congestion status message (NCA §4.2.1): a receiver's loss rate p and round trip T to the source.</summary>
public readonly record struct CongestionStateMessage(uint Session, NetAddress Receiver, double LossRate, int RttMicros, bool Leaving)
{
    /// <summary>Equation (4.2): g(p, T) = T·√p; the higher, the less bandwidth a TCP flow would get on that path.</summary>
    public double G => RttMicros / 1e6 * Math.Sqrt(LossRate);
}

/// <summary>
/// AER/NCA wire formats (docs/aer.md "Wire formats"), little-endian, each after the 12-byte common header whose sender
/// field is 0 (AER names nodes by address). Every reader checks the exact length and the ranges of every field, and
/// never throws.
/// <code>
///  7 Data      flags bit0 repair | u32 session | u64 seq | i64 sentTicks | payload
///  8 SPM       u32 session | u32 srcIp | u16 srcPort | u32 upIp | u16 upPort | u8 depth | u8 0 | u64 spmSeq | u64 highest | u64 lowestAvailable | u32 pathRttMicros
///  9 NAK       flags bit0 downstream | u32 session | u64 seq
/// 10 CSM       flags bit0 leaving | u32 session | u32 rcvIp | u16 rcvPort | u16 0 | f64 loss | u32 rttMicros
/// 11 Nominate  flags bit0 stop | u32 session | u32 epoch
/// 12 ACK       u32 session | u32 epoch | u64 seq | i64 echoTicks
/// 13 Probe     flags bit0 reply | u32 session | i64 ticks
/// </code>
/// </summary>
public static class AerWire
{
    public const PacketType DataType = (PacketType)7;
    public const PacketType SpmType = (PacketType)8;
    public const PacketType NakType = (PacketType)9;
    public const PacketType CsmType = (PacketType)10;
    public const PacketType NominateType = (PacketType)11;
    public const PacketType AckType = (PacketType)12;
    public const PacketType ProbeType = (PacketType)13;

    public const int DataHeaderSize = PacketHeader.Size + 20;
    public const int SpmSize = PacketHeader.Size + 46;
    public const int NakSize = PacketHeader.Size + 12;
    public const int CsmSize = PacketHeader.Size + 24;
    public const int NominateSize = PacketHeader.Size + 8;
    public const int AckSize = PacketHeader.Size + 24;
    public const int ProbeSize = PacketHeader.Size + 12;

    public const ushort RepairFlag = 1;
    public const ushort DownstreamFlag = 1;
    public const ushort LeavingFlag = 1;
    public const ushort StopFlag = 1;
    public const ushort ReplyFlag = 1;

    /// <summary>The largest depth an SPM may carry (repair servers between the source and a receiver).</summary>
    public const int MaxDepth = 64;

    /// <summary>The session field of any AER datagram (the 4 bytes after the common header), or false when too short.</summary>
    public static bool TryReadSession(ReadOnlySpan<byte> datagram, out uint session)
    {
        session = 0;
        if (datagram.Length < PacketHeader.Size + 4)
        {
            return false;
        }

        session = BinaryPrimitives.ReadUInt32LittleEndian(datagram[PacketHeader.Size..]);
        return true;
    }

    /// <summary>Writes a data packet's headers in front of a payload already at <c>datagram[DataHeaderSize..]</c>.</summary>
    public static int WriteDataHeader(Span<byte> datagram, in AerData data, int payloadLength)
    {
        int length = DataHeaderSize + payloadLength;
        new PacketHeader(DataType, 0, (ushort)length, data.Repair ? RepairFlag : (ushort)0).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, data.Session);
        BinaryPrimitives.WriteInt64LittleEndian(body[4..], data.Seq);
        BinaryPrimitives.WriteInt64LittleEndian(body[12..], data.SentTicks);
        return length;
    }

    /// <summary>Marks an encoded data packet as a repair (or not) in place.</summary>
    public static void SetRepair(Span<byte> datagram, bool repair)
        => BinaryPrimitives.WriteUInt16LittleEndian(datagram[10..], repair ? RepairFlag : (ushort)0);

    public static bool TryReadData(in PacketHeader header, ReadOnlySpan<byte> datagram, out AerData data, out ReadOnlySpan<byte> payload)
    {
        data = default;
        payload = default;
        if (datagram.Length < DataHeaderSize || (header.Flags & ~RepairFlag) != 0)
        {
            return false;
        }

        var body = datagram[PacketHeader.Size..];
        data = new AerData(BinaryPrimitives.ReadUInt32LittleEndian(body), BinaryPrimitives.ReadInt64LittleEndian(body[4..]),
            BinaryPrimitives.ReadInt64LittleEndian(body[12..]), (header.Flags & RepairFlag) != 0);
        payload = datagram[DataHeaderSize..];
        return data.Seq > 0;
    }

    public static int WriteSpm(Span<byte> datagram, in SourcePathMessage spm)
    {
        new PacketHeader(SpmType, 0, SpmSize).Write(datagram);
        var b = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(b, spm.Session);
        BinaryPrimitives.WriteUInt32LittleEndian(b[4..], spm.Source.Ip);
        BinaryPrimitives.WriteUInt16LittleEndian(b[8..], spm.Source.Port);
        BinaryPrimitives.WriteUInt32LittleEndian(b[10..], spm.Upstream.Ip);
        BinaryPrimitives.WriteUInt16LittleEndian(b[14..], spm.Upstream.Port);
        b[16] = (byte)spm.Depth;
        b[17] = 0;
        BinaryPrimitives.WriteInt64LittleEndian(b[18..], spm.SpmSeq);
        BinaryPrimitives.WriteInt64LittleEndian(b[26..], spm.HighestSeq);
        BinaryPrimitives.WriteInt64LittleEndian(b[34..], spm.LowestAvailable);
        BinaryPrimitives.WriteInt32LittleEndian(b[42..], spm.PathRttMicros);
        return SpmSize;
    }

    public static bool TryReadSpm(in PacketHeader header, ReadOnlySpan<byte> datagram, out SourcePathMessage spm)
    {
        spm = default;
        if (!TryReadBody(header, datagram, SpmSize, 0, out var b))
        {
            return false;
        }

        spm = new SourcePathMessage(BinaryPrimitives.ReadUInt32LittleEndian(b),
            new NetAddress(BinaryPrimitives.ReadUInt32LittleEndian(b[4..]), BinaryPrimitives.ReadUInt16LittleEndian(b[8..])),
            new NetAddress(BinaryPrimitives.ReadUInt32LittleEndian(b[10..]), BinaryPrimitives.ReadUInt16LittleEndian(b[14..])),
            b[16], BinaryPrimitives.ReadInt64LittleEndian(b[18..]), BinaryPrimitives.ReadInt64LittleEndian(b[26..]),
            BinaryPrimitives.ReadInt64LittleEndian(b[34..]), BinaryPrimitives.ReadInt32LittleEndian(b[42..]));
        return b[17] == 0 && spm.Depth <= MaxDepth && spm.SpmSeq > 0 && spm.HighestSeq >= 0 && spm.LowestAvailable >= 1
            && spm.LowestAvailable <= spm.HighestSeq + 1 && spm.PathRttMicros >= 0;
    }

    public static int WriteNak(Span<byte> datagram, in AerNak nak)
    {
        new PacketHeader(NakType, 0, NakSize, nak.Downstream ? DownstreamFlag : (ushort)0).Write(datagram);
        var b = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(b, nak.Session);
        BinaryPrimitives.WriteInt64LittleEndian(b[4..], nak.Seq);
        return NakSize;
    }

    public static bool TryReadNak(in PacketHeader header, ReadOnlySpan<byte> datagram, out AerNak nak)
    {
        nak = default;
        if (!TryReadBody(header, datagram, NakSize, DownstreamFlag, out var b))
        {
            return false;
        }

        nak = new AerNak(BinaryPrimitives.ReadUInt32LittleEndian(b), BinaryPrimitives.ReadInt64LittleEndian(b[4..]),
            (header.Flags & DownstreamFlag) != 0);
        return nak.Seq > 0;
    }

    public static int WriteCsm(Span<byte> datagram, in CongestionStateMessage csm)
    {
        new PacketHeader(CsmType, 0, CsmSize, csm.Leaving ? LeavingFlag : (ushort)0).Write(datagram);
        var b = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(b, csm.Session);
        BinaryPrimitives.WriteUInt32LittleEndian(b[4..], csm.Receiver.Ip);
        BinaryPrimitives.WriteUInt16LittleEndian(b[8..], csm.Receiver.Port);
        BinaryPrimitives.WriteUInt16LittleEndian(b[10..], 0);
        BinaryPrimitives.WriteDoubleLittleEndian(b[12..], csm.LossRate);
        BinaryPrimitives.WriteInt32LittleEndian(b[20..], csm.RttMicros);
        return CsmSize;
    }

    public static bool TryReadCsm(in PacketHeader header, ReadOnlySpan<byte> datagram, out CongestionStateMessage csm)
    {
        csm = default;
        if (!TryReadBody(header, datagram, CsmSize, LeavingFlag, out var b))
        {
            return false;
        }

        csm = new CongestionStateMessage(BinaryPrimitives.ReadUInt32LittleEndian(b),
            new NetAddress(BinaryPrimitives.ReadUInt32LittleEndian(b[4..]), BinaryPrimitives.ReadUInt16LittleEndian(b[8..])),
            BinaryPrimitives.ReadDoubleLittleEndian(b[12..]), BinaryPrimitives.ReadInt32LittleEndian(b[20..]),
            (header.Flags & LeavingFlag) != 0);
        return BinaryPrimitives.ReadUInt16LittleEndian(b[10..]) == 0 && double.IsFinite(csm.LossRate) && csm.LossRate >= 0
            && csm.LossRate <= 1 && csm.RttMicros >= 0 && !csm.Receiver.IsMulticast && csm.Receiver.Ip != 0;
    }

    public static int WriteNominate(Span<byte> datagram, uint session, uint epoch, bool stop)
    {
        new PacketHeader(NominateType, 0, NominateSize, stop ? StopFlag : (ushort)0).Write(datagram);
        BinaryPrimitives.WriteUInt32LittleEndian(datagram[PacketHeader.Size..], session);
        BinaryPrimitives.WriteUInt32LittleEndian(datagram[(PacketHeader.Size + 4)..], epoch);
        return NominateSize;
    }

    public static bool TryReadNominate(in PacketHeader header, ReadOnlySpan<byte> datagram, out uint session, out uint epoch, out bool stop)
    {
        session = epoch = 0;
        stop = false;
        if (!TryReadBody(header, datagram, NominateSize, StopFlag, out var b))
        {
            return false;
        }

        session = BinaryPrimitives.ReadUInt32LittleEndian(b);
        epoch = BinaryPrimitives.ReadUInt32LittleEndian(b[4..]);
        stop = (header.Flags & StopFlag) != 0;
        return epoch > 0;
    }

    public static int WriteAck(Span<byte> datagram, uint session, uint epoch, long seq, long echoTicks)
    {
        new PacketHeader(AckType, 0, AckSize).Write(datagram);
        var b = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(b, session);
        BinaryPrimitives.WriteUInt32LittleEndian(b[4..], epoch);
        BinaryPrimitives.WriteInt64LittleEndian(b[8..], seq);
        BinaryPrimitives.WriteInt64LittleEndian(b[16..], echoTicks);
        return AckSize;
    }

    public static bool TryReadAck(in PacketHeader header, ReadOnlySpan<byte> datagram, out uint session, out uint epoch, out long seq, out long echoTicks)
    {
        session = epoch = 0;
        seq = echoTicks = 0;
        if (!TryReadBody(header, datagram, AckSize, 0, out var b))
        {
            return false;
        }

        session = BinaryPrimitives.ReadUInt32LittleEndian(b);
        epoch = BinaryPrimitives.ReadUInt32LittleEndian(b[4..]);
        seq = BinaryPrimitives.ReadInt64LittleEndian(b[8..]);
        echoTicks = BinaryPrimitives.ReadInt64LittleEndian(b[16..]);
        return epoch > 0 && seq > 0;
    }

    public static int WriteProbe(Span<byte> datagram, uint session, long ticks, bool reply)
    {
        new PacketHeader(ProbeType, 0, ProbeSize, reply ? ReplyFlag : (ushort)0).Write(datagram);
        BinaryPrimitives.WriteUInt32LittleEndian(datagram[PacketHeader.Size..], session);
        BinaryPrimitives.WriteInt64LittleEndian(datagram[(PacketHeader.Size + 4)..], ticks);
        return ProbeSize;
    }

    public static bool TryReadProbe(in PacketHeader header, ReadOnlySpan<byte> datagram, out uint session, out long ticks, out bool reply)
    {
        session = 0;
        ticks = 0;
        reply = false;
        if (!TryReadBody(header, datagram, ProbeSize, ReplyFlag, out var b))
        {
            return false;
        }

        session = BinaryPrimitives.ReadUInt32LittleEndian(b);
        ticks = BinaryPrimitives.ReadInt64LittleEndian(b[4..]);
        reply = (header.Flags & ReplyFlag) != 0;
        return true;
    }

    /// <summary>The body after the common header of a fixed-size packet: false unless the datagram is exactly
    /// <paramref name="size"/> bytes and no flag but <paramref name="allowedFlags"/> is set.</summary>
    private static bool TryReadBody(in PacketHeader header, ReadOnlySpan<byte> datagram, int size, ushort allowedFlags, out ReadOnlySpan<byte> body)
    {
        body = default;
        if (datagram.Length != size || (header.Flags & ~allowedFlags) != 0)
        {
            return false;
        }

        body = datagram[PacketHeader.Size..];
        return true;
    }
}
