using QuickSilver.Core;

namespace QuickSilver.Qsm.Region;

/// <summary>What paces a region's senders (docs/qsm.md, "Flow control").</summary>
public enum RegionFlowControl
{
    /// <summary>The receivers: each reports how far it has taken each sender's stream and how many bytes beyond that it
    /// can take (a flow status, every few packets and on a short timer); partition leaders aggregate the reports, and a
    /// sender sends only while its bytes beyond the slowest receiver's position fit that receiver's window (the model is
    /// Aeron's min-multicast flow control). The reports also acknowledge: once every member has taken a packet, the
    /// sender may release it without waiting for the token. The default.</summary>
    ReceiverWindow,

    /// <summary>The paper's rate controller alone (§2.4, formulas 1–4: credits refilled at the rate the token's
    /// receive-rate minimum allows, starting at μ_min); acknowledgements only from the token. Reproduces the paper.</summary>
    PaperRate,
}

/// <summary>What a region's senders do about a member that takes their stream far more slowly than the others
/// (docs/qsm.md, "Slow receivers").</summary>
public enum SlowReceiverPolicy
{
    /// <summary>Wait for it: every sender goes at the speed of its slowest member (QSM's flow control, and QuickSilver's
    /// guarantee that every member gets every message). The default.</summary>
    BackPressure,

    /// <summary>Do not wait for it longer than <see cref="RegionOptions.LaggardTimeout"/>: a sender held back that long by
    /// one member that is at least half a window behind the fastest member tells it to skip ahead to the sender's
    /// latest packet. The laggard still receives, caches and repairs every packet (the region's guarantees to the other
    /// members are unchanged), but hands none of the skipped ones to its application, which is told how many messages it
    /// lost (<c>QuickSilverGroup.SkippedMessages</c>). Needs <see cref="RegionFlowControl.ReceiverWindow"/>.</summary>
    SkipAhead,
}

/// <summary>Parameters of the regional protocol (QSM §2.3). Paper values where it gives them.</summary>
public sealed record RegionOptions
{
    /// <summary>R: replication factor; a region of n nodes has max(1, ⌊n/R⌋) partitions (§2.3.1).</summary>
    public int ReplicationFactor { get; init; } = 5;

    /// <summary>How often the region leader starts a token round (paper: 1 s).</summary>
    public TimeSpan TokenInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>A round not back at the leader after this many intervals is presumed lost and a new one starts.</summary>
    public int TokenTimeoutIntervals { get; init; } = 5;

    /// <summary>NAK ranges a node may report per sender per round (§2.3.3's bound).</summary>
    public int MaxNakRanges { get; init; } = 32;

    /// <summary>Messages a sender keeps unacknowledged; sending blocks (back-pressure) beyond it.</summary>
    public int SenderWindow { get; init; } = 4096;

    /// <summary>A sender retransmits a message not acknowledged this long after it was (re)sent (the paper's rarely used
    /// timeout), in token intervals.</summary>
    public int RetransmitIntervals { get; init; } = 10;

    /// <summary>Packets a member sends at most in answer to one pull or push decision (the rest follow in later rounds),
    /// so repairs do not overrun the receiver that just lost a burst.</summary>
    public int MaxRepairBurst { get; init; } = 512;

    /// <summary>The largest region data packet, header included, or 0 for the endpoint's datagram limit. Packing fills
    /// packets up to it, and rate control counts packets, so on a real network set it to the path MTU's UDP payload
    /// (1,472 on Ethernet): the 16 KiB default suits loopback, where it is one datagram, not eleven IP fragments.</summary>
    public int MaxPacketBytes { get; init; }

    /// <summary>Per-sender FIFO delivery (on by default): a member delivers a sender's packets in sequence order, holding
    /// those that arrive after a gap until it closes. Off, a packet is delivered as soon as it arrives (still exactly
    /// once; a member that joined mid-stream still only from its start point): lower latency under loss, no order.</summary>
    public bool FifoDelivery { get; init; } = true;

    /// <summary>Senders a token can carry sections for.</summary>
    public int MaxSenders { get; init; } = 64;

    /// <summary>The receive window per sender, in packets: a member holds a sender's packets from the region's purge
    /// point (delivered ones it may still have to repair for others) up to this many sequence numbers beyond it, in a
    /// ring of pooled buffers. A member reports stability only up to <see cref="SenderWindow"/> below the window's end,
    /// so the sender stops before it would overrun the window (back-pressure: the purge point waits for the slowest
    /// member's delivery); a packet beyond the window all the same (a member with other options, a stream heard before
    /// it is anchored) is dropped and counted (<c>DropReason.ReceiveBufferFull</c>), and the NAKs bring it back once
    /// the window has moved. At least twice <see cref="SenderWindow"/> (the default is four times the default window:
    /// room for the purge lag, about two token rounds of traffic); at most 4,194,304.</summary>
    public int MaxHeldPackets { get; init; } = 16_384;

    /// <summary>The receive window per sender, in bytes: a member holds at most this many bytes of one sender's payloads
    /// (delivered ones awaiting the purge and undelivered ones together; per sender, like <see cref="MaxHeldPackets"/>,
    /// so one sender's backlog never takes another's room). It acts on the sender first: a member reports its position
    /// and vouches for stability only up to the point where the packets held from the purge point, plus the most the
    /// sender may then send beyond it (<see cref="ReceiveWindowBytes"/>, or with <see cref="RegionFlowControl.PaperRate"/>
    /// <see cref="SenderWindow"/> largest packets), fit it. A packet that does not fit all the same (a bound below that
    /// reserve, a member with other options) is dropped and counted (<c>DropReason.ReceiveBufferFull</c>) and recovered
    /// by the NAKs, and the packet a member needs next always finds room (docs/qsm.md, "The window and its bound").
    /// 0, the default, sizes it from the flow control: four times <see cref="ReceiveWindowBytes"/> (8 MiB at the defaults)
    /// with <see cref="RegionFlowControl.ReceiverWindow"/>; with <see cref="RegionFlowControl.PaperRate"/>, whose sender
    /// counts packets, <see cref="MaxHeldPackets"/> largest packets (what the packet window already implies). Otherwise
    /// at least twice the largest packet (<see cref="MaxPacketBytes"/>, or 65,507 bytes when that is 0), at most 2^40.</summary>
    public long MaxHeldBytes { get; init; }

    /// <summary>The payload bytes a member holds at most over all senders' streams together, with
    /// <see cref="RegionFlowControl.ReceiverWindow"/> (issue 11, "Bounded memory"; docs/qsm.md, "The bound per member").
    /// Each status tick a member shares it among the streams that hold packets or moved, as it shares
    /// <see cref="ReceiveWindowBytes"/>: a stream's byte bound is then the smaller of <see cref="MaxHeldBytes"/> and its
    /// share (never below twice the largest packet, nor below twice the window it offers). A bound that shrinks never
    /// drops below what the stream already vouched for: it comes down as the purge releases those packets. So many
    /// senders no longer multiply a member's memory by their number. 0, the default, is four times the bound per
    /// sender (32 MiB at the defaults), so up to four senders holding at once run as before. Otherwise at least twice the
    /// largest packet, at most 2^42. Not applied with <see cref="RegionFlowControl.PaperRate"/>, whose sender's window
    /// of packets is not shared among senders.</summary>
    public long MaxMemberHeldBytes { get; init; }

    /// <summary>The byte bound over all senders' streams for packets of at most <paramref name="largestPayload"/> bytes
    /// (<see cref="MaxMemberHeldBytes"/>, or the default it stands for when 0).</summary>
    internal long MemberHeldBytesBound(int largestPayload) => MaxMemberHeldBytes != 0 ? MaxMemberHeldBytes
        : 4 * HeldBytesBound(largestPayload);

    /// <summary>The byte bound per sender for packets of at most <paramref name="largestPayload"/> bytes
    /// (<see cref="MaxHeldBytes"/>, or the default it stands for when 0).</summary>
    internal long HeldBytesBound(int largestPayload) => MaxHeldBytes != 0 ? MaxHeldBytes
        : FlowControl == RegionFlowControl.ReceiverWindow ? Math.Max(4L * ReceiveWindowBytes, 2L * largestPayload)
        : Math.Max((long)MaxHeldPackets * largestPayload, 2L * largestPayload);

    /// <summary>These options with the receive window a member offers at most half the byte bound per sender
    /// (<paramref name="heldBytesBound"/>, <see cref="HeldBytesBound"/>), the other half being room for the packets it
    /// delivered and the region has not purged yet: with receivers' windows a bound below twice the window would
    /// otherwise let a sender send what the member must drop (the packet-window check's rule, in bytes). Unchanged when
    /// the bound is that large already (the default is four windows) or with the paper's rate control.</summary>
    internal RegionOptions WithWindowWithin(long heldBytesBound)
        => FlowControl == RegionFlowControl.ReceiverWindow && ReceiveWindowBytes > heldBytesBound / 2
            ? this with { ReceiveWindowBytes = (int)(heldBytesBound / 2) }
            : this;

    /// <summary>The most a sender may send beyond what a member last reported or vouched for: the receive window, or
    /// with the paper's rate control the sender's window of the largest packets (<see cref="MaxHeldBytes"/>).</summary>
    internal long HeldBytesReserve(int largestPayload) => FlowControl == RegionFlowControl.ReceiverWindow
        ? ReceiveWindowBytes : (long)SenderWindow * largestPayload;

    /// <summary>Keep only this member's partition's share after delivery (QSM §2.3: packet i is cached by partition
    /// i mod p): a delivered packet of another partition's class is released once the sender's cached point has passed
    /// it (every packet up to there is held by every member of its caching partition; the data header's <c>cached</c> field)
    /// instead of waiting for the region's purge, so a member of a region of p partitions holds about 1/p of the purge
    /// lag's traffic when one member lags behind while still receiving (a paused reader; when none lags, the purge comes
    /// about as soon as the cached point, and a member missing packets of its own class holds the cached point too). Until the
    /// cached point passes it, a delivered packet is held: when a sender crashes, a packet that reached only members
    /// outside its caching partition is still held by them, and the others recover it (the whole-stack soak, seed 389,
    /// failed when it was released at delivery). A view change that redraws the partitions keeps the old share too
    /// until the region has purged every packet numbered before it (<see cref="Region.PartitionShare"/>, docs/qsm.md,
    /// "Partition share"). On by default.</summary>
    public bool PartitionShare { get; init; } = true;

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: a partition leader sends the packets its members'
    /// flow reports name missing, of those it holds, to those members alone, and the sender resends only the rest
    /// (<see cref="LeaderRepair"/>, docs/qsm.md "Leader repair"), in regions of two partitions or more (a region of one
    /// partition has fewer than twice <see cref="ReplicationFactor"/> members: there the sender's resends, whose losses it
    /// finds at once, recover faster than the fan-out they save). Off, every gap goes up to the sender, whose resend is
    /// multicast to the whole region. On by default.</summary>
    public bool LeaderRepair { get; init; } = true;

    /// <summary>What paces the senders (see <see cref="RegionFlowControl"/>).</summary>
    public RegionFlowControl FlowControl { get; init; } = RegionFlowControl.ReceiverWindow;

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: the bytes a member lets its senders have in flight
    /// beyond its position, shared among the senders it is receiving from. Keep it within the receive socket buffer
    /// (the default is half of <c>UdpEndpointOptions.SocketReceiveBufferBytes</c>'s default, 4 MiB): a window larger
    /// than the buffer lets a burst overflow it.</summary>
    public int ReceiveWindowBytes { get; init; } = 2 << 20;

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: whether a sender also keeps a congestion window
    /// under the receivers' windows, cut when a receiver says its receive queue overflowed (fast start, halving,
    /// recovery; while it sets the limit, the sender asks members to report on reaching the packet that leaves less than
    /// half of it; see <c>CongestionWindow</c> and docs/qsm.md "Congestion control"). On by default.</summary>
    public bool CongestionControl { get; init; } = true;

    /// <summary>With <see cref="CongestionControl"/>: the congestion window a sender starts with, in bytes, doubling
    /// each round trip it is used up until a receiver overflows (fast start); default 64 KiB. 0 starts it open: only the
    /// receivers' windows limit a sender until the first overflow.</summary>
    public int InitialCongestionWindowBytes { get; init; } = 64 << 10;

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: how often a member repeats a flow status that
    /// changed since it was last sent (one also goes whenever a quarter of the window has been taken since the last one),
    /// and a status that did not change is repeated at this period twice more (a lost report would otherwise leave a
    /// sender waiting for the token's acknowledgement).</summary>
    public TimeSpan StatusInterval { get; init; } = TimeSpan.FromMilliseconds(20);

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: how often a member repeats a flow status that names a
    /// gap while the gap stays open (a new gap is reported at once), and a partition leader the aggregate that names one;
    /// also the least time a sender waits before resending a packet again. A lost resend costs about this much: at
    /// 20 ms (the <see cref="StatusInterval"/>) 5 % loss cut a simulated 10 Gbit/s stream to a thirtieth of its loss-free
    /// rate, at 2 ms to a third, at 1 ms to 0.6 of it. At most <see cref="StatusInterval"/>; default 1 ms.</summary>
    public TimeSpan GapReportInterval { get; init; } = TimeSpan.FromMilliseconds(1);

    /// <summary>What senders do about a member far slower than the others (see <see cref="SlowReceiverPolicy"/>).</summary>
    public SlowReceiverPolicy SlowReceivers { get; init; } = SlowReceiverPolicy.BackPressure;

    /// <summary>With <see cref="SlowReceiverPolicy.SkipAhead"/>: how long one laggard may hold a sender back before it is
    /// told to skip ahead. At least twice <see cref="StatusInterval"/> (reports are how a sender sees who holds it), at
    /// most 10 minutes; default 2 s.</summary>
    public TimeSpan LaggardTimeout { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>How long a member keeps the stream of a sender that is no longer in its views (it left, crashed, or
    /// registered again under a new id) once the stream is complete: everything delivered and purged, and no token has
    /// carried a section for it or a packet of it arrived for this long. Then the stream is retired
    /// (<see cref="StreamRetirement"/>), so a long-lived member does not keep one per sender it ever heard. At least
    /// three <see cref="TokenInterval"/>s (rounds must have had time to show whether anything is still owed), at most
    /// 1 hour; default 30 s.</summary>
    public TimeSpan RetireDepartedStreamsAfter { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: how many partitions' reports one node combines. In
    /// a region of more partitions, each block of this many partitions reports through the leader of its first
    /// partition, so a sender hears one report per block, not per partition (docs/qsm.md, "Flow control"). 2 to 1,024;
    /// default 16 (80 members at the default replication factor).</summary>
    public int ReportFanIn { get; init; } = 16;

    /// <summary>With <see cref="RegionFlowControl.ReceiverWindow"/>: how many packets after its position a partition's or
    /// block's aggregated flow report names gaps in (<see cref="GapMap"/>; a member's own report names the 64 after its
    /// position). 64 (what aggregates carried before) to 1,024, a multiple of 64; default 1,024. With 64, the members'
    /// gaps further than 64 packets above the partition's slowest member reached the sender only once that member's gap
    /// had been repaired (docs/qsm.md, "Flow control").</summary>
    public int GapReportPackets { get; init; } = GapMap.Bits;

    public void Validate()
    {
        OptionChecks.InRange(ReplicationFactor, 1, 100, $"RegionOptions.{nameof(ReplicationFactor)}");
        OptionChecks.Positive(TokenInterval, $"RegionOptions.{nameof(TokenInterval)}");
        OptionChecks.InRange(TokenTimeoutIntervals, 2, 1000, $"RegionOptions.{nameof(TokenTimeoutIntervals)}");
        OptionChecks.InRange(MaxNakRanges, 1, 1024, $"RegionOptions.{nameof(MaxNakRanges)}");
        OptionChecks.InRange(SenderWindow, 1, 1 << 22, $"RegionOptions.{nameof(SenderWindow)}");
        OptionChecks.InRange(RetransmitIntervals, 1, 1000, $"RegionOptions.{nameof(RetransmitIntervals)}");
        OptionChecks.InRange(MaxSenders, 1, 1024, $"RegionOptions.{nameof(MaxSenders)}");
        OptionChecks.InRange(MaxRepairBurst, 1, 1 << 20, $"RegionOptions.{nameof(MaxRepairBurst)}");
        OptionChecks.InRange(MaxHeldPackets, 16, 1 << 22, $"RegionOptions.{nameof(MaxHeldPackets)}");
        OptionChecks.InRange(ReceiveWindowBytes, 65_536, 1 << 30, $"RegionOptions.{nameof(ReceiveWindowBytes)}");
        OptionChecks.Positive(StatusInterval, $"RegionOptions.{nameof(StatusInterval)}");
        OptionChecks.Positive(GapReportInterval, $"RegionOptions.{nameof(GapReportInterval)}");
        OptionChecks.InRange(ReportFanIn, 2, 1024, $"RegionOptions.{nameof(ReportFanIn)}");
        OptionChecks.InRange(GapReportPackets, 64, GapMap.Bits, $"RegionOptions.{nameof(GapReportPackets)}");
        if (GapReportPackets % 64 != 0)
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(GapReportPackets)}", GapReportPackets,
                $"RegionOptions.{nameof(GapReportPackets)} ({GapReportPackets}) must be a multiple of 64.");
        }
        if (InitialCongestionWindowBytes != 0)
        {
            OptionChecks.InRange(InitialCongestionWindowBytes, 4_096, 1 << 30, $"RegionOptions.{nameof(InitialCongestionWindowBytes)}");
        }
        if (GapReportInterval > StatusInterval)
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(GapReportInterval)}", GapReportInterval,
                $"RegionOptions.{nameof(GapReportInterval)} ({GapReportInterval}) must not exceed RegionOptions.{nameof(StatusInterval)} ({StatusInterval}).");
        }
        if (!Enum.IsDefined(FlowControl))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(FlowControl)}", FlowControl,
                $"RegionOptions.{nameof(FlowControl)} must be one of {string.Join(", ", Enum.GetNames<RegionFlowControl>())}.");
        }
        if (!Enum.IsDefined(SlowReceivers))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(SlowReceivers)}", SlowReceivers,
                $"RegionOptions.{nameof(SlowReceivers)} must be one of {string.Join(", ", Enum.GetNames<SlowReceiverPolicy>())}.");
        }
        if (SlowReceivers == SlowReceiverPolicy.SkipAhead && FlowControl != RegionFlowControl.ReceiverWindow)
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(SlowReceivers)}", SlowReceivers,
                $"RegionOptions.{nameof(SlowReceivers)} = {SlowReceivers} needs RegionOptions.{nameof(FlowControl)} = {RegionFlowControl.ReceiverWindow}: " +
                "a sender sees who holds it back only in the receivers' flow reports.");
        }
        if (RetireDepartedStreamsAfter < TokenInterval * 3 || RetireDepartedStreamsAfter > TimeSpan.FromHours(1))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(RetireDepartedStreamsAfter)}", RetireDepartedStreamsAfter,
                $"RegionOptions.{nameof(RetireDepartedStreamsAfter)} ({RetireDepartedStreamsAfter}) must be at least three RegionOptions.{nameof(TokenInterval)}s ({TokenInterval * 3}) and at most 1 hour.");
        }
        if (LaggardTimeout < StatusInterval * 2 || LaggardTimeout > TimeSpan.FromMinutes(10))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(LaggardTimeout)}", LaggardTimeout,
                $"RegionOptions.{nameof(LaggardTimeout)} ({LaggardTimeout}) must be at least twice RegionOptions.{nameof(StatusInterval)} ({StatusInterval}) and at most 10 minutes.");
        }
        if (MaxHeldPackets < 2L * SenderWindow)
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(MaxHeldPackets)}", MaxHeldPackets,
                $"RegionOptions.{nameof(MaxHeldPackets)} ({MaxHeldPackets}) must be at least twice RegionOptions.{nameof(SenderWindow)} ({SenderWindow}): " +
                "a member holds the sender's window beyond the point up to which it reports the packets stable.");
        }

        if (MaxPacketBytes != 0)
        {
            OptionChecks.InRange(MaxPacketBytes, 128, 65507, $"RegionOptions.{nameof(MaxPacketBytes)}");
        }

        long largestPacket = MaxPacketBytes != 0 ? MaxPacketBytes : 65_507;
        if (MaxHeldBytes != 0 && (MaxHeldBytes < 2 * largestPacket || MaxHeldBytes > 1L << 40))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(MaxHeldBytes)}", MaxHeldBytes,
                $"RegionOptions.{nameof(MaxHeldBytes)} ({MaxHeldBytes}) must be 0 (sized from the flow control) or between twice the largest packet " +
                $"({2 * largestPacket}: RegionOptions.{nameof(MaxPacketBytes)}, or 65,507 when it is 0) and 2^40: " +
                "a member must have room for the packet it needs next beside those it vouched for.");
        }

        if (MaxMemberHeldBytes != 0 && (MaxMemberHeldBytes < 2 * largestPacket || MaxMemberHeldBytes > 1L << 42))
        {
            throw new ArgumentOutOfRangeException($"RegionOptions.{nameof(MaxMemberHeldBytes)}", MaxMemberHeldBytes,
                $"RegionOptions.{nameof(MaxMemberHeldBytes)} ({MaxMemberHeldBytes}) must be 0 (four times the bound per sender) or between twice the largest packet " +
                $"({2 * largestPacket}: RegionOptions.{nameof(MaxPacketBytes)}, or 65,507 when it is 0) and 2^42.");
        }
    }
}
