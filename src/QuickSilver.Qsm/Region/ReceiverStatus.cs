using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Qsm.Region;

/// <summary>Where a <see cref="ReceiverStatus"/> sends a report: a member's report to its partition leader, or a leader's
/// aggregate to the sender (the region layer routes it, locally when the sender is this node).</summary>
internal delegate void FlowStatusSink(NetAddress to, in FlowStatus status);

/// <summary>
/// A member's side of receiver-driven flow control (<see cref="RegionFlowControl.ReceiverWindow"/>, docs/qsm.md "Flow
/// control"). For each sender's stream the member reports its position, the highest packet up to which it has taken
/// every packet (delivered, and never beyond its ring's room: see <see cref="SenderStream.FlowPosition"/>), and the bytes
/// it lets the sender have in flight beyond it (its share of <see cref="RegionOptions.ReceiveWindowBytes"/>). A report
/// goes to the member's partition leader whenever a quarter of the window has been taken since the last one, and on a
/// timer while it changed (and twice more after it stopped changing, in case the last one was lost). The partition
/// leader keeps its partition members' latest reports per sender and sends the sender their minimum, marked complete
/// once every member of the partition has reported in this view: the sender hears one report per partition, not per
/// member. I/O-free; core thread only.
/// </summary>
internal sealed class ReceiverStatus
{
    private const int LastRepeat = 64;
    private readonly RegionMember _member;
    private readonly FlowStatusSink _sink;
    private readonly RegionOptions _options;
    private readonly int _packetBytes;
    private readonly Dictionary<uint, PartitionFlow> _partition = new();
    private readonly Dictionary<uint, PartitionFlow> _blocks = new(); // as a block's aggregator: its partitions' aggregates per sender
    private readonly Alarm _timer;
    private readonly Alarm _gapTimer;
    private readonly LeaderRepair? _repair; // as partition leader: its members' gaps it holds, repaired first (RegionOptions.LeaderRepair)
    private uint _window;     // this member's share of the receive window per sender (bytes)
    private ulong _firstThreshold; // packets between two reports, in the largest packets (before a stream is measured)
    private bool _stopped;
    private long _overflows;        // the transport's receive-queue drops, sampled each tick, on a new gap and when asked (QueueOverflowedLately)
    private long _overflowsAtTick;  // the sample before the last tick's: where a stream's first report counts from
    private TimeSpan _sampledAt;    // when _overflows was read (a gap samples at most once a gap interval)
    private TimeSpan _overflowSeenAt = TimeSpan.MinValue / 2;   // when a sample last saw the drop count rise (QueueOverflowedLately)
    private TimeSpan _memberOverflowAt = TimeSpan.MinValue / 2; // as partition leader: when a member last reported its queue overflowed

    public ReceiverStatus(RegionMember member, FlowStatusSink sink, int maxDatagramSize)
    {
        _member = member;
        _sink = sink;
        _options = member.Options;
        _packetBytes = RegionWire.DataHeaderSize + RegionSender.PayloadCapacity(maxDatagramSize, _options);
        ShareWindow(1);
        _timer = new Alarm(_ => OnTimer());
        _gapTimer = new Alarm(_ => OnGapTimer());
        _repair = _options.LeaderRepair ? new LeaderRepair(member, maxDatagramSize) : null;
        member.Scheduler.ScheduleAfter(_timer, _options.StatusInterval);
    }

    /// <summary>Reports this member sent (to its partition leader, or as leader to senders).</summary>
    public long ReportsSent { get; private set; }

    /// <summary>Reports repeated by the gap timer because they still name an open gap (<see cref="GapRepeatBackoff"/>).</summary>
    public long GapRepeats { get; private set; }

    /// <summary>Reports from partition members this member took as their leader.</summary>
    public long ReportsReceived { get; private set; }

    /// <summary>Of <see cref="ReportsReceived"/>, the partition leaders' aggregates this member took as their block's aggregator.</summary>
    public long PartialReportsReceived { get; private set; }

    /// <summary>Aggregates this member sent, by hop (<see cref="AggregateHop"/>) and by what made it send
    /// (<see cref="ForwardTrigger"/>): [hop * ForwardTrigger.Count + trigger]. Diagnostics for the figures runner.</summary>
    public long[] Forwards { get; } = new long[3 * (int)ForwardTrigger.Count];

    /// <summary>As partition leader, its first repairs of its members' gaps (null with <see cref="RegionOptions.LeaderRepair"/> off).</summary>
    public LeaderRepair? Repair => _repair;

    /// <summary>This member's share of the receive window per sender (bytes).</summary>
    public uint Window => _window;

    /// <summary>Shares the receive window among the <paramref name="active"/> streams that moved in the last interval.
    /// Once per timer tick, not per packet.</summary>
    private void ShareWindow(int active)
    {
        _window = (uint)Math.Max(_packetBytes, _options.ReceiveWindowBytes / Math.Max(1, active));
        _firstThreshold = Math.Max(1, _window / 8 / (ulong)_packetBytes);
    }

    /// <summary>
    /// Shares the member's byte bound over all senders (<see cref="RegionOptions.MaxMemberHeldBytes"/>) among the
    /// <paramref name="holding"/> streams that hold packets or moved, after <see cref="ShareWindow"/>. While the share is
    /// at least the bound per sender nothing changes (up to four such streams at the defaults). Below it, every stream's
    /// bound is the share (at least twice the largest packet), the window this member offers each sender is at most half
    /// of it, and that window is the reserve the sender may send beyond what the member vouched for; a stream's bound
    /// never drops below what it vouched for already (<see cref="SenderStream.ShareByteBound"/>). Once per timer tick.
    /// </summary>
    private void ShareByteBound(int holding)
    {
        long share = _member.MemberHeldBytesBound / Math.Max(1, holding);
        var before = _member.StreamShare;
        if (share >= _member.HeldBytesBound)
        {
            if (before is null)
            {
                return;
            }

            _member.StreamShare = null; // back to the bound per sender
            foreach (var stream in _member.Streams.Values)
            {
                stream.ShareByteBound(_member.HeldBytesBound, _options.HeldBytesReserve(_member.LargestPayload));
            }

            return;
        }

        long bound = Math.Max(share, 2L * _member.LargestPayload);
        _window = (uint)Math.Clamp(bound / 2, _packetBytes, _window); // the window within half the bound, as WithWindowWithin has it per sender
        _firstThreshold = Math.Max(1, _window / 8 / (ulong)_packetBytes);
        _member.StreamShare = (bound, _window);
        foreach (var stream in _member.Streams.Values)
        {
            stream.ShareByteBound(bound, _window);
        }
    }

    /// <summary>Packets between two reports of a stream not yet measured (<see cref="SetThreshold"/>).</summary>
    private ulong Threshold(SenderStream stream) => stream.Report.Threshold == 0 ? _firstThreshold : stream.Report.Threshold;

    /// <summary>
    /// Sets how many of <paramref name="stream"/>'s packets are taken between two reports (and between two of a partition
    /// leader's aggregates): an eighth of the window (a quarter, Aeron's choice, left the sender idle between bursts when
    /// two hops of reports were on the way), in the packets the sender sent since the last tick (the largest packet
    /// before any arrived). In the largest packets always, a stream of small packets (100-byte messages sent one to a
    /// packet, or a slow publisher's) was reported every 4 packets: in a simulated 250-member region the sender received
    /// 10,000 reports a second, all its CPU, and the region carried 645 messages a second. Once per timer tick.
    /// </summary>
    private void SetThreshold(SenderStream stream)
    {
        var report = stream.Report;
        ulong packets = stream.Delivered - report.TickDelivered;
        ulong bytes = stream.TakenBytes - report.TickBytes;
        if (packets > 0 && stream.Delivered > report.TickDelivered)
        {
            ulong average = (bytes / packets) + RegionWire.DataHeaderSize;
            report.Threshold = Math.Max(1, _window / 8 / Math.Max(1, average));
        }

        report.TickDelivered = stream.Delivered;
        report.TickBytes = stream.TakenBytes;
    }

    public void Stop()
    {
        _stopped = true;
        _member.Scheduler.Cancel(_timer);
        _member.Scheduler.Cancel(_gapTimer);
        foreach (var flow in _partition.Values)
        {
            flow.ClearRepairs(); // the repair copies back to the pool
        }
    }

    /// <summary>A new view redraws the partitions: every report starts again.</summary>
    public void OnViewInstalled()
    {
        foreach (var flow in _partition.Values)
        {
            flow.ClearRepairs();
        }

        _partition.Clear();
        _blocks.Clear();
        foreach (var stream in _member.Streams.Values)
        {
            stream.Report.Reset();
        }
    }

    /// <summary>A packet of <paramref name="stream"/> was taken (or delivery resumed): reports once an eighth of the
    /// window has been taken since the last report. Per packet, so one comparison when there is nothing to say.</summary>
    public void OnProgress(SenderStream stream)
    {
        ulong position = stream.FlowPosition;
        var report = stream.Report;
        if ((position >= report.Sent + Threshold(stream) || (report.RequestedUpTo > report.Sent && position >= report.RequestedUpTo))
            && !_stopped && stream.Sender != _member.Node)
        {
            Report(stream, position);
        }
    }

    /// <summary>Packet <paramref name="seq"/> of <paramref name="stream"/> asked for a report once this member's position
    /// reaches it (the sender is about to run out of window): reports then, whatever the threshold says.</summary>
    public void OnReportRequest(SenderStream stream, ulong seq)
    {
        var report = stream.Report;
        report.RequestedUpTo = Math.Max(report.RequestedUpTo, seq);
        OnProgress(stream);
    }

    /// <summary>A new gap in <paramref name="stream"/> (a packet arrived with missing ones before it): reports at once,
    /// so the sender resends them within a round trip, not when the window has filled behind the gap.</summary>
    public void OnGap(SenderStream stream)
    {
        if (!_stopped && _member.View is not null && stream.Sender != _member.Node)
        {
            if (_member.Scheduler.Now - _sampledAt >= _options.GapReportInterval)
            {
                SampleOverflows(); // a gap is what a full queue leaves: say so in this report (one syscall at most per interval)
            }

            Report(stream, stream.FlowPosition);
            ArmGapTimer();
        }
    }

    /// <summary>Makes the gap timer fire within <see cref="RegionOptions.GapReportInterval"/> (it may be set further
    /// out, for gaps whose repeats have backed off).</summary>
    private void ArmGapTimer()
    {
        var at = _member.Scheduler.Now + _options.GapReportInterval;
        if (!_gapTimer.IsScheduled || _gapTimer.Deadline > at)
        {
            _member.Scheduler.Cancel(_gapTimer);
            _member.Scheduler.Schedule(_gapTimer, at);
        }
    }

    /// <summary>While a gap is open: repeats the reports (a member's, and a leader's aggregates) that name one, so a lost
    /// resend is asked for again in a few milliseconds, not at the next <see cref="RegionOptions.StatusInterval"/> tick;
    /// each one backs off while its position does not move (<see cref="GapRepeatBackoff"/>). Stops when no gap is left.
    /// In a region with blocks (<see cref="Blocked"/>) it also sends the aggregates whose new gaps were held back within
    /// a gap interval of their last forward (<see cref="ForwardTrigger.Coalesced"/>), and a partition leader does not
    /// repeat its aggregate to its block's aggregator: the aggregator keeps every partition's latest one and repeats the
    /// block's gaps to the sender (the leader's status tick still sends it while it names a gap). At 250 members under
    /// ~1 % loss those repeats were half of what the aggregators took (docs/qsm.md, "Flow control").</summary>
    private void OnGapTimer()
    {
        if (_stopped || _member.View is null || _member.Index < 0)
        {
            return;
        }

        var now = _member.Scheduler.Now;
        var next = TimeSpan.MaxValue;
        foreach (var stream in _member.Streams.Values)
        {
            if (!stream.Anchored || stream.Sender == _member.Node)
            {
                continue;
            }

            ulong position = stream.FlowPosition;
            ref var backoff = ref stream.Report.Gap;
            if (stream.MissingAfter(position) == 0)
            {
                backoff.Reset();
                continue;
            }

            if (backoff.Due(position, now, _options.GapReportInterval, _options.StatusInterval))
            {
                GapRepeats++;
                Report(stream, position);
            }

            if (backoff.GapPullDue(position, now, GapPullAfter, out int attempt))
            {
                if (QueueOverflowedLately())
                {
                    GapPullsHeldByOverflow++; // due again after another GapPullAfter
                }
                else
                {
                    // neither the leader nor the sender repaired them
                    _member.Recovery.PullGaps(stream, position, stream.MissingAfter(position, _options.GapReportPackets), attempt);
                }
            }

            next = next < backoff.NextDue ? next : backoff.NextDue;
        }

        foreach (var flows in (ReadOnlySpan<Dictionary<uint, PartitionFlow>>)[_partition, _blocks])
        {
            foreach (var (sender, flow) in flows)
            {
                var summary = flow.Aggregate(_options.GapReportPackets);
                if (summary.Missing.IsEmpty)
                {
                    flow.Gap.Reset();
                    flow.Pending = false; // what was held back closed meanwhile
                    continue;
                }

                if (flow.Pending)
                {
                    var due = flow.ForwardedAt + _options.GapReportInterval;
                    if (now < due)
                    {
                        next = next < due ? next : due; // not yet an interval since the last forward
                        continue;
                    }

                    Forward(sender, flow, summary, ForwardTrigger.Coalesced); // new gaps held back since the last forward
                    if (flow.Block < 0 && Blocked)
                    {
                        continue;
                    }

                    flow.Gap.Due(summary.Position, now, _options.GapReportInterval, _options.StatusInterval);
                }
                else if (flow.Block < 0 && Blocked)
                {
                    continue; // the block's aggregator repeats its block's gaps to the sender: no repeat on the way to it
                }
                else if (flow.Gap.Due(summary.Position, now, _options.GapReportInterval, _options.StatusInterval))
                {
                    GapRepeats++;
                    Forward(sender, flow, summary, ForwardTrigger.GapRepeat);
                }

                next = next < flow.Gap.NextDue ? next : flow.Gap.NextDue;
            }
        }

        if (next != TimeSpan.MaxValue)
        {
            var floor = now + _options.GapReportInterval;
            var at = next > floor ? next : floor;
            if (Blocked && _gapTimer.IsScheduled && _gapTimer.Deadline <= at)
            {
                return; // armed again meanwhile (a forward in place held back a new gap): keep the earlier deadline
            }

            _member.Scheduler.Schedule(_gapTimer, at);
        }
    }

    /// <summary>A partition member's report, for this member as its partition leader; false if it is not one this member
    /// takes (not its partition, another view, a sender it has not heard, a source that is not that member).</summary>
    public bool OnMemberReport(NetAddress from, in FlowStatus status)
    {
        var view = _member.View;
        if (view is null || status.View != view.ViewNumber || status.Partition != _member.Partition || !IsPartitionLeader
            || !_member.Streams.TryGetValue(status.Sender, out var stream))
        {
            return false;
        }

        int index = view.IndexOf(new Membership.NodeId(status.Reporter));
        if (index < 0 || index % _member.Partitions != _member.Partition || view.Members[index].Address != from)
        {
            return false;
        }

        ReportsReceived++;
        if (!Plausible(stream, status.Position, status.Highest))
        {
            return true; // taken, and dropped as malformed
        }

        int slot = index / _member.Partitions;
        var missing = status.Missing;
        // Not for this node's own stream: as its sender it resends to everyone who lost a packet with one datagram, and
        // finds a lost resend at once (on 10 Gbit/s simulated links, its unicast repairs took its uplink from new data).
        if (_repair is not null && !_stopped && _member.Partitions > 1 && status.Sender != _member.Node)
        {
            bool congested = PartitionCongested(status.Overflowed); // from every report: the flag may come on one without gaps
            var flow = PartitionFlowOf(status.Sender);
            if (slot < flow.Positions.Length && status.Position >= flow.Positions[slot]
                && (flow.RepairLogOf(slot, create: !missing.IsEmpty) is { } log))
            {
                // what this leader holds goes to the member now, and only the rest up to the sender; every report (with
                // gaps or without) tells the log what arrived
                _repair.OnReport(stream, log, from, status.Position, status.Highest,
                    status.RoomAboveHighest ? _options.GapReportPackets : 64, ref missing, congested);
            }
        }

        Update(status.Sender, slot, status.Position, status.WindowBytes, missing, status.Highest, status.Overflowed, status.Cached,
            status.RoomAboveHighest);
        return true;
    }

    /// <summary>How long a member's oldest gap stays open before the member pulls it straight from a replica of its
    /// caching partition (<see cref="LossRecovery.PullGaps"/>), and again each time this passes: eight status intervals
    /// (160 ms at the defaults), and not while its receive queue is overflowing (<see cref="QueueOverflowedLately"/>).
    /// Its leader and the sender repair within a few report round trips; a gap still open after this was most often
    /// found after the sender released the packet on a token's ACK (and its leader had let it go too), or its sender
    /// crashed, and would otherwise wait for the token's own pull (docs/qsm.md, "Leader repair"). With a quarter of the
    /// token interval (250 ms) one seed in twelve of the 25-member cost model still lost a quarter second to it. With
    /// four status intervals (80 ms), shorter than the 100 ms a datagram waits in a full receive queue of that model,
    /// five senders into one region pulled every gap their overflow made, into the queues that overflowed, and carried
    /// 6,356 messages a second against 7,748 without pulls; held only while the queue had overflowed since the status
    /// tick before last (20–40 ms), ten senders still ran at 0.93 of their rate without pulls (docs/qsm.md, "Gap pulls
    /// and congestion").</summary>
    private TimeSpan GapPullAfter => 8 * _options.StatusInterval;

    /// <summary>As partition leader: whether its partition is congested, so that its members' gaps go to the sender
    /// (<see cref="LeaderRepair"/>): its own receive queue dropped datagrams (<see cref="QueueOverflowedLately"/>), or a
    /// member's report said its queue did, within the last <see cref="CongestionMemory"/>.</summary>
    private bool PartitionCongested(bool memberOverflowed)
    {
        var now = _member.Scheduler.Now;
        if (memberOverflowed)
        {
            _memberOverflowAt = now;
        }

        return QueueOverflowedLately() || now - _memberOverflowAt < CongestionMemory;
    }

    /// <summary>How long a queue counts as overflowing after the last sign of it (<see cref="QueueOverflowedLately"/>,
    /// <see cref="PartitionCongested"/>): as long as a gap waits before it is pulled (<see cref="GapPullAfter"/>). A queue that
    /// overflowed stays full for about its whole length (100 ms in the paper's cost model), while the kernel's count
    /// rises only in bursts, and a report says a member's queue overflowed once per burst.</summary>
    private TimeSpan CongestionMemory => GapPullAfter;

    /// <summary>Whether this node's receive queue dropped datagrams within the last <see cref="CongestionMemory"/>. Its
    /// gaps are then congestion, which the sender's resends (paced by its congestion window) answer; a gap pull's burst
    /// of repairs, or a leader's repairs, would join queues that overflow. Reads the kernel's count at most once per gap
    /// interval (a leader asks at every member report).</summary>
    private bool QueueOverflowedLately()
    {
        if (_member.Scheduler.Now - _sampledAt >= _options.GapReportInterval)
        {
            SampleOverflows();
        }

        return _member.Scheduler.Now - _overflowSeenAt < CongestionMemory;
    }

    /// <summary>Gap pulls that fell due while this node's receive queue was overflowing, and were not sent
    /// (<see cref="QueueOverflowedLately"/>).</summary>
    public long GapPullsHeldByOverflow { get; private set; }

    private bool IsPartitionLeader => _member.Index >= 0 && _member.Index == _member.Partition;

    /// <summary>Reports refused because they put a member (or a partition) further ahead of this member than any member
    /// can be (<see cref="PlausibleUpTo"/>): dropped and counted (also as <c>DropReason.Malformed</c>).</summary>
    public long ImplausibleReports { get; private set; }

    /// <summary>
    /// The furthest packet a report of <paramref name="stream"/> can name while this member has seen what it has: its
    /// highest packet (or its position, if a skip notice moved that further), plus two of its own
    /// <see cref="RegionOptions.MaxHeldPackets"/>, plus one packet per partition. A sender numbers at most
    /// <see cref="RegionOptions.SenderWindow"/> packets past what it has acknowledged, and acknowledges a packet only
    /// once its caching partition holds it, this member included for its own class (so at most a partition count past
    /// what this member has seen); and no member stores a packet more than its <see cref="RegionOptions.MaxHeldPackets"/>
    /// past its purge point. A member's position therefore never gets that far past its leader's highest packet, unless
    /// the report is forged (by an insider: reports are sealed under the region's keys) or broken. Such a position, once
    /// stored, would make every later, lower report of the member look overtaken until the next view
    /// (<see cref="Apply"/>). No bound before this member has anchored the stream (it has seen nothing yet).
    /// </summary>
    private ulong PlausibleUpTo(SenderStream stream)
        => stream.Anchored ? Math.Max(stream.MaxSeen, stream.Delivered) + (2 * (ulong)_options.MaxHeldPackets) + (ulong)_member.Partitions
            : ulong.MaxValue;

    private bool Plausible(SenderStream stream, ulong position, ulong highest)
    {
        ulong bound = PlausibleUpTo(stream);
        if (position <= bound && highest <= bound)
        {
            return true;
        }

        ImplausibleReports++;
        _member.Drops.Increment(DropReason.Malformed);
        return false;
    }

    private void SampleOverflows()
    {
        long overflows = _member.Data.ReceiveOverflows;
        _sampledAt = _member.Scheduler.Now;
        if (overflows > _overflows)
        {
            _overflowSeenAt = _sampledAt;
        }

        _overflows = overflows;
    }

    /// <summary>Whether the node's receive queue dropped datagrams since this stream's last report said so.</summary>
    private bool Overflowed(FlowReport report)
    {
        if (report.OverflowsReported < 0)
        {
            // A stream's first report counts from the previous tick, not from zero: drops from before the stream (another
            // sender's burst, long ago) would otherwise cut every new sender's window at once.
            report.OverflowsReported = _overflowsAtTick;
        }

        if (_overflows <= report.OverflowsReported)
        {
            return false;
        }

        report.OverflowsReported = _overflows;
        return true;
    }

    /// <summary>Whether this member's report lets the sender count its window from its highest packet
    /// (<see cref="FlowStatus.RoomAboveHighest"/>): it has the room (<see cref="SenderStream.RoomAboveHighest"/>), and its
    /// window is at most half the packets its reports can name above its position (<see cref="RegionOptions.GapReportPackets"/>),
    /// so the sender, which stops that many packets above the position, gains at least a window by it and every gap it
    /// can leave is named (the report then names gaps that far up, not only the 64 after the position). Large packets
    /// (the window a few hundred of them) are where a gap held the sender; with small ones the window already spans
    /// what the reports can name, and the paper's cost model lost 10–20 % of its rate under loss to the wider maps' reports.
    /// Not before the stream's packets have been measured (a tick after they start).</summary>
    private bool OffersRoomAbove(SenderStream stream)
        => stream.Report.Threshold != 0 && 8 * stream.Report.Threshold <= (ulong)_options.GapReportPackets / 2 && stream.RoomAboveHighest;

    private void Report(SenderStream stream, ulong position)
    {
        var report = stream.Report;
        if (position != report.Sent)
        {
            report.Repeated = 0;
        }

        report.Sent = position;
        var view = _member.View!;
        bool room = OffersRoomAbove(stream);
        GapMap missing = stream.MissingAfter(position, room ? _options.GapReportPackets : 64); // a member's own gaps (see GapMap)
        bool overflowed = Overflowed(report);
        ulong cached = stream.HeldClassUpTo(_member.Partitions, _member.Partition);
        report.SentCached = cached;
        ulong highest = Math.Max(position, stream.MaxSeen);
        if (IsPartitionLeader)
        {
            Update(stream.Sender, _member.Index / _member.Partitions, position, Window, missing, highest, overflowed, cached, room);
            return;
        }

        if (_member.Index < 0)
        {
            return;
        }

        var leader = view.Members[_member.Partition];
        ReportsSent++;
        _sink(leader.Address, new FlowStatus(_member.Node, view.Region.Value, view.ViewNumber, stream.Sender, _member.Partition,
            Aggregate: false, Complete: false, position, Window, missing, highest, _member.Node, position, Overflowed: overflowed,
            Cached: cached, RoomAboveHighest: room));
    }

    /// <summary>As partition leader: a member's (or this member's own) report, and the sender's aggregate if it moved far
    /// enough or became complete.</summary>
    private void Update(uint sender, int slot, ulong position, uint window, in GapMap missing, ulong highest, bool overflowed, ulong cached, bool room)
    {
        var flow = PartitionFlowOf(sender);
        Apply(sender, flow, slot, new PartitionSummary(position, window, Complete: true, missing, highest, flow.Nodes[Math.Min(slot, flow.Nodes.Length - 1)], position, overflowed,
            Math.Min(cached, highest), room));
    }

    /// <summary>As partition leader: the members' latest reports of <paramref name="sender"/>'s stream (made on first use
    /// in a view).</summary>
    private PartitionFlow PartitionFlowOf(uint sender)
    {
        if (!_partition.TryGetValue(sender, out var flow))
        {
            var members = _member.Layout[_member.Partition].Members;
            flow = new PartitionFlow(members.Count, block: -1);
            for (int i = 0; i < members.Count; i++)
            {
                flow.Nodes[i] = _member.View!.Members[members[i]].Node.Value;
                if (flow.Nodes[i] == sender)
                {
                    flow.Exempt(i); // the sender itself, a member of this partition: it reads its own member in place
                }
            }

            _partition.Add(sender, flow);
        }

        return flow;
    }

    /// <summary>Whether this region has more partitions than <see cref="RegionOptions.ReportFanIn"/>: then partition
    /// leaders report through their block's aggregator (the leader of the block's first partition).</summary>
    private bool Blocked => _member.Partitions > _options.ReportFanIn;

    /// <summary>
    /// Whether a changed gap map is news for the next hop. In a region without blocks, any change is (a gap that
    /// closed too: that forward names the others again; forwarding only on new gaps stalled 2 of 8 seeded 25-member
    /// regions for seconds). In a region with blocks (<see cref="Blocked"/>) only a packet the last forward did not name
    /// is: a closed gap, or a position moved past one, waits for the next forward (the position threshold, a new gap,
    /// the status tick or the gap timer's repeat). In a simulated 250-member region under ~1 % loss the block
    /// aggregator took its 16 partitions' aggregates on every change of any of their 80 members' maps and was the
    /// bottleneck (docs/qsm.md, "Flow control").
    /// </summary>
    private bool NewsInBlocks(PartitionFlow flow, in PartitionSummary summary)
        => !Blocked || summary.Missing.AddsTo(flow.ForwardedMissing, summary.Position >= flow.Forwarded
            ? (long)Math.Min(summary.Position - flow.Forwarded, (ulong)long.MaxValue) : -1);

    /// <summary>The view index (and partition) of the aggregator of <paramref name="partition"/>'s block.</summary>
    private int AggregatorOf(int partition) => partition / _options.ReportFanIn * _options.ReportFanIn;

    /// <summary>A partition leader's aggregate (<see cref="FlowStatus.Partial"/>), for this member as its block's
    /// aggregator; false if it is not one this member takes (another view, a block this member does not aggregate, a
    /// source that is not that partition's leader, a sender it has not heard).</summary>
    public bool OnPartialReport(NetAddress from, in FlowStatus status)
    {
        var view = _member.View;
        if (view is null || status.View != view.ViewNumber || !Blocked || status.Partition >= _member.Partitions
            || _member.Index != AggregatorOf(status.Partition) || !_member.Streams.TryGetValue(status.Sender, out var stream)
            || view.Members[status.Partition].Address != from || view.Members[status.Partition].Node.Value != status.Reporter)
        {
            return false;
        }

        ReportsReceived++;
        PartialReportsReceived++;
        if (!Plausible(stream, status.Position, status.Highest))
        {
            return true;
        }

        UpdateBlock(status.Sender, status.Partition, new PartitionSummary(status.Position, status.WindowBytes, status.Complete, status.Missing,
            status.Highest, status.Slowest, status.Leading, status.Overflowed, status.Cached, status.RoomAboveHighest));
        return true;
    }

    /// <summary>As a block's aggregator: one partition's aggregate (its leader's, or this member's own partition's).</summary>
    private void UpdateBlock(uint sender, int partition, in PartitionSummary summary)
    {
        int block = partition / _options.ReportFanIn;
        if (!_blocks.TryGetValue(sender, out var flow))
        {
            int first = block * _options.ReportFanIn;
            int count = Math.Min(_options.ReportFanIn, _member.Partitions - first);
            flow = new PartitionFlow(count, block);
            for (int i = 0; i < count; i++)
            {
                if (_member.Layout[first + i].Members.TrueForAll(m => _member.View!.Members[m].Node.Value == sender))
                {
                    flow.Exempt(i); // a partition of the sender alone never reports
                }
            }

            _blocks.Add(sender, flow);
        }

        Apply(sender, flow, partition % _options.ReportFanIn, summary);
    }

    /// <summary>One slot's new report (a member's, or a partition's aggregate), and the next hop's report if it moved far
    /// enough, became complete or names a new gap.</summary>
    private void Apply(uint sender, PartitionFlow flow, int slot, in PartitionSummary report)
    {
        if (slot >= flow.Positions.Length || report.Position == ulong.MaxValue)
        {
            return;
        }

        flow.OverflowPending |= report.Overflowed; // kept even from an overtaken report: the queue did overflow
        bool known = _member.Streams.TryGetValue(sender, out var own);
        if (report.Position < flow.Positions[slot] && (!known || flow.Positions[slot] <= PlausibleUpTo(own!)))
        {
            // An older report, overtaken: a position never goes back in a view. Unless the one stored is past what is
            // plausible now: then it came before this member had a bound (PlausibleUpTo), and the lower one replaces it.
            return;
        }

        flow.Positions[slot] = report.Position;
        flow.Windows[slot] = report.Window;
        flow.Missing[slot] = report.Missing;
        flow.Highest[slot] = report.Highest;
        flow.Heard[slot] = true;
        flow.SlotComplete[slot] = report.Complete;
        flow.SlotSlowest[slot] = report.Slowest;
        flow.SlotLeading[slot] = report.Leading;
        flow.SlotCached[slot] = Math.Max(flow.SlotCached[slot], report.Cached); // never goes back in a view
        flow.SlotRoom[slot] = report.Room;
        var summary = flow.Aggregate(_options.GapReportPackets);
        ulong threshold = known ? Threshold(own!) : _firstThreshold;
        // The sender asked for a report (this member saw the request too): pass on every move until the aggregate reaches it.
        bool requested = own is not null && own.Report.RequestedUpTo > flow.RequestServed && summary.Position > flow.Forwarded;
        var trigger = summary.Position >= flow.Forwarded + threshold ? ForwardTrigger.Position
            : summary.Complete && !flow.ForwardedComplete ? ForwardTrigger.Complete
            : summary.Cached >= flow.ForwardedCached + threshold ? ForwardTrigger.Cached // a paused reader holds the position, not the cached point
            : !summary.Missing.IsEmpty && summary.Missing != flow.ForwardedMissing && NewsInBlocks(flow, summary) ? ForwardTrigger.MapChange
            : flow.OverflowPending ? ForwardTrigger.Overflow
            : requested ? ForwardTrigger.Request
            : ForwardTrigger.Count;
        if (trigger == ForwardTrigger.MapChange && Blocked && _member.Scheduler.Now - flow.ForwardedAt < _options.GapReportInterval)
        {
            flow.Pending = true; // coalesced: the gap timer sends what accumulated (OnGapTimer)
            ArmGapTimer();
        }
        else if (trigger != ForwardTrigger.Count)
        {
            if (own is not null && summary.Position != ulong.MaxValue && summary.Position >= own.Report.RequestedUpTo)
            {
                flow.RequestServed = own.Report.RequestedUpTo;
            }

            Forward(sender, flow, summary, trigger);
        }

        if (!summary.Missing.IsEmpty)
        {
            ArmGapTimer(); // repeat it while it stays open
        }
    }

    private void Forward(uint sender, PartitionFlow flow, in PartitionSummary summary, ForwardTrigger trigger)
    {
        if (summary.Position == ulong.MaxValue)
        {
            return; // only the sender itself reported: nothing to say
        }

        if (summary.Position != flow.Forwarded || summary.Complete != flow.ForwardedComplete)
        {
            flow.Repeated = 0;
        }

        flow.Forwarded = summary.Position;
        flow.ForwardedAt = _member.Scheduler.Now;
        flow.Pending = false;
        flow.ForwardedCached = summary.Cached;
        flow.ForwardedComplete = summary.Complete;
        flow.ForwardedMissing = summary.Missing;
        if (!_member.Streams.TryGetValue(sender, out var stream) || stream.Address == default)
        {
            return;
        }

        var view = _member.View!;
        if (flow.Block < 0 && Blocked)
        {
            // A partition's aggregate in a region of many partitions: to its block's aggregator (in place if that is this member).
            int aggregator = AggregatorOf(_member.Partition);
            bool overflowedHere = flow.OverflowPending;
            flow.OverflowPending = false;
            if (aggregator == _member.Index)
            {
                UpdateBlock(sender, _member.Partition, summary with { Overflowed = overflowedHere });
                return;
            }

            ReportsSent++;
            Forwards[((int)AggregateHop.Partial * (int)ForwardTrigger.Count) + (int)trigger]++;
            _sink(view.Members[aggregator].Address, new FlowStatus(_member.Node, view.Region.Value, view.ViewNumber, sender, _member.Partition,
                Aggregate: true, summary.Complete, summary.Position, summary.Window, summary.Missing, summary.Highest, summary.Slowest, summary.Leading,
                Partial: true, Overflowed: overflowedHere, Cached: summary.Cached, RoomAboveHighest: summary.Room));
            return;
        }

        ReportsSent++;
        Forwards[((int)(flow.Block < 0 ? AggregateHop.Partition : AggregateHop.Block) * (int)ForwardTrigger.Count) + (int)trigger]++;
        bool overflowed = flow.OverflowPending;
        flow.OverflowPending = false;
        _sink(stream.Address, new FlowStatus(_member.Node, view.Region.Value, view.ViewNumber, sender, flow.Block < 0 ? _member.Partition : flow.Block,
            Aggregate: true, summary.Complete, summary.Position, summary.Window, summary.Missing, summary.Highest, summary.Slowest, summary.Leading,
            Overflowed: overflowed, Cached: summary.Cached, RoomAboveHighest: summary.Room));
    }

    private void OnTimer()
    {
        if (_stopped)
        {
            return;
        }

        if (_member.View is not null && _member.Index >= 0)
        {
            _overflowsAtTick = _overflows;
            SampleOverflows();
            int active = 0;
            int holding = 0;
            foreach (var stream in _member.Streams.Values)
            {
                if (!stream.Anchored || stream.Sender == _member.Node)
                {
                    continue; // this node's own stream: its sender reads the member's position in place
                }

                var report = stream.Report;
                SetThreshold(stream);
                ulong position = stream.FlowPosition;
                bool moved = position != report.LastTick;
                if (moved)
                {
                    active++;
                    report.LastTick = position;
                }

                if (moved || stream.HeldBytes > 0)
                {
                    holding++;
                }

                if (position != report.Sent || Repeat(ref report.Repeated, stream.MissingAfter(position) != 0)
                    || stream.HeldClassUpTo(_member.Partitions, _member.Partition) != report.SentCached)
                {
                    Report(stream, position);
                }
            }

            ShareWindow(active);
            ShareByteBound(holding);
            foreach (var flows in (ReadOnlySpan<Dictionary<uint, PartitionFlow>>)[_partition, _blocks])
            {
                foreach (var (sender, flow) in flows)
                {
                    var summary = flow.Aggregate(_options.GapReportPackets);
                    if (summary.Position != flow.Forwarded || summary.Complete != flow.ForwardedComplete || summary.Cached != flow.ForwardedCached
                        || Repeat(ref flow.Repeated, !summary.Missing.IsEmpty))
                    {
                        Forward(sender, flow, summary, ForwardTrigger.Tick);
                    }
                }
            }
        }

        _member.Scheduler.ScheduleAfter(_timer, _options.StatusInterval);
    }

    /// <summary>Whether an unchanged report goes again on this tick: on every tick while it names a gap (the resend may
    /// have been lost too), else on the 1st, 2nd, 4th, … 64th tick after it last changed (a lost report would otherwise
    /// leave the sender waiting for the token; a lost tail is resent on a repeat), then no more.</summary>
    private static bool Repeat(ref int ticks, bool gap)
    {
        ticks = Math.Min(ticks + 1, LastRepeat + 1);
        return gap || (ticks <= LastRepeat && (ticks & (ticks - 1)) == 0);
    }

    /// <summary>A partition leader's view of its members' reports on one sender's stream, or (<see cref="Block"/> ≥ 0) a
    /// block aggregator's view of its partitions' aggregates.</summary>
    private sealed class PartitionFlow(int members, int block)
    {
        public readonly int Block = block;
        public readonly ulong[] Positions = new ulong[members];
        public readonly uint[] Windows = new uint[members];
        public readonly bool[] Heard = new bool[members];
        public readonly GapMap[] Missing = new GapMap[members];
        public readonly ulong[] Highest = new ulong[members];
        public readonly uint[] Nodes = new uint[members];
        public readonly bool[] SlotComplete = new bool[members];  // a member's report is complete; a partition's, when it says so
        public readonly uint[] SlotSlowest = new uint[members];
        public readonly ulong[] SlotLeading = new ulong[members];
        public readonly ulong[] SlotCached = new ulong[members]; // what each member (or partition) holds of its class
        public readonly bool[] SlotRoom = new bool[members];     // each member (or partition) has room for a window above its highest
        public ulong Forwarded;
        public ulong ForwardedCached;
        public GapMap ForwardedMissing;
        public bool ForwardedComplete;
        public int Repeated;
        public GapRepeatBackoff Gap;
        public bool OverflowPending; // a member (or partition) said its queue overflowed since the last forward
        public TimeSpan ForwardedAt; // when the last forward went
        public bool Pending;         // a new gap held back (within a gap interval of the last forward) for the gap timer
        public ulong RequestServed;  // the sender's report request this aggregate has answered
        private RepairLog?[]? _repairs; // as partition leader: what it repaired to each member (LeaderRepair)

        /// <summary>The repairs to slot <paramref name="slot"/>'s member; made on first use when <paramref name="create"/>.</summary>
        public RepairLog? RepairLogOf(int slot, bool create)
        {
            if (!create)
            {
                return _repairs?[slot];
            }

            _repairs ??= new RepairLog?[Positions.Length];
            return _repairs[slot] ??= new RepairLog();
        }

        public void ClearRepairs()
        {
            foreach (var log in _repairs ?? [])
            {
                log?.Clear();
            }
        }

        public void Exempt(int slot)
        {
            Positions[slot] = ulong.MaxValue;
            Highest[slot] = ulong.MaxValue;
            Windows[slot] = uint.MaxValue;
            Heard[slot] = true;
            SlotComplete[slot] = true;
            SlotLeading[slot] = ulong.MaxValue;
            SlotCached[slot] = 0; // the sender is no holder to count on (it may be the one that crashes)
            SlotRoom[slot] = true;
        }

        public PartitionSummary Aggregate(int gapPackets)
        {
            ulong minimum = ulong.MaxValue, highest = ulong.MaxValue, leading = 0;
            GapMap missing = default;
            ulong cached = ulong.MaxValue; // every replica of the partition holds its class up to here; for a block, every partition
            uint window = uint.MaxValue, slowest = 0;
            bool complete = true, room = true;
            for (int i = 0; i < Positions.Length; i++)
            {
                if (Block >= 0 || Positions[i] != ulong.MaxValue || !Heard[i])
                {
                    // 0 if not heard. The sender itself (exempt in its partition) is skipped: the others are the replicas; a
                    // partition of the sender alone (exempt in a block) counts 0: the sender is no holder (it may crash).
                    cached = Math.Min(cached, SlotCached[i]);
                }
                if (!Heard[i])
                {
                    complete = false;
                    continue;
                }

                complete &= SlotComplete[i];
                room &= SlotRoom[i];
                if (Positions[i] < minimum)
                {
                    minimum = Positions[i];
                    slowest = SlotSlowest[i];
                }

                if (SlotLeading[i] != ulong.MaxValue)
                {
                    leading = Math.Max(leading, SlotLeading[i]); // not the sender itself (exempt)
                }

                highest = Math.Min(highest, Highest[i]);
                window = Math.Min(window, Windows[i]);
            }

            for (int i = 0; i < Positions.Length && minimum != ulong.MaxValue; i++)
            {
                ulong shift = Positions[i] - minimum;
                if (Heard[i])
                {
                    missing.OrShifted(Missing[i], shift, gapPackets);
                }
            }

            return new PartitionSummary(minimum, window, complete, missing, highest, slowest, Math.Max(leading, minimum == ulong.MaxValue ? 0 : minimum),
                Cached: cached == ulong.MaxValue ? 0 : cached, Room: room && complete);
        }
    }
}

/// <summary>A partition leader's aggregate of its members' reports on one stream: the minimum position and window over
/// the members heard, whether all were, the union of their gaps within the <see cref="GapMap.Bits"/> packets after the minimum, and the lowest
/// highest packet. <see cref="Position"/> is <see cref="ulong.MaxValue"/> when no member but the sender itself was heard
/// (nothing to say). <see cref="Slowest"/> is the member at <see cref="Position"/>, <see cref="Leading"/> the furthest
/// position of any member heard.</summary>
internal readonly record struct PartitionSummary(ulong Position, uint Window, bool Complete, GapMap Missing, ulong Highest, uint Slowest, ulong Leading,
    bool Overflowed = false, ulong Cached = 0, bool Room = false);

/// <summary>Where an aggregate goes (<see cref="ReceiverStatus.Forwards"/>): a partition leader's to the sender, a
/// partition leader's to its block's aggregator (<see cref="FlowStatus.Partial"/>), a block aggregator's to the sender.</summary>
internal enum AggregateHop
{
    Partition,
    Partial,
    Block,
}

/// <summary>What made an aggregate go (<see cref="ReceiverStatus.Forwards"/>), first match in this order: its position
/// moved a threshold, it became complete, its cached point moved a threshold, its gap map changed, a queue overflowed,
/// the sender asked; or the status tick, or the gap timer's repeat.</summary>
internal enum ForwardTrigger
{
    Position,
    Complete,
    Cached,
    MapChange,
    Overflow,
    Request,
    Tick,
    GapRepeat,
    Coalesced,
    Count,
}

/// <summary>What a member last reported of one sender's stream (<see cref="ReceiverStatus"/>).</summary>
internal sealed class FlowReport
{
    public ulong Sent;
    public ulong LastTick;
    public int Repeated;
    public ulong Threshold;     // packets taken between two reports (ReceiverStatus.SetThreshold); 0 until first set
    public ulong TickDelivered; // the stream's Delivered and TakenBytes at the last tick
    public ulong TickBytes;
    public GapRepeatBackoff Gap;
    public long OverflowsReported = -1; // the node's receive-queue drops this stream's last overflowed report covered (-1: none yet)
    public ulong RequestedUpTo;    // the highest packet that asked for a report on reaching it
    public ulong SentCached;       // the cached point (SenderStream.HeldClassUpTo) the last report carried

    public void Reset()
    {
        Sent = 0;
        LastTick = 0;
        Repeated = 0;
        RequestedUpTo = 0;
        SentCached = 0;
        Gap.Reset();
    }
}
