using System.Buffers.Binary;
using QuickSilver.Core.Wire;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>Kinds of QSM control messages, the first byte of a reliable-unicast payload.</summary>
internal enum RegionControl : byte
{
    Token = 1,
    Pull = 2,
    Nak = 3,
    Ack = 4,
}

/// <summary>
/// QSM regional wire formats (docs/wire-format.md). Data and repairs are datagrams:
/// <c>PacketHeader(QsmData, sender) | u32 region | u64 seq | payload</c>. Control messages ride reliable unicast:
/// <c>u8 kind | u32 region | ...</c>: Pull and Nak carry <c>u32 sender | u16 partition | u16 partitions | NakSet</c>
/// (indices k of packets seq = k·partitions + partition); Ack carries <c>u32 sender | u64 stable | u64 maxSeen | f64 rate</c>.
/// </summary>
internal static class RegionWire
{
    public const int DataHeaderSize = PacketHeader.Size + 12;

    public static int WriteData(Span<byte> datagram, uint sender, uint region, ulong seq, ReadOnlySpan<byte> payload)
    {
        int length = DataHeaderSize + payload.Length;
        new PacketHeader(PacketType.QsmData, sender, (ushort)length).Write(datagram);
        BinaryPrimitives.WriteUInt32LittleEndian(datagram[PacketHeader.Size..], region);
        BinaryPrimitives.WriteUInt64LittleEndian(datagram[(PacketHeader.Size + 4)..], seq);
        payload.CopyTo(datagram[DataHeaderSize..]);
        return length;
    }

    public static bool TryReadData(ReadOnlySpan<byte> datagram, out uint sender, out uint region, out ulong seq, out ReadOnlySpan<byte> payload)
    {
        sender = region = 0;
        seq = 0;
        payload = default;
        if (PacketHeader.TryRead(datagram, out var header) != WireError.None || header.Type != PacketType.QsmData
            || datagram.Length < DataHeaderSize)
        {
            return false;
        }

        sender = header.Sender;
        region = BinaryPrimitives.ReadUInt32LittleEndian(datagram[PacketHeader.Size..]);
        seq = BinaryPrimitives.ReadUInt64LittleEndian(datagram[(PacketHeader.Size + 4)..]);
        payload = datagram[DataHeaderSize..];
        return seq > 0;
    }

    public static int WriteRanges(Span<byte> message, RegionControl kind, uint region, uint sender, int partition, int partitions, NakSet ranges)
    {
        message[0] = (byte)kind;
        BinaryPrimitives.WriteUInt32LittleEndian(message[1..], region);
        BinaryPrimitives.WriteUInt32LittleEndian(message[5..], sender);
        BinaryPrimitives.WriteUInt16LittleEndian(message[9..], (ushort)partition);
        BinaryPrimitives.WriteUInt16LittleEndian(message[11..], (ushort)partitions);
        return 13 + ranges.Write(message[13..]);
    }

    public static bool TryReadRanges(ReadOnlySpan<byte> message, NakSet into, out uint region, out uint sender, out int partition, out int partitions)
    {
        region = sender = 0;
        partition = partitions = 0;
        if (message.Length < 15)
        {
            return false;
        }

        region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]);
        sender = BinaryPrimitives.ReadUInt32LittleEndian(message[5..]);
        partition = BinaryPrimitives.ReadUInt16LittleEndian(message[9..]);
        partitions = BinaryPrimitives.ReadUInt16LittleEndian(message[11..]);
        return partitions > 0 && partition < partitions && into.TryRead(message[13..]) > 0;
    }

    public static int WriteAck(Span<byte> message, uint region, uint sender, ulong stable, ulong maxSeen, double rate)
    {
        message[0] = (byte)RegionControl.Ack;
        BinaryPrimitives.WriteUInt32LittleEndian(message[1..], region);
        BinaryPrimitives.WriteUInt32LittleEndian(message[5..], sender);
        BinaryPrimitives.WriteUInt64LittleEndian(message[9..], stable);
        BinaryPrimitives.WriteUInt64LittleEndian(message[17..], maxSeen);
        BinaryPrimitives.WriteDoubleLittleEndian(message[25..], rate);
        return 33;
    }

    public static bool TryReadAck(ReadOnlySpan<byte> message, out uint region, out uint sender, out ulong stable, out ulong maxSeen, out double rate)
    {
        region = sender = 0;
        stable = maxSeen = 0;
        rate = 0;
        if (message.Length != 33)
        {
            return false;
        }

        region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]);
        sender = BinaryPrimitives.ReadUInt32LittleEndian(message[5..]);
        stable = BinaryPrimitives.ReadUInt64LittleEndian(message[9..]);
        maxSeen = BinaryPrimitives.ReadUInt64LittleEndian(message[17..]);
        rate = BinaryPrimitives.ReadDoubleLittleEndian(message[25..]);
        return !double.IsNaN(rate) && rate >= 0 && stable <= maxSeen;
    }
}
