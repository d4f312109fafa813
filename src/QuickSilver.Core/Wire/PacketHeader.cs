using System.Buffers.Binary;

namespace QuickSilver.Core.Wire;

/// <summary>
/// The common 12-byte header that starts every QuickSilver datagram (little-endian; see docs/wire-format.md):
/// <code>
/// offset size field
///  0     2    magic   0x5351 ("QS" on the wire as 'Q','S')
///  2     1    version 1
///  3     1    type    PacketType
///  4     4    sender  sender node id
///  8     2    length  total datagram length in bytes, header included
/// 10     2    flags   type-specific; 0 when unused
/// </code>
/// </summary>
public readonly struct PacketHeader
{
    public const int Size = 12;
    public const ushort Magic = 0x5351;
    public const byte CurrentVersion = 1;

    public PacketHeader(PacketType type, uint sender, ushort length, ushort flags = 0)
    {
        Type = type;
        Sender = sender;
        Length = length;
        Flags = flags;
    }

    public PacketType Type { get; }
    public uint Sender { get; }
    public ushort Length { get; }
    public ushort Flags { get; }

    /// <summary>Writes the header into the first <see cref="Size"/> bytes of <paramref name="destination"/>.</summary>
    public void Write(Span<byte> destination)
    {
        if (destination.Length < Size)
        {
            throw new ArgumentException($"Need {Size} bytes for a packet header, got {destination.Length}.", nameof(destination));
        }

        BinaryPrimitives.WriteUInt16LittleEndian(destination, Magic);
        destination[2] = CurrentVersion;
        destination[3] = (byte)Type;
        BinaryPrimitives.WriteUInt32LittleEndian(destination[4..], Sender);
        BinaryPrimitives.WriteUInt16LittleEndian(destination[8..], Length);
        BinaryPrimitives.WriteUInt16LittleEndian(destination[10..], Flags);
    }

    /// <summary>
    /// Parses and validates a header. Never throws: returns a <see cref="WireError"/> other than None when the datagram
    /// is too short, has the wrong magic or version, an unknown type (0), or a length field that disagrees with the datagram.
    /// </summary>
    public static WireError TryRead(ReadOnlySpan<byte> datagram, out PacketHeader header)
    {
        header = default;
        if (datagram.Length < Size)
        {
            return WireError.Truncated;
        }

        if (BinaryPrimitives.ReadUInt16LittleEndian(datagram) != Magic)
        {
            return WireError.BadMagic;
        }

        if (datagram[2] != CurrentVersion)
        {
            return WireError.UnknownVersion;
        }

        var type = (PacketType)datagram[3];
        if (type == PacketType.None)
        {
            return WireError.UnknownType;
        }

        ushort length = BinaryPrimitives.ReadUInt16LittleEndian(datagram[8..]);
        if (length != datagram.Length)
        {
            return length > datagram.Length ? WireError.Truncated : WireError.Oversized;
        }

        header = new PacketHeader(type, BinaryPrimitives.ReadUInt32LittleEndian(datagram[4..]), length,
            BinaryPrimitives.ReadUInt16LittleEndian(datagram[10..]));
        return WireError.None;
    }
}
