using System.Buffers.Binary;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// Reliable unicast packets, after the common 12-byte header (little-endian; docs/wire-format.md):
/// <code>
/// ReliableData, ReliableFragment: u32 senderEpoch | u32 receiverEpoch (0 = not yet known) | u64 seq | payload
///               (ReliableData ends a message; ReliableFragment is followed by the message's next segment)
/// ReliableAck:  u32 senderEpoch | u32 receiverEpoch | u64 next expected seq | u64 SACK bitmap
///               (bit i set: seq next+1+i has arrived)
/// </code>
/// </summary>
internal static class ReliableWire
{
    /// <summary>A data segment that ends its message.</summary>
    public const PacketType DataType = (PacketType)3;

    /// <summary>A cumulative + selective acknowledgement.</summary>
    public const PacketType AckType = (PacketType)4;

    /// <summary>A data segment that does not end its message (the next segment continues it).</summary>
    public const PacketType FragmentType = (PacketType)6;

    public const int DataHeaderSize = 16;
    public const int AckBodySize = 24;

    internal static int WriteData(Span<byte> datagram, PacketType type, uint sender, uint senderEpoch, uint receiverEpoch, ulong seq, ReadOnlySpan<byte> payload)
    {
        int length = PacketHeader.Size + DataHeaderSize + payload.Length;
        new PacketHeader(type, sender, (ushort)length).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, senderEpoch);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], receiverEpoch);
        BinaryPrimitives.WriteUInt64LittleEndian(body[8..], seq);
        payload.CopyTo(body[DataHeaderSize..]);
        return length;
    }

    internal static int WriteAck(Span<byte> datagram, uint sender, uint senderEpoch, uint receiverEpoch, ulong next, ulong sack)
    {
        int length = PacketHeader.Size + AckBodySize;
        new PacketHeader(AckType, sender, (ushort)length).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, senderEpoch);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], receiverEpoch);
        BinaryPrimitives.WriteUInt64LittleEndian(body[8..], next);
        BinaryPrimitives.WriteUInt64LittleEndian(body[16..], sack);
        return length;
    }

    internal readonly record struct Data(uint SenderEpoch, uint ReceiverEpoch, ulong Seq, int PayloadOffset, int PayloadLength);

    internal readonly record struct Ack(uint SenderEpoch, uint ReceiverEpoch, ulong Next, ulong Sack);

    internal static WireError TryReadData(ReadOnlySpan<byte> body, out Data data)
    {
        data = default;
        if (body.Length < DataHeaderSize)
        {
            return WireError.Truncated;
        }

        uint senderEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body);
        if (senderEpoch == 0)
        {
            return WireError.Malformed;
        }

        data = new Data(senderEpoch, BinaryPrimitives.ReadUInt32LittleEndian(body[4..]), BinaryPrimitives.ReadUInt64LittleEndian(body[8..]),
            PacketHeader.Size + DataHeaderSize, body.Length - DataHeaderSize);
        return WireError.None;
    }

    internal static WireError TryReadAck(ReadOnlySpan<byte> body, out Ack ack)
    {
        ack = default;
        if (body.Length != AckBodySize)
        {
            return body.Length < AckBodySize ? WireError.Truncated : WireError.Oversized;
        }

        uint senderEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body);
        uint receiverEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body[4..]);
        if (senderEpoch == 0 || receiverEpoch == 0)
        {
            return WireError.Malformed;
        }

        ack = new Ack(senderEpoch, receiverEpoch, BinaryPrimitives.ReadUInt64LittleEndian(body[8..]), BinaryPrimitives.ReadUInt64LittleEndian(body[16..]));
        return WireError.None;
    }
}
