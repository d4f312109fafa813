using System.Buffers.Binary;
using System.Security.Cryptography;

namespace QuickSilver.Federation.CoreCast;

/// <summary>
/// CoreCast's two packets (seed 004, §3.2), little-endian, as this data plane carries them between domains:
/// <code>
/// payload: [u8 version 1][u8 type 1][u32 channel][20 B SHA-1 of data][u16 length][data]     28 + length bytes
/// header:  [u8 version 1][u8 type 2][u32 channel][20 B SHA-1 of data][u32 destination]      30 bytes
/// </code>
/// The hash names the payload: a header refers to the payload with the same hash, so an egress never rebuilds a packet
/// from the wrong payload. SHA-1 is the seed's choice and serves as a content name, not as security.
/// </summary>
public static class CoreCastWire
{
    public const byte Version = 1;

    public const byte PayloadType = 1;

    public const byte HeaderType = 2;

    public const int HashBytes = 20;

    public const int PayloadOverhead = 2 + 4 + HashBytes + 2;

    public const int HeaderBytes = 2 + 4 + HashBytes + 4;

    public const int MaxData = 65_000;

    /// <summary>The SHA-1 of <paramref name="data"/>.</summary>
#pragma warning disable CA5350 // SHA-1 is CoreCast's payload name (seed §3.2), not a security mechanism.
    public static byte[] Hash(ReadOnlySpan<byte> data) => SHA1.HashData(data);
#pragma warning restore CA5350

    public static byte[] Payload(uint channel, ReadOnlySpan<byte> hash, ReadOnlySpan<byte> data)
    {
        var p = new byte[PayloadOverhead + data.Length];
        p[0] = Version;
        p[1] = PayloadType;
        BinaryPrimitives.WriteUInt32LittleEndian(p.AsSpan(2), channel);
        hash.CopyTo(p.AsSpan(6));
        BinaryPrimitives.WriteUInt16LittleEndian(p.AsSpan(26), checked((ushort)data.Length));
        data.CopyTo(p.AsSpan(PayloadOverhead));
        return p;
    }

    public static byte[] Header(uint channel, ReadOnlySpan<byte> hash, uint destination)
    {
        var p = new byte[HeaderBytes];
        p[0] = Version;
        p[1] = HeaderType;
        BinaryPrimitives.WriteUInt32LittleEndian(p.AsSpan(2), channel);
        hash.CopyTo(p.AsSpan(6));
        BinaryPrimitives.WriteUInt32LittleEndian(p.AsSpan(26), destination);
        return p;
    }

    /// <summary>Parses either packet; false when truncated, of another version or type, or with a length that does not
    /// match the bytes present.</summary>
    /// <summary><see cref="TryParse"/>, and for a payload packet the check that its data hashes to its hash: what both
    /// routers take a packet through. False (and counted as <c>Malformed</c> or <c>HashMismatch</c>) to drop it.</summary>
    public static bool TryAccept(ReadOnlySpan<byte> packet, CoreCastCounters counters, out byte type, out uint channel, out ReadOnlySpan<byte> hash,
        out uint destination, out ReadOnlySpan<byte> data)
    {
        ArgumentNullException.ThrowIfNull(counters);
        if (!TryParse(packet, out type, out channel, out hash, out destination, out data))
        {
            counters.Malformed++;
            return false;
        }

        Span<byte> actual = stackalloc byte[HashBytes]; // SHA-1, no allocation per packet
#pragma warning disable CA5350 // SHA-1 is CoreCast's payload name (seed §3.2), not a security mechanism.
        if (type == PayloadType && (!SHA1.TryHashData(data, actual, out int written) || !actual[..written].SequenceEqual(hash)))
#pragma warning restore CA5350
        {
            counters.HashMismatch++;
            return false;
        }

        return true;
    }

    public static bool TryParse(ReadOnlySpan<byte> packet, out byte type, out uint channel, out ReadOnlySpan<byte> hash, out uint destination, out ReadOnlySpan<byte> data)
    {
        type = 0;
        channel = destination = 0;
        hash = data = default;
        if (packet.Length < 2 + 4 + HashBytes || packet[0] != Version)
        {
            return false;
        }

        type = packet[1];
        channel = BinaryPrimitives.ReadUInt32LittleEndian(packet[2..]);
        hash = packet.Slice(6, HashBytes);
        if (type == HeaderType)
        {
            if (packet.Length != HeaderBytes)
            {
                return false;
            }

            destination = BinaryPrimitives.ReadUInt32LittleEndian(packet[26..]);
            return true;
        }

        if (type != PayloadType || packet.Length < PayloadOverhead)
        {
            return false;
        }

        int length = BinaryPrimitives.ReadUInt16LittleEndian(packet[26..]);
        if (packet.Length != PayloadOverhead + length || length > MaxData)
        {
            return false;
        }

        data = packet.Slice(PayloadOverhead, length);
        return true;
    }
}
