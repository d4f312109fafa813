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
    Start = 5,
    Skip = 6,
}

/// <summary>
/// QSM regional wire formats (docs/wire-format.md). Data and repairs are datagrams:
/// <c>PacketHeader(QsmData, sender) | u32 region | u32 view | u64 viewStart | u64 seq | u64 settled | u64 cached | payload</c>. Control messages ride reliable unicast:
/// <c>u8 kind | u32 region | ...</c>: Pull and Nak carry <c>u32 sender | u16 partition | u16 partitions | NakSet</c>
/// (indices k of packets seq = k·partitions + partition); Ack carries <c>u32 sender | u64 stable | u64 maxSeen | f64 rate | f64 loss</c>.
/// </summary>
/// <summary>A collective ACK (see <see cref="RegionWire.WriteAck"/>).</summary>
internal readonly record struct RegionAck(uint Region, uint Sender, uint View, ulong Stable, ulong MaxSeen, double Rate, double Loss);

/// <summary>A receiver's flow status (see <see cref="RegionWire.WriteStatus"/>): how far it has taken a sender's stream and
/// how many bytes beyond that it can take. <see cref="Reporter"/> is the node that sent it (the common header's sender).
/// <see cref="Slowest"/> is the member at <see cref="Position"/> (the reporter, in a member's report) and
/// <see cref="Leading"/> the furthest position over the members heard (the reporter's own, in a member's report): a
/// sender held back by one member far behind the others can tell it to skip ahead (<see cref="SlowReceiverPolicy.SkipAhead"/>).</summary>
internal readonly record struct FlowStatus(uint Reporter, uint Region, uint View, uint Sender, int Partition, bool Aggregate, bool Complete,
    ulong Position, uint WindowBytes, GapMap Missing, ulong Highest, uint Slowest = 0, ulong Leading = 0, bool Partial = false,
    bool Overflowed = false, ulong Cached = 0, bool RoomAboveHighest = false);

/// <summary>The fixed part of a QSM data packet. <see cref="Settled"/> (0 when unknown, and in repairs) is the point up to
/// which the sender's flow reports say every member of its view has taken its stream (docs/qsm.md, "Purging on the
/// sender's word"): a member may drop its copies up to there at once, instead of at the next token round.
/// <see cref="Cached"/> (0 when unknown, and in repairs; at least <see cref="Settled"/>) is the sender's cached point
/// (docs/qsm.md, "Partition share"): every packet up to there is held by every member of its caching partition, so a member
/// with the partition share may release its delivered copies of other partitions' packets up to there.</summary>
internal readonly record struct DataHeader(uint Sender, uint Region, uint View, ulong ViewStart, ulong Seq, ulong Settled = 0,
    bool ReportRequested = false, ulong Cached = 0);

internal static class RegionWire
{
    /// <summary>The packet type of region data and repairs.</summary>
    public const PacketType DataType = (PacketType)5;

    /// <summary>The reliable control channel of tokens, pulls, NAKs and ACKs.</summary>
    public const byte ControlChannel = 2;

    public const int DataHeaderSize = PacketHeader.Size + 40;

    /// <summary>Where a data packet's <c>settled</c> field is (a sender rewrites it when it resends a packet).</summary>
    public const int SettledOffset = PacketHeader.Size + 24;

    /// <summary>Where a data packet's <c>cached</c> field is (rewritten with <c>settled</c> on a resend).</summary>
    public const int CachedOffset = PacketHeader.Size + 32;

    /// <summary>The packet type of receivers' flow status reports (docs/wire-format.md, "Flow status").</summary>
    public const PacketType StatusType = (PacketType)34;

    public const int StatusSize = PacketHeader.Size + 64;

    /// <summary>The longest status: <see cref="StatusSize"/> and the gap map's 15 further words (<see cref="GapMap"/>).</summary>
    public const int MaxStatusSize = StatusSize + (GapMap.Words - 1) * 8;

    /// <summary>Data packet flag: the sender asks every member to report its flow status as soon as its position
    /// reaches this packet (it is about to run out of window; docs/qsm.md "Congestion control").</summary>
    private const ushort DataReportRequestFlag = 1;
    private const ushort StatusAggregateFlag = 1;
    private const ushort StatusCompleteFlag = 2;
    private const ushort StatusPartialFlag = 4;
    private const ushort StatusOverflowedFlag = 8;
    private const ushort StatusRoomAboveHighestFlag = 16;

    /// <summary>The view field of a repair (a member forwarding a cached packet): it says nothing about where the sender's
    /// view started, and its source is not the sender. Region views are numbered from 1.</summary>
    public const uint RepairView = 0;

    /// <summary>A data packet: <c>PacketHeader(QsmData, sender) | u32 region | u32 view | u64 viewStart | u64 seq | u64 settled | u64 cached | payload</c>.
    /// <c>view</c> is the region view the sender was using, <c>viewStart</c> the first seq it sent in that view: a member
    /// that joined mid-stream starts there (docs/qsm.md, "Joining mid-stream"); <c>settled</c>, below <c>seq</c>, see
    /// <see cref="DataHeader.Settled"/>; <c>cached</c>, below <c>seq</c>, see <see cref="DataHeader.Cached"/>.</summary>
    public static int WriteData(Span<byte> datagram, in DataHeader header, ReadOnlySpan<byte> payload)
    {
        payload.CopyTo(datagram[DataHeaderSize..]);
        return WriteHeader(datagram, header, payload.Length);
    }

    /// <summary>Writes a data packet's headers in front of a payload already in place at
    /// <c>datagram[DataHeaderSize..]</c> (the copy-free send path); returns the datagram's length.</summary>
    public static int WriteHeader(Span<byte> datagram, in DataHeader header, int payloadLength)
    {
        int length = DataHeaderSize + payloadLength;
        new PacketHeader(DataType, header.Sender, (ushort)length, header.ReportRequested ? DataReportRequestFlag : (ushort)0).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, header.Region);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], header.View);
        BinaryPrimitives.WriteUInt64LittleEndian(body[8..], header.ViewStart);
        BinaryPrimitives.WriteUInt64LittleEndian(body[16..], header.Seq);
        BinaryPrimitives.WriteUInt64LittleEndian(body[24..], header.Settled);
        BinaryPrimitives.WriteUInt64LittleEndian(body[32..], header.Cached);
        return length;
    }

    public static bool TryReadData(scoped in PacketHeader common, ReadOnlySpan<byte> datagram, out DataHeader header, out ReadOnlySpan<byte> payload)
    {
        header = default;
        payload = default;
        if (common.Type != DataType || datagram.Length < DataHeaderSize)
        {
            return false;
        }

        var body = datagram[PacketHeader.Size..];
        header = new DataHeader(
            common.Sender,
            BinaryPrimitives.ReadUInt32LittleEndian(body),
            BinaryPrimitives.ReadUInt32LittleEndian(body[4..]),
            BinaryPrimitives.ReadUInt64LittleEndian(body[8..]),
            BinaryPrimitives.ReadUInt64LittleEndian(body[16..]),
            BinaryPrimitives.ReadUInt64LittleEndian(body[24..]),
            (common.Flags & DataReportRequestFlag) != 0,
            BinaryPrimitives.ReadUInt64LittleEndian(body[32..]));
        payload = datagram[DataHeaderSize..];
        return header.Seq > 0 && header.ViewStart > 0 && header.ViewStart <= header.Seq && header.Settled < header.Seq && header.Cached < header.Seq;
    }

    /// <summary>Parses the common header too (tests and tools that see raw datagrams).</summary>
    public static bool TryReadData(ReadOnlySpan<byte> datagram, out DataHeader header, out ReadOnlySpan<byte> payload)
    {
        header = default;
        payload = default;
        return PacketHeader.TryRead(datagram, out var common) == WireError.None && TryReadData(common, datagram, out header, out payload);
    }

    /// <summary>The size of a stream-start hint or a skip notice: <c>u8 kind | u32 region | u32 sender | u32 view | u64
    /// point</c>.</summary>
    public const int StartSize = 21;

    /// <summary>The size of a skip notice (the layout of <see cref="StartSize"/>).</summary>
    public const int SkipSize = StartSize;

    /// <summary>A sender's stream-start hint to a member new in its view (docs/wire-format.md, "Stream start"): the view
    /// that first includes the member and the first seq the sender numbers in it, what a data packet's header would tell
    /// the member had the sender sent one. Reliable unicast, sender to member.</summary>
    public static int WriteStart(Span<byte> message, uint region, uint sender, uint view, ulong viewStart)
        => WriteSenderPoint(message, RegionControl.Start, region, sender, view, viewStart);

    /// <summary>Reads a stream-start hint as the data header it stands for (seq = viewStart); false if malformed (wrong
    /// length, view 0, viewStart 0).</summary>
    public static bool TryReadStart(ReadOnlySpan<byte> message, out DataHeader header)
    {
        bool ok = TryReadSenderPoint(message, RegionControl.Start, out uint region, out uint sender, out uint view, out ulong viewStart);
        header = ok ? new DataHeader(sender, region, view, viewStart, viewStart) : default;
        return ok;
    }

    /// <summary>A sender's notice to a member that held it back too long (<see cref="SlowReceiverPolicy.SkipAhead"/>,
    /// docs/wire-format.md, "QSM control messages"): hand none of the sender's packets up to <paramref name="through"/>
    /// to the application (still receive, cache and repair them). Reliable unicast, sender to member.</summary>
    public static int WriteSkip(Span<byte> message, uint region, uint sender, uint view, ulong through)
        => WriteSenderPoint(message, RegionControl.Skip, region, sender, view, through);

    /// <summary>Reads a skip notice; false if malformed (wrong length, view 0, through 0).</summary>
    public static bool TryReadSkip(ReadOnlySpan<byte> message, out uint region, out uint sender, out uint view, out ulong through)
        => TryReadSenderPoint(message, RegionControl.Skip, out region, out sender, out view, out through);

    private static int WriteSenderPoint(Span<byte> message, RegionControl kind, uint region, uint sender, uint view, ulong point)
    {
        message[0] = (byte)kind;
        BinaryPrimitives.WriteUInt32LittleEndian(message[1..], region);
        BinaryPrimitives.WriteUInt32LittleEndian(message[5..], sender);
        BinaryPrimitives.WriteUInt32LittleEndian(message[9..], view);
        BinaryPrimitives.WriteUInt64LittleEndian(message[13..], point);
        return StartSize;
    }

    /// <summary>False for a wrong length or kind, view 0 (a repair's) or point 0.</summary>
    private static bool TryReadSenderPoint(ReadOnlySpan<byte> message, RegionControl kind, out uint region, out uint sender, out uint view, out ulong point)
    {
        region = sender = view = 0;
        point = 0;
        if (message.Length != StartSize || message[0] != (byte)kind)
        {
            return false;
        }

        region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]);
        sender = BinaryPrimitives.ReadUInt32LittleEndian(message[5..]);
        view = BinaryPrimitives.ReadUInt32LittleEndian(message[9..]);
        point = BinaryPrimitives.ReadUInt64LittleEndian(message[13..]);
        return view != RepairView && point > 0;
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
        return partitions > 0 && partition < partitions && into.TryRead(message[13..]) == message.Length - 13; // no trailing bytes
    }

    /// <summary>The collective ACK: <c>u8 kind | u32 region | u32 sender | u32 view | u64 stable | u64 maxSeen | f64 rate |
    /// f64 loss</c> (45 bytes). <c>view</c> is the region view of the token round that computed it: stability holds
    /// among that view's members only.</summary>
    public static int WriteAck(Span<byte> message, in RegionAck ack)
    {
        message[0] = (byte)RegionControl.Ack;
        BinaryPrimitives.WriteUInt32LittleEndian(message[1..], ack.Region);
        BinaryPrimitives.WriteUInt32LittleEndian(message[5..], ack.Sender);
        BinaryPrimitives.WriteUInt32LittleEndian(message[9..], ack.View);
        BinaryPrimitives.WriteUInt64LittleEndian(message[13..], ack.Stable);
        BinaryPrimitives.WriteUInt64LittleEndian(message[21..], ack.MaxSeen);
        BinaryPrimitives.WriteDoubleLittleEndian(message[29..], ack.Rate);
        BinaryPrimitives.WriteDoubleLittleEndian(message[37..], ack.Loss);
        return AckSize;
    }

    public const int AckSize = 45;

    public static bool TryReadAck(ReadOnlySpan<byte> message, out RegionAck ack)
    {
        ack = default;
        if (message.Length != AckSize)
        {
            return false;
        }

        ack = new RegionAck(
            BinaryPrimitives.ReadUInt32LittleEndian(message[1..]),
            BinaryPrimitives.ReadUInt32LittleEndian(message[5..]),
            BinaryPrimitives.ReadUInt32LittleEndian(message[9..]),
            BinaryPrimitives.ReadUInt64LittleEndian(message[13..]),
            BinaryPrimitives.ReadUInt64LittleEndian(message[21..]),
            BinaryPrimitives.ReadDoubleLittleEndian(message[29..]),
            BinaryPrimitives.ReadDoubleLittleEndian(message[37..]));
        return double.IsFinite(ack.Rate) && ack.Rate >= 0 && ack.Loss >= 0 && ack.Loss <= 1 && ack.Stable <= ack.MaxSeen && ack.View > 0;
    }

    /// <summary>A flow status datagram: <c>PacketHeader(Status, reporter, flags) | u32 region | u32 view | u32 sender |
    /// u32 partition | u64 position | u32 windowBytes | u64 missing | u64 highest | u32 slowest | u64 leading</c> (68 bytes). Flags: 1 = a partition leader's
    /// aggregate (to the sender), else one member's report (to its partition leader); 2 = the aggregate covers every
    /// member of the partition (or block); 4 = partial: a partition leader's aggregate to its block's aggregator, in a
    /// region of more than <see cref="RegionOptions.ReportFanIn"/> partitions (only with 1); 8 = overflowed: the
    /// reporter's receive queue (for an aggregate, some member's) dropped datagrams for being full since its last report
    /// of this stream (QSM's congestion signal); 16 = room above highest: the reporter (for an aggregate, every member
    /// heard) holds everything up to <c>highest</c> within its byte bound less a window, so the sender may count the
    /// window from <c>highest</c> rather than from <c>position</c> (docs/qsm.md, "The window above a gap"). Bit i of <c>missing</c> says packet position + 1 + i has not arrived (at some member of
    /// the partition, for an aggregate) though a later one has; <c>highest</c> is the highest packet that arrived (the
    /// lowest such over the partition, for an aggregate): below the sender's last packet, long after it left, it says
    /// the tail was lost. <c>slowest</c> is the node at <c>position</c> and <c>leading</c> the furthest position of any
    /// member heard (the reporter's, for one member's report): who holds the sender back, and by how much. <c>cached</c>
    /// (with the partition share; 0 otherwise) is the highest packet up to which the reporter holds every packet of its
    /// partition's class, and for a partition's aggregate the lowest over its members (every replica holds it), for a
    /// block's the lowest over its partitions: the sender's cached point is built from it (docs/qsm.md, "Partition share").</summary>
    public static int WriteStatus(Span<byte> datagram, in FlowStatus status)
    {
        ushort flags = (ushort)((status.Aggregate ? StatusAggregateFlag : 0) | (status.Complete ? StatusCompleteFlag : 0)
                                | (status.Partial ? StatusPartialFlag : 0) | (status.Overflowed ? StatusOverflowedFlag : 0)
                                | (status.RoomAboveHighest ? StatusRoomAboveHighestFlag : 0));
        int words = Math.Max(status.Missing.UsedWords, 1);
        int length = StatusSize + ((words - 1) * 8);
        new PacketHeader(StatusType, status.Reporter, (ushort)length, flags).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, status.Region);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], status.View);
        BinaryPrimitives.WriteUInt32LittleEndian(body[8..], status.Sender);
        BinaryPrimitives.WriteUInt32LittleEndian(body[12..], (uint)status.Partition);
        BinaryPrimitives.WriteUInt64LittleEndian(body[16..], status.Position);
        BinaryPrimitives.WriteUInt32LittleEndian(body[24..], status.WindowBytes);
        BinaryPrimitives.WriteUInt64LittleEndian(body[28..], status.Missing.Word(0));
        BinaryPrimitives.WriteUInt64LittleEndian(body[36..], status.Highest);
        BinaryPrimitives.WriteUInt32LittleEndian(body[44..], status.Slowest);
        BinaryPrimitives.WriteUInt64LittleEndian(body[48..], status.Leading);
        BinaryPrimitives.WriteUInt64LittleEndian(body[56..], status.Cached);
        for (int i = 1; i < words; i++)
        {
            BinaryPrimitives.WriteUInt64LittleEndian(body[(56 + (i * 8))..], status.Missing.Word(i));
        }

        return length;
    }

    public static bool TryReadStatus(scoped in PacketHeader common, ReadOnlySpan<byte> datagram, out FlowStatus status)
    {
        status = default;
        if (common.Type != StatusType || datagram.Length < StatusSize || datagram.Length > MaxStatusSize || (datagram.Length - StatusSize) % 8 != 0
            || (common.Flags & ~(StatusAggregateFlag | StatusCompleteFlag | StatusPartialFlag | StatusOverflowedFlag | StatusRoomAboveHighestFlag)) != 0)
        {
            return false;
        }

        var body = datagram[PacketHeader.Size..];
        uint partition = BinaryPrimitives.ReadUInt32LittleEndian(body[12..]);
        GapMap missing = BinaryPrimitives.ReadUInt64LittleEndian(body[28..]);
        for (int i = 1; i <= (datagram.Length - StatusSize) / 8; i++)
        {
            missing.SetWord(i, BinaryPrimitives.ReadUInt64LittleEndian(body[(56 + (i * 8))..]));
        }

        status = new FlowStatus(
            common.Sender,
            BinaryPrimitives.ReadUInt32LittleEndian(body),
            BinaryPrimitives.ReadUInt32LittleEndian(body[4..]),
            BinaryPrimitives.ReadUInt32LittleEndian(body[8..]),
            (int)Math.Min(partition, int.MaxValue),
            (common.Flags & StatusAggregateFlag) != 0,
            (common.Flags & StatusCompleteFlag) != 0,
            BinaryPrimitives.ReadUInt64LittleEndian(body[16..]),
            BinaryPrimitives.ReadUInt32LittleEndian(body[24..]),
            missing,
            BinaryPrimitives.ReadUInt64LittleEndian(body[36..]),
            BinaryPrimitives.ReadUInt32LittleEndian(body[44..]),
            BinaryPrimitives.ReadUInt64LittleEndian(body[48..]),
            (common.Flags & StatusPartialFlag) != 0,
            (common.Flags & StatusOverflowedFlag) != 0,
            BinaryPrimitives.ReadUInt64LittleEndian(body[56..]),
            (common.Flags & StatusRoomAboveHighestFlag) != 0);
        return status.View > 0 && (status.Aggregate || !status.Partial) && partition <= ushort.MaxValue && (status.Aggregate || !status.Complete) && status.Highest >= status.Position
               && status.Leading >= status.Position;
    }
}
