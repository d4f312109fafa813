using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Core.Stack;

namespace QuickSilver.Qsm.Region;

/// <summary>Receives a sender's packet, in order, exactly once; the payload is valid only during the call.</summary>
internal delegate void RegionDeliveryHandler(uint sender, ulong seq, ReadOnlySpan<byte> payload);

/// <summary>
/// The layer above's taker of a sender's packets, in order, exactly once; the payload is valid only during the call
/// (it lies in the member's pooled receive buffer). Returning false refuses the packet for now (back-pressure): the
/// member keeps it and every later packet of that sender held, does not count it as delivered (so its NAKs, stability
/// and delivered point in the token say so), and offers it again after <see cref="RegionMember.ResumeDelivery"/>,
/// which the consumer must cause (through a downcall) once it has room.
/// </summary>
internal delegate bool RegionPacketConsumer(uint sender, ulong seq, ReadOnlySpan<byte> payload);

/// <summary>
/// One node's part in a region (QSM §2.3): it receives the region's multicast, delivers each sender's packets in order,
/// caches the packets its partition is responsible for, and takes part in the token ring torus that drives loss
/// recovery and acknowledgement. This class holds the view, the partitions and the sender streams, and does receipt and
/// delivery; the ring is <see cref="TokenRing"/> and recovery <see cref="LossRecovery"/>, one mechanism per file. I/O-free: data and repairs go through the node's <see cref="IDatagramTransport"/>,
/// tokens, pulls, NAKs and ACKs through its region control channel (<see cref="IControlChannel"/>), time through its <see cref="IAlarmScheduler"/>.
/// Core thread only.
/// </summary>
internal sealed class RegionMember
{
    private readonly uint _node;
    private readonly IDatagramTransport _data;
    private readonly IControlChannel _control;
    private readonly IAlarmScheduler _scheduler;
    private readonly RegionOptions _options;
    private readonly Dictionary<uint, SenderStream> _streams = new();
    private readonly List<SenderStream> _streamList = new();
    private readonly PacketPool _pool;
    private readonly PacketDelivery _deliverOne;
    private readonly PacketSkip _skipOne;
    private readonly Alarm _lossyAlarm;
    private readonly Alarm _rateAlarm;
    private readonly Alarm _retireAlarm;
    private readonly StreamRetirement _retirement = new();
    private readonly TokenRing _ring;
    private uint _firstView;
    private readonly RateControlOptions _rateOptions;
    private readonly RateEstimator _receiveRate;
    private readonly RateEstimator _lossRate;
    private List<RegionLayout.Partition> _partitions = new();
    private ReceiverStatus? _status;
    private readonly Dictionary<uint, NetAddress> _admitted = new();
    private readonly Dictionary<uint, NetAddress> _viewMembers = new();
    private readonly HashSet<NetAddress> _viewAddresses = new();
    private long _retiredReleased;
    private readonly int _largestPayload;
    private long _retiredRestored;

    /// <param name="rateOptions">k and Δ of the receive-rate and loss estimates this member reports (§2.4).</param>
    public RegionMember(uint node, IDatagramTransport data, IControlChannel control, IAlarmScheduler scheduler, RegionOptions? options = null,
        RateControlOptions? rateOptions = null)
    {
        _node = node;
        _data = data ?? throw new ArgumentNullException(nameof(data));
        _control = control ?? throw new ArgumentNullException(nameof(control));
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        options ??= new RegionOptions();
        options.Validate();
        _largestPayload = RegionSender.PayloadCapacity(data.MaxDatagramSize, options);
        HeldBytesBound = options.HeldBytesBound(_largestPayload);
        MemberHeldBytesBound = options.MemberHeldBytesBound(_largestPayload);
        _options = options.WithWindowWithin(HeldBytesBound); // what this member's flow status offers each sender
        _rateOptions = rateOptions ?? new RateControlOptions();
        _rateOptions.Validate();
        _receiveRate = new RateEstimator(_rateOptions.Samples, _rateOptions.SampleInterval);
        _lossRate = new RateEstimator(_rateOptions.Samples, _rateOptions.SampleInterval);
        _pool = new PacketPool(_options.MaxHeldPackets);
        Share = new PartitionShare(_options.PartitionShare);
        _deliverOne = DeliverOne;
        _skipOne = (stream, seq, payload) => Skipped?.Invoke(stream.Sender, seq, payload);
        _lossyAlarm = new Alarm(_ => CheckLossyStreams());
        _ring = new TokenRing(this);
        Recovery = new LossRecovery(this, data.MaxDatagramSize);
        _rateAlarm = new Alarm(_ => SampleRates());
        _scheduler.ScheduleAfter(_rateAlarm, _rateOptions.SampleInterval);
        _retireAlarm = new Alarm(_ => RetireDepartedStreams());
        _scheduler.ScheduleAfter(_retireAlarm, RetirePeriod);
    }

    public RegionView? View { get; private set; }

    /// <summary>Index of this node in the view (view order = ascending address).</summary>
    public int Index { get; private set; } = -1;

    public int Partitions { get; private set; } = 1;

    public int Partition { get; private set; }

    public bool IsRegionLeader => Index == 0;

    public DropCounters Drops { get; } = new();

    /// <summary>Token rounds this node completed as region leader.</summary>
    public long RoundsCompleted => _ring.RoundsCompleted;

    public long RepairsSent => Recovery.RepairsSent;

    public long PullsSent => Recovery.PullsSent;

    public long NaksSent => Recovery.NaksSent;

    /// <inheritdoc cref="LossRecovery.RepairBudgetsSpent"/>
    public long RepairBudgetsSpent => Recovery.RepairBudgetsSpent;

    /// <inheritdoc cref="LossRecovery.MissingSetsCoarsened"/>
    public long MissingSetsCoarsened => Recovery.MissingSetsCoarsened;

    /// <inheritdoc cref="LossRecovery.RangeSetsTruncated"/>
    public long RangeSetsTruncated => Recovery.RangeSetsTruncated;

    /// <summary>Tokens whose NAK sets this node coarsened so the token fit one control message.</summary>
    public long TokensCoarsened => _ring.TokensCoarsened;

    /// <summary>Senders this member, as region leader, tracks from round to round (a section each, until it retires).</summary>
    public int TrackedSenders => _ring.TrackedSenders;

    /// <summary>Sections this member, as region leader, retired (their senders idle, acknowledged and purged everywhere).</summary>
    public long SectionsRetired => _ring.SectionsRetired;

    /// <summary>Streams of departed senders this member retired (<see cref="StreamRetirement"/>), given-up ones included.</summary>
    public long StreamsRetired => _retirement.Retired;

    /// <summary>Streams of departed senders this member gave up while they still lacked or held packets
    /// (<see cref="StreamRetirement.Stuck"/>), and the packets they held then.</summary>
    public long StreamsGivenUp => _retirement.GivenUp;

    /// <inheritdoc cref="StreamsGivenUp"/>
    public long PacketsGivenUp => _retirement.PacketsGivenUp;

    /// <summary>Streams this member holds now, its own and departed senders' included.</summary>
    public int StreamCount => _streamList.Count;

    internal StreamRetirement Retirement => _retirement;

    /// <summary>Flow status reports this member sent (to its partition leader, or as leader to senders).</summary>
    public long StatusReportsSent => _status?.ReportsSent ?? 0;

    /// <summary>This member's side of receiver-driven flow control, if on (its counters, for diagnostics).</summary>
    internal ReceiverStatus? FlowStatus => _status;

    /// <summary>Turns on receiver-driven flow control (<see cref="RegionFlowControl.ReceiverWindow"/>): reports go
    /// through <paramref name="sink"/>. The region layer calls it once, before the first view.</summary>
    internal void EnableFlowStatus(FlowStatusSink sink) => _status ??= new ReceiverStatus(this, sink, _data.MaxDatagramSize);

    /// <summary>A partition member's flow status, for this member as its partition leader; false if not taken. Only a
    /// report of this member's own region counts: view numbers are per region, so another region's report with the
    /// same view number, reporter and address (a node still in its old region, e.g. after a GMS restart reused ids)
    /// would otherwise be taken as a report of this one and let the sender settle packets the reporter never had.</summary>
    internal bool OnFlowStatus(NetAddress from, in FlowStatus status)
        => View is { } view && status.Region == view.Region.Value
            && (status.Partial ? _status?.OnPartialReport(from, status) ?? false : _status?.OnMemberReport(from, status) ?? false);

    internal uint Node => _node;

    // What the token ring and loss recovery (one mechanism per file) act on.
    internal LossRecovery Recovery { get; }

    /// <summary>The options this member runs with: as given, except that with receivers' windows the window it offers a
    /// sender (<see cref="RegionOptions.ReceiveWindowBytes"/>) is at most half the byte bound, so a small bound stops the
    /// sender rather than drop its packets (<see cref="RegionOptions.MaxHeldBytes"/>).</summary>
    internal RegionOptions Options => _options;

    internal IAlarmScheduler Scheduler => _scheduler;

    internal IControlChannel Control => _control;

    internal IDatagramTransport Data => _data;

    internal IReadOnlyDictionary<uint, SenderStream> Streams => _streams;

    /// <summary>The torus: partition j holds view indices j, j+p, j+2p, … (§2.3.1).</summary>
    internal List<RegionLayout.Partition> Layout => _partitions;

    /// <summary>Raised for each packet delivered (after <see cref="Consumer"/> took it).</summary>
    public event RegionDeliveryHandler? Delivered;

    /// <summary>Takes each packet first and may refuse it for now (see <see cref="RegionPacketConsumer"/>); null takes all.</summary>
    public RegionPacketConsumer? Consumer { get; set; }

    /// <summary>Repair datagrams from peers (a partition leader's repair, a token push or pull) of packets this member
    /// already had or could not hold: what leader repair and the token ring cost it for nothing.</summary>
    public long RedundantRepairs { get; private set; }

    /// <summary>The sender's datagrams of packets this member already had or could not hold (its resends to others).</summary>
    public long RedundantResends { get; private set; }

    /// <summary>Packets the <see cref="Consumer"/> refused (each is offered again after <see cref="ResumeDelivery"/>).</summary>
    public long DeliveriesRefused { get; private set; }

    /// <summary>Packets held by this member's streams (delivered ones awaiting the purge, and undelivered ones).</summary>
    public int HeldPackets => _streamList.Sum(stream => stream.HeldCount);

    /// <summary>Receive-buffer buffers allocated because none was free (the warm-up or a burst; flat when steady).</summary>
    public long BuffersAllocated => _pool.Allocated;

    /// <summary>Payload bytes of the packets this member's streams hold.</summary>
    public long HeldBytes => _pool.HeldBytes;

    /// <summary>The most packets this member held at once (all streams) since <see cref="ResetHeldPeaks"/>.</summary>
    public long PeakHeldPackets => _pool.PeakHeldPackets;

    /// <summary>The most payload bytes this member held at once since <see cref="ResetHeldPeaks"/>.</summary>
    public long PeakHeldBytes => _pool.PeakHeldBytes;

    /// <summary>The payload bytes this member holds at most of one sender's stream (<see cref="RegionOptions.MaxHeldBytes"/>,
    /// resolved; a sender's own stream at its member is bounded by its send window instead).</summary>
    public long HeldBytesBound { get; }

    /// <summary>The payload bytes this member holds at most over all senders' streams (<see cref="RegionOptions.MaxMemberHeldBytes"/>,
    /// resolved): with receivers' windows it is shared among the streams each status tick (<see cref="StreamShare"/>).</summary>
    public long MemberHeldBytesBound { get; }

    /// <summary>The byte bound and reserve each stream has now when <see cref="MemberHeldBytesBound"/> shared among the
    /// streams holding packets is below <see cref="HeldBytesBound"/> (set by <see cref="ReceiverStatus"/> each status
    /// tick; a stream made between two ticks starts with it), or null while the bound per sender applies.</summary>
    internal (long Bound, long Reserve)? StreamShare { get; set; }

    /// <summary>The largest payload a packet carries in this region (what a packet not yet arrived counts for).</summary>
    internal int LargestPayload => _largestPayload;

    /// <summary>Packets dropped because they did not fit <see cref="HeldBytesBound"/>, over this member's current streams.</summary>
    public long ByteOverflows => _streamList.Sum(stream => stream.ByteOverflows);

    /// <summary>Held packets given up to make room under <see cref="HeldBytesBound"/> for a packet needed next.</summary>
    public long Evicted => _streamList.Sum(stream => stream.Evicted);

    /// <summary>Starts <see cref="PeakHeldPackets"/> and <see cref="PeakHeldBytes"/> again from what is held now.</summary>
    public void ResetHeldPeaks() => _pool.ResetPeaks();

    /// <summary>Delivered packets released at once as not this member's share (<see cref="RegionOptions.PartitionShare"/>).</summary>
    public long ReleasedAtDelivery => _streamList.Sum(stream => stream.ReleasedAtDelivery) + _retiredReleased;

    /// <summary>Packets taken back after a view change made them this member's share (<see cref="PartitionShare"/>).</summary>
    public long Restored => _streamList.Sum(stream => stream.Restored) + _retiredRestored;

    /// <summary>What this member keeps after delivery (<see cref="RegionOptions.PartitionShare"/>).</summary>
    internal PartitionShare Share { get; }

    /// <summary>Installs a new region view (from the GMS). Partitions and the ring follow from it alone (§2.3.1).</summary>
    public void InstallView(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (View is null)
        {
            _firstView = view.ViewNumber;
        }

        bool changed = View is not null && View.ViewNumber != view.ViewNumber;
        NetAddress[][]? oldLayout = View is { } old && Index >= 0
            ? [.. _partitions.Select(partition => partition.Members.Select(i => old.Members[i].Address).ToArray())]
            : null;
        View = view;
        _viewMembers.Clear();
        _viewAddresses.Clear();
        foreach (var m in view.Members)
        {
            _viewMembers[m.Node.Value] = m.Address;
            _viewAddresses.Add(m.Address);
        }

        Index = view.IndexOf(new NodeId(_node));
        Partitions = view.PartitionCount(_options.ReplicationFactor);
        Partition = Index >= 0 ? view.PartitionOf(Index, _options.ReplicationFactor) : 0;
        _partitions = RegionLayout.Build(view, Partitions);
        Share.OnViewInstalled(view.ViewNumber, Partitions, Index >= 0 ? Partition : -1, oldLayout);
        Recovery.OnViewInstalled();
        if (changed)
        {
            _status?.OnViewInstalled();
        }

        if (view.MulticastAddress is { } group)
        {
            _data.JoinGroup(group);
        }

        _ring.OnViewInstalled(changed);
    }

    /// <summary>μ_rec^(i): this member's smoothed rate of new packets from all senders (§2.4), packets/s.</summary>
    public double ReceiveRate => _receiveRate.Rate;

    /// <summary>This member's progress on <paramref name="sender"/>'s stream (observability: tests, counters).</summary>
    public (ulong Delivered, ulong MaxSeen, ulong CachedUpTo, bool Anchored)? Progress(uint sender)
        => _streams.TryGetValue(sender, out var s) ? (s.Delivered, s.MaxSeen, s.CachedUpTo(Partitions, Partition), s.Anchored) : null;

    /// <summary>One line of this member's state for diagnostics: view, partition, rounds, and per sender what it has
    /// delivered, seen and holds.</summary>
    public string Describe() =>
        $"region {View?.Region.Value} view {View?.ViewNumber} ({View?.Count} members), index {Index}, partition {Partition}/{Partitions}, " +
        $"rounds {RoundsCompleted}, repairs {RepairsSent} (bursts cut {RepairBudgetsSpent}), pulls {PullsSent}, NAKs {NaksSent}, NAK sets coarsened {MissingSetsCoarsened} / truncated {RangeSetsTruncated}, drops {Drops.Total}, redundant repairs {RedundantRepairs} / resends {RedundantResends}, streams retired {StreamsRetired} (given up {StreamsGivenUp}), " +
        $"held {_pool.HeldPackets} packets / {_pool.HeldBytes} B (peak {_pool.PeakHeldBytes} B, bound {HeldBytesBound} B per sender{(StreamShare is { } shared ? $", {shared.Bound} B now as a share of {MemberHeldBytesBound} B per member" : "")}){(Share.Enabled ? $" (partition share, old classes {Share.OldShares.Count})" : "")}; " +
        string.Join("; ", _streams.Values.Select(s => $"sender {s.Sender}: delivered {s.Delivered}, seen {s.MaxSeen}, held {s.HeldCount}, " +
            $"overflows {s.Overflows} (bytes {s.ByteOverflows}, evicted {s.Evicted}), anchored {s.Anchored}{(s.Paused ? ", paused" : "")}{(s.Skipped > 0 ? $", skipped {s.Skipped}" : "")}"));

    /// <summary>Stops this member (the node moved to another region): no more tokens or rate samples, and its multicast
    /// address is left unless <paramref name="keepAddress"/> (the next region's) is the same.</summary>
    public void Stop(NetAddress? keepAddress)
    {
        _ring.Stop();
        _status?.Stop();
        _scheduler.Cancel(_rateAlarm);
        _scheduler.Cancel(_lossyAlarm);
        _scheduler.Cancel(_retireAlarm);
        if (View?.MulticastAddress is { } group && group != keepAddress)
        {
            _data.LeaveGroup(group);
        }
    }

    /// <summary>A region data packet (multicast, or a unicast repair), its header already parsed by the region layer.</summary>
    internal void OnData(NetAddress from, in DataHeader header, ReadOnlySpan<byte> payload)
    {
        if (View is null || header.Region != View.Region.Value)
        {
            Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        if (!Admits(from, header))
        {
            Drops.Increment(DropReason.NotAMember);
            return;
        }

        bool repair = header.View == RegionWire.RepairView;
        if (repair && !_streams.ContainsKey(header.Sender))
        {
            Drops.Increment(DropReason.NotForThisNode); // a repair for a stream this node has not started
            return;
        }

        var stream = Stream(header.Sender);
        stream.LastHeard = _scheduler.Now;
        if (!repair)
        {
            stream.Address = from; // an original or a sender's retransmission: from the sender itself
            stream.OnNumbered(header.View, header.ViewStart); // which packets were numbered before a view change (PartitionShare)
            if (!stream.Anchored && stream.Candidate is null)
            {
                // Joining mid-stream (docs/qsm.md): start where the sender's view that includes this node started; a packet
                // numbered before this node's first view is not owed to it, so start at that packet. A stream that starts
                // at the sender's first packet, numbered in a view that includes this node, starts now; any other waits
                // for the next token, which says how far the region has purged (nothing at or below that point can be
                // recovered from peers). A resend of an old packet (numbered before this node's first view) never
                // starts a stream at once: the region may have purged what follows it before this node was in the ring.
                stream.Candidate = header.View >= _firstView ? header.ViewStart - 1 : header.Seq - 1;
                if (stream.Candidate == 0 && header.View >= _firstView)
                {
                    stream.Anchor(0);
                }
            }
        }
        else if (!stream.Anchored)
        {
            Drops.Increment(DropReason.NotForThisNode); // a repair for a stream this node has not started
            return;
        }

        bool gap = header.View != RegionWire.RepairView && stream.Anchored && header.Seq > stream.MaxSeen + 1;
        if (gap)
        {
            _lossRate.Count((long)(header.Seq - stream.MaxSeen - 1)); // a gap in the sender's stream: packets lost on the way
        }

        if (!stream.Add(header.Seq, payload))
        {
            if (repair)
            {
                RedundantRepairs++; // already had it (or could not hold it): a peer's or leader's copy for nothing
            }
            else if (header.Seq <= stream.MaxSeen)
            {
                RedundantResends++;
            }
        }
        else
        {
            Counted(stream, added: true);
        }

        if (header.Settled != 0 && !repair)
        {
            stream.OnSettled(header.Settled); // every member has taken these (docs/qsm.md, "Purging on the sender's word")
        }

        if (header.Cached != 0 && !repair)
        {
            stream.OnCached(header.Cached); // held by their caching partitions (docs/qsm.md, "Partition share")
        }

        if (gap)
        {
            _status?.OnGap(stream); // say so now: the sender resends it, instead of its window filling up behind it
        }

        if (header.ReportRequested && !repair)
        {
            _status?.OnReportRequest(stream, header.Seq); // the sender is about to run out of window
        }
    }

    /// <summary>Sets the nodes that may send into this region (issue 12, "accept only members"): the members of every
    /// region of every group mapped to it, at the addresses their views give. The layer above installs them with each
    /// change of views (the group layer from the GMS's views; a region simulation with its senders). The view's own
    /// members are always admitted.</summary>
    internal void AdmitSenders(IEnumerable<ViewMember> senders)
    {
        _admitted.Clear();
        foreach (var sender in senders)
        {
            _admitted[sender.Node.Value] = sender.Address;
        }
    }

    /// <summary>Nodes admitted as senders by <see cref="AdmitSenders"/> (the view's members besides).</summary>
    internal int AdmittedSenders => _admitted.Count;

    /// <summary>
    /// Whether a data packet comes from where it may: an original or a sender's retransmission from the sender itself,
    /// a node admitted to send here (<see cref="AdmitSenders"/>) or a member of the view, at the address the views give
    /// it, or a sender whose stream this member already has, at the address that stream was admitted at (a sender that
    /// left the region's groups keeps its stream until it ends: its last packets are still owed); a repair from a
    /// member of the current view (only members cache and forward packets). Anything else is counted
    /// (<see cref="DropReason.NotAMember"/>) and never creates a stream, so a forged sender id costs nothing.
    /// </summary>
    private bool Admits(NetAddress from, in DataHeader header)
    {
        if (header.View == RegionWire.RepairView)
        {
            return _viewAddresses.Contains(from);
        }

        uint sender = header.Sender;
        return (_admitted.TryGetValue(sender, out var admitted) && admitted == from)
               || (_viewMembers.TryGetValue(sender, out var member) && member == from)
               || (_streams.TryGetValue(sender, out var stream) && stream.Address == from && from != default);
    }

    /// <summary>A sender's stream-start hint (<see cref="RegionWire.WriteStart"/>), sent to this member when the sender's
    /// view first included it. A member that has heard nothing of the sender yet starts its stream where a data packet of
    /// that view would have started it, so it holds the region's purge point back only that far, not at 0: otherwise a
    /// member that joined after the sender went idle kept every member from purging the sender's last packets until it
    /// sent again (docs/qsm.md, "Joining mid-stream"). False if it does not apply to this member's current view yet.</summary>
    internal bool OnStart(NetAddress from, in DataHeader header)
    {
        if (View is null || header.Region != View.Region.Value || header.View > View.ViewNumber)
        {
            return false; // for a view this member has not installed yet: the caller keeps it until it has
        }

        if (!Admits(from, header))
        {
            Drops.Increment(DropReason.NotAMember);
            return true;
        }

        if (header.View < _firstView || (_streams.TryGetValue(header.Sender, out var existing) && (existing.Anchored || existing.Candidate is not null)))
        {
            return true; // numbered before this member's first view (not owed to it), or the stream has started already
        }

        var stream = Stream(header.Sender);
        stream.Address = from;
        stream.Candidate = header.ViewStart - 1;
        if (stream.Candidate == 0)
        {
            stream.Anchor(0);
        }

        return true;
    }

    /// <summary>A packet passed over, not delivered, because its sender told this member to skip ahead
    /// (<see cref="SlowReceiverPolicy.SkipAhead"/>): the layer above counts the messages it lost.</summary>
    public event RegionDeliveryHandler? Skipped;

    /// <summary>Skip notices taken (<see cref="OnSkip"/>).</summary>
    public long SkipNotices { get; private set; }

    /// <summary>A sender's skip notice (<see cref="RegionWire.WriteSkip"/>): this member held it back for
    /// <see cref="RegionOptions.LaggardTimeout"/>, so none of its packets up to the given seq goes to the layer above.
    /// Taken only from the address the sender's stream was admitted at, for an anchored stream in this member's region;
    /// anything else is dropped and counted. The position this member reports moves on as packets arrive, so the sender
    /// is no longer held. True when it applied.</summary>
    internal bool OnSkip(NetAddress from, uint region, uint sender, ulong through)
    {
        if (View is null || View.Region.Value != region || !_streams.TryGetValue(sender, out var stream) || !stream.Anchored)
        {
            Drops.Increment(DropReason.NotForThisNode);
            return false;
        }

        if (stream.Address != from || from == default)
        {
            Drops.Increment(DropReason.NotAMember); // only the sender may tell its members to skip its packets
            return false;
        }

        SkipNotices++;
        stream.Lossy = true;
        stream.SkippedWhenChecked = stream.Skipped;
        if (!_lossyAlarm.IsScheduled)
        {
            _scheduler.ScheduleAfter(_lossyAlarm, _options.LaggardTimeout);
        }

        stream.SkipAhead(through);
        stream.ResumeDelivery(); // a stream paused by the layer above moves on, skipping what it refuses
        _status?.OnProgress(stream);
        return true;
    }

    /// <summary>Every <see cref="RegionOptions.LaggardTimeout"/> while a stream is cut loose: one that skipped nothing
    /// since the last look has kept up, and holds its sender to its pace again.</summary>
    private void CheckLossyStreams()
    {
        bool any = false;
        foreach (var stream in _streamList)
        {
            if (!stream.Lossy)
            {
                continue;
            }

            if (stream.Skipped == stream.SkippedWhenChecked)
            {
                stream.Lossy = false;
            }
            else
            {
                stream.SkippedWhenChecked = stream.Skipped;
                any = true;
            }
        }

        if (any)
        {
            _scheduler.ScheduleAfter(_lossyAlarm, _options.LaggardTimeout);
        }
    }

    /// <summary>Whether <paramref name="from"/> is a member of the current view (tokens and pulls come only from
    /// members).</summary>
    internal bool IsViewMember(NetAddress from) => _viewAddresses.Contains(from);

    /// <summary>Whether <paramref name="sender"/> is neither this node, in the view, nor admitted to send into the region.</summary>
    internal bool Departed(uint sender) => sender != _node && !_viewMembers.ContainsKey(sender) && !_admitted.ContainsKey(sender);

    /// <summary>The fraction of the senders' packets this member found missing on arrival (gaps), over its last k samples.</summary>
    public double LossFraction
    {
        get
        {
            double lost = _lossRate.Rate, received = _receiveRate.Rate;
            return lost + received <= 0 ? 0 : Math.Min(1, lost / (lost + received));
        }
    }

    /// <summary>Records a packet this node sent itself (a sender that is also a member has it without receiving it).</summary>
    public void OnLocalSend(uint sender, NetAddress senderAddress, ulong seq, ReadOnlySpan<byte> payload, uint view = 0, ulong viewStart = 0)
    {
        var stream = LocalStream(sender, senderAddress, seq, view, viewStart);
        Accept(stream, seq, payload);
    }

    /// <summary>As <see cref="OnLocalSend(uint, NetAddress, ulong, ReadOnlySpan{byte}, uint, ulong)"/>, holding the
    /// sender's datagram, which it lends, instead of a copy (docs/qsm.md, "The sender's own packets"), and delivering it
    /// now from <paramref name="sent"/>, the same bytes where the sender just wrote them.</summary>
    internal void OnLocalSend(uint sender, NetAddress senderAddress, ulong seq, in LentPacket packet, ReadOnlySpan<byte> sent, uint view, ulong viewStart)
    {
        var stream = LocalStream(sender, senderAddress, seq, view, viewStart);
        Counted(stream, stream.Add(seq, packet, sent));
    }

    private SenderStream LocalStream(uint sender, NetAddress senderAddress, ulong seq, uint view, ulong viewStart)
    {
        var stream = Stream(sender);
        stream.Address = senderAddress;
        if (viewStart > 0)
        {
            stream.OnNumbered(view, viewStart);
        }

        if (!stream.Anchored)
        {
            stream.Anchor(seq - 1);
        }

        return stream;
    }

    private void Accept(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload) => Counted(stream, stream.Add(seq, payload));

    private void Counted(SenderStream stream, bool added)
    {
        if (added)
        {
            _receiveRate.Count();
            _status?.OnProgress(stream);
        }
    }

    private bool DeliverOne(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload)
    {
        if (Consumer is { } consumer && !consumer(stream.Sender, seq, payload))
        {
            DeliveriesRefused++;
            return false;
        }

        Delivered?.Invoke(stream.Sender, seq, payload);
        return true;
    }

    /// <summary>The <see cref="Consumer"/> has room again: every stream offers the packets it holds for delivery, in
    /// order, from the one that was refused. Call on the core thread (a downcall), never from inside the consumer.</summary>
    public void ResumeDelivery()
    {
        for (int i = 0; i < _streamList.Count; i++)
        {
            _streamList[i].ResumeDelivery();
            _status?.OnProgress(_streamList[i]);
        }
    }

    /// <summary>A token or a pull request (reliable unicast payloads whose first byte is the kind).</summary>
    public void OnControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.IsEmpty || View is null)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (!_viewAddresses.Contains(from))
        {
            Drops.Increment(DropReason.NotAMember); // a token or pull from a node outside the view would move streams and send repairs
            return;
        }

        switch ((RegionControl)message[0])
        {
            case RegionControl.Token:
                _ring.OnTokenMessage(message);
                break;
            case RegionControl.Pull:
                Recovery.OnPull(from, message);
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    private SenderStream Stream(uint sender)
    {
        if (!_streams.TryGetValue(sender, out var stream))
        {
            // A sender's own stream at its member is bounded by its send window, not the byte bound: it never drops its own packet.
            stream = new SenderStream(sender, _deliverOne, _options.FifoDelivery, _options.MaxHeldPackets, _options.SenderWindow, _pool, Drops, _skipOne, Share,
                sender == _node ? long.MaxValue : HeldBytesBound, _options.HeldBytesReserve(_largestPayload), _largestPayload)
            {
                LastHeard = _scheduler.Now,
                LastProgress = _scheduler.Now,
            };
            if (StreamShare is { } share)
            {
                stream.ShareByteBound(share.Bound, share.Reserve);
            }

            _streams.Add(sender, stream);
            _streamList.Add(stream);
            _retirement.Restart(sender);
        }

        return stream;
    }

    private TimeSpan RetirePeriod => TimeSpan.FromTicks(Math.Max(_options.TokenInterval.Ticks, _options.RetireDepartedStreamsAfter.Ticks / 4));

    /// <summary>Retires the complete streams of senders no longer in this member's views (<see cref="StreamRetirement"/>).</summary>
    private void RetireDepartedStreams()
    {
        if (View is not null)
        {
            var now = _scheduler.Now;
            for (int i = _streamList.Count - 1; i >= 0; i--)
            {
                var stream = _streamList[i];
                uint sender = stream.Sender;
                bool departed = Departed(sender);
                if (stream.WhenSwept != (stream.Delivered, stream.HeldCount))
                {
                    stream.WhenSwept = (stream.Delivered, stream.HeldCount);
                    stream.LastProgress = now;
                }

                stream.DepartedSince = departed ? stream.DepartedSince ?? now : null;

                if (StreamRetirement.Due(stream, departed, now, _options.RetireDepartedStreamsAfter))
                {
                    _streams.Remove(sender);
                    _streamList.RemoveAt(i);
                    _retiredReleased += stream.ReleasedAtDelivery;
                    _retiredRestored += stream.Restored;
                    _retirement.Retire(stream);
                }
                else if (StreamRetirement.Stuck(stream, now, _options.RetireDepartedStreamsAfter))
                {
                    _streams.Remove(sender);
                    _streamList.RemoveAt(i);
                    _retiredReleased += stream.ReleasedAtDelivery;
                    _retiredRestored += stream.Restored;
                    _retirement.GiveUp(stream, stream.ReleaseAll());
                }
            }

            Swept?.Invoke();
        }

        _scheduler.ScheduleAfter(_retireAlarm, RetirePeriod);
    }

    /// <summary>Raised after each look for departed streams to retire (every quarter of
    /// <see cref="RegionOptions.RetireDepartedStreamsAfter"/>, at least every token interval): the layer above forgets
    /// its own per-sender state for senders this member no longer <see cref="Knows"/>.</summary>
    public event Action? Swept;

    /// <summary>Whether a packet of <paramref name="sender"/> could still be delivered here: it is this node, in the view,
    /// admitted to send into the region, or has a stream at this member. A packet of any other sender is dropped before
    /// it starts a stream (<see cref="Admits"/>), so per-sender state above this layer may be forgotten for it.</summary>
    public bool Knows(uint sender)
        => sender == _node || _streams.ContainsKey(sender) || _viewMembers.ContainsKey(sender) || _admitted.ContainsKey(sender);

    private void SampleRates()
    {
        _receiveRate.CloseSample();
        _lossRate.CloseSample();
        _scheduler.ScheduleAfter(_rateAlarm, _rateOptions.SampleInterval);
    }
}

/// <summary>The torus layout derived from a region view: partition j holds view indices j, j+p, j+2p, … (§2.3.1).</summary>
internal static class RegionLayout
{
    public sealed record Partition(List<int> Members);

    public static List<Partition> Build(RegionView view, int partitions)
    {
        var result = new List<Partition>(partitions);
        for (int j = 0; j < partitions; j++)
        {
            result.Add(new Partition(new List<int>()));
        }

        for (int i = 0; i < view.Count; i++)
        {
            result[i % partitions].Members.Add(i);
        }

        return result;
    }
}
