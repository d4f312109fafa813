using System.Buffers.Binary;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Membership;
using QuickSilver.Qsm.RateControl;

namespace QuickSilver.Qsm.Region;

/// <summary>Observes a region data packet as it arrives, before the member acts on it (simulation timelines).</summary>
internal delegate void RegionPacketObserver(NetAddress from, in DataHeader header);

/// <summary>
/// QSM's recovery layer for datacenter groups (§2.3–§2.4) as a stack layer: the node's <see cref="RegionMember"/> in its
/// one region of overlap and a <see cref="RegionSender"/> per region it multicasts into. It owns packet type
/// <see cref="RegionWire.DataType"/> (data and repairs) and control channel <see cref="RegionWire.ControlChannel"/>
/// (tokens and pulls go to the member, NAKs and ACKs to the sender of the region they name: the kind byte and region id
/// are this layer's own format, read once here). The layer above (the group layer, or a region simulation standing in
/// for the GMS) tells it the node's id and installs region views. Core thread only.
/// </summary>
internal sealed class RegionLayer(RegionOptions? options = null, RateControlOptions? rateOptions = null) : IProtocolLayer, IPacketHandler
{
    private readonly RegionOptions _options = Validated(options ?? new RegionOptions());
    private readonly RateControlOptions _rateOptions = Validated(rateOptions ?? new RateControlOptions());
    private readonly Dictionary<uint, RegionSender> _senders = new();
    private readonly List<RegionSender> _retired = new();
    private readonly Dictionary<RegionSender, TimeSpan> _retiredAt = new();
    private readonly SenderContinuation _continuation = new();
    private Alarm? _drainAlarm;
    private readonly List<(NetAddress From, DataHeader Header)> _pendingStarts = new();
    private IDatagramTransport _transport = null!;
    private IAlarmScheduler _scheduler = null!;
    private IControlChannel _control = null!;
    private uint? _node;
    private StatusOutbox? _statusOutbox;
    private ViewMember[] _admitted = [];

    public string Name => "qsm-region";

    public RegionOptions Options => _options;

    /// <summary>The node's member in its region of overlap, once a view including it is installed.</summary>
    public RegionMember? Member { get; private set; }

    /// <summary>This node's senders, by region id.</summary>
    public IReadOnlyDictionary<uint, RegionSender> Senders => _senders;

    /// <summary>Region packets and control messages this layer could not route (malformed, or for a region it is not in).</summary>
    public DropCounters Drops { get; } = new();

    /// <summary>The largest payload of one region packet on this stack's transport.</summary>
    public int MaxPayload => RegionSender.PayloadCapacity(_transport.MaxDatagramSize, _options);

    /// <summary>A packet from a sender, in order (or on arrival without FIFO), exactly once.</summary>
    public event RegionDeliveryHandler? Delivered;

    /// <summary>The layer above's taker of delivered packets (the group layer), which may refuse one for now (back-pressure,
    /// see <see cref="RegionPacketConsumer"/>); then call <see cref="ResumeDelivery"/> once it has room.</summary>
    public RegionPacketConsumer? Consumer { get; set; }

    /// <summary>Offers again, in order, the packets the <see cref="Consumer"/> refused and those held behind them.
    /// Core thread; never from inside the consumer.</summary>
    public void ResumeDelivery()
    {
        Member?.ResumeDelivery();
        foreach (var sender in _senders.Values)
        {
            sender.OnLocalProgress();
        }

        foreach (var retired in _retired)
        {
            retired.OnLocalProgress();
        }
    }

    /// <summary>A packet of a sender that told this node to skip ahead, passed over instead of delivered
    /// (<see cref="SlowReceiverPolicy.SkipAhead"/>).</summary>
    public event RegionDeliveryHandler? Skipped;

    /// <summary>A new member replaced the old one (the node moved to another region of overlap).</summary>
    public event Action<RegionMember>? MemberChanged;

    /// <summary>A sender into a new region was created.</summary>
    public event Action<RegionSender>? SenderAdded;

    /// <summary>A sender stopped being one of this node's senders: the node registered again under a new id
    /// (<see cref="SetNode"/>), and a new sender into the same region takes its place. The retired one only finishes
    /// its stream (<see cref="RetiredSenders"/>).</summary>
    public event Action<RegionSender>? SenderRetired;

    /// <summary>The current member looked for departed streams to retire (<see cref="RegionMember.Swept"/>): the layer
    /// above forgets its per-sender state for senders the member no longer <see cref="RegionMember.Knows"/>.</summary>
    public event Action<RegionMember>? Swept;

    /// <summary>Every well-formed region data packet, before the member sees it (simulation timelines).</summary>
    internal event RegionPacketObserver? PacketArrived;

    public void Attach(LayerContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        _transport = context.Transport;
        _scheduler = context.Scheduler;
        _drainAlarm = new Alarm(_ => SweepRetired());
        context.RegisterPacketType(RegionWire.DataType, this);
        if (_transport is SecureTransport secure)
        {
            // Data, repairs and flow status name their region at the same offset: sealed under that region's key
            // (docs/security.md, "Keys per region and view").
            secure.ScopeByField(RegionWire.DataType, PacketHeader.Size);
            secure.ScopeByField(RegionWire.StatusType, PacketHeader.Size);
        }

        if (_options.FlowControl == RegionFlowControl.ReceiverWindow)
        {
            context.RegisterPacketType(RegionWire.StatusType, this);
            _statusOutbox = new StatusOutbox(_transport);
        }

        _control = context.OpenControlChannel(RegionWire.ControlChannel);
        if (_transport is SecureTransport sealing)
        {
            _control = new ScopedControlChannel(_control, sealing, scopeOffset: 1); // u8 kind | u32 region | …: under the region's key
        }

        _control.SetReceiver(OnControl, static _ => { });
    }

    public void Stop()
    {
        if (_drainAlarm is not null)
        {
            _scheduler.Cancel(_drainAlarm);
        }

        _statusOutbox?.Stop();
        Member?.Stop(null);
        foreach (var sender in _senders.Values)
        {
            sender.Stop();
        }

        foreach (var retired in _retired)
        {
            retired.Stop();
        }
    }

    public string Describe() =>
        $"member: {Member?.Describe() ?? "none"}" +
        (_statusOutbox is { } outbox ? $"; status reports queued {outbox.Queued}, dropped {outbox.Dropped}" : "") +
        (Member?.FlowStatus?.Repair is { } repair ? $"; leader repairs {repair.Sent} (sent again {repair.Resent}, handed to the sender {repair.GivenUp}, reports left to the sender while the queue overflowed {repair.LeftOnOverflow}, refused {repair.Refused}, implausible reports {repair.Implausible})" : "") +
        (Member is { FlowStatus: not null } flowMember ? $"; gap pulls {flowMember.Recovery.GapPullsSent} (held while the queue overflowed {flowMember.FlowStatus.GapPullsHeldByOverflow}), implausible flow reports {flowMember.FlowStatus.ImplausibleReports}" : "") +
        string.Concat(_senders.Values.Select(s => $"; sender to region {s.Region}: last {s.LastSequence}, acked {s.Acknowledged}, " +
            $"unacked {s.Unacknowledged}, " +
            (_options.FlowControl == RegionFlowControl.ReceiverWindow
                ? $"window left {s.WindowRemaining} B, blocked {s.WindowBlocked} (held ms: congestion {s.HeldBy(WindowHold.Congestion).TotalMilliseconds:F0}, gap {s.HeldBy(WindowHold.Gap).TotalMilliseconds:F0}, taken {s.HeldBy(WindowHold.Taken).TotalMilliseconds:F0}, above highest {s.HeldBy(WindowHold.AboveHighest).TotalMilliseconds:F0}, horizon {s.HeldBy(WindowHold.Horizon).TotalMilliseconds:F0}, local {s.HeldBy(WindowHold.Local).TotalMilliseconds:F0}), above highest {s.LimitsAboveHighest}, status {s.StatusReports}, token acks {s.AcknowledgedByToken} (held against a gap {s.HeldAgainstToken}), resent on status {s.RetransmittedOnStatus} (tail {s.TailResends}, lost resends {s.LostResends}, deferred {s.RepairsDeferred}, report delay {s.ReportDelay.TotalMilliseconds:F2} ms, asked after release {s.RepairsTooLate}), laggards skipped {s.LaggardsSkipped}, "
                : $"μ_snd {s.RateController.TargetRate:F0}/s, credits {s.RateController.Credits:F0}, ") +
            $"resent on NAK {s.RetransmittedOnNak} / timeout {s.RetransmittedOnTimeout}")) +
        (_retired.Count > 0 ? $"; retired senders {_retired.Count}" : "") +
        $"; senders released {SendersReleased}, taken back {SendersTakenBack}, stopped {SendersStopped} (drain timed out {RetiredSendersTimedOut}, evicted {RetiredSendersEvicted})" +
        $"; drops {Drops.Total}";

    /// <summary>Retired senders kept while they finish their streams, at most this many (the oldest is stopped beyond it,
    /// <see cref="RetiredSendersEvicted"/>).</summary>
    internal const int MaxRetiredSenders = 8;

    /// <summary>Senders that take nothing more from a source and still finish their streams: made under an earlier id of
    /// this node (see <see cref="SetNode"/>), or into a region none of the node's groups maps to any more (see
    /// <see cref="Release"/>). Each is stopped once all it sent is acknowledged, or after
    /// <see cref="RegionOptions.RetireDepartedStreamsAfter"/> at the latest.</summary>
    public IReadOnlyList<RegionSender> RetiredSenders => _retired;

    /// <summary>Senders released because no group of the node maps to their region any more (<see cref="Release"/>).</summary>
    public long SendersReleased { get; private set; }

    /// <summary>Released senders taken back into use because a group mapped to their region again before they stopped.</summary>
    public long SendersTakenBack { get; private set; }

    /// <summary>Retired senders stopped: all they sent acknowledged, their drain delay over, or evicted at the bound.</summary>
    public long SendersStopped { get; private set; }

    /// <summary>Retired senders stopped with packets still unacknowledged after <see cref="RegionOptions.RetireDepartedStreamsAfter"/>
    /// (their region ended, or no member acknowledged them).</summary>
    public long RetiredSendersTimedOut { get; private set; }

    /// <summary>Retired senders stopped, with whatever they still had unacknowledged, because
    /// <see cref="MaxRetiredSenders"/> newer ones were retired after them.</summary>
    public long RetiredSendersEvicted { get; private set; }

    /// <summary>Regions whose numbering this node remembers for a sender it may make there again (<see cref="SenderContinuation"/>).</summary>
    public int ContinuationsRemembered => _continuation.Count;

    /// <summary>The node no longer sends into <paramref name="region"/>: none of its groups maps to it any more (the group
    /// layer calls this once the region's feed has no group). Its sender takes nothing more from its source and is
    /// retired: it still answers NAKs and ACKs for what it sent until all of it is acknowledged, then stops, at the
    /// latest after <see cref="RegionOptions.RetireDepartedStreamsAfter"/> (the region may have ended: nobody would
    /// acknowledge). Its last sequence number is remembered (<see cref="SenderContinuation"/>): a sender this node makes
    /// into the region again numbers on from there, and one asked for before it stopped is taken back
    /// (<see cref="Sender"/>). False when the node had no sender there.</summary>
    public bool Release(uint region)
    {
        if (!_senders.Remove(region, out var sender))
        {
            return false;
        }

        sender.Source = null;
        sender.PeersWaiting = null;
        SendersReleased++;
        SenderRetired?.Invoke(sender);
        Retire(sender);
        return true;
    }

    /// <summary>Keeps <paramref name="sender"/> (taking nothing more) until its stream is acknowledged, within the bound.</summary>
    private void Retire(RegionSender sender)
    {
        if (sender.Unacknowledged == 0)
        {
            Finish(sender);
            return;
        }

        _retired.Add(sender);
        _retiredAt[sender] = _scheduler.Now;
        while (_retired.Count > MaxRetiredSenders)
        {
            var oldest = _retired[0];
            _retired.RemoveAt(0);
            RetiredSendersEvicted++;
            Finish(oldest);
        }

        if (!_drainAlarm!.IsScheduled)
        {
            _scheduler.ScheduleAfter(_drainAlarm, _options.TokenInterval);
        }
    }

    /// <summary>Stops a retired sender; one of this node's current id leaves its last number for a successor.</summary>
    private void Finish(RegionSender sender)
    {
        _retiredAt.Remove(sender);
        sender.Stop();
        SendersStopped++;
        if (sender.Node == _node)
        {
            _continuation.Remember(sender.Region, sender.LastSequence);
        }
    }

    /// <summary>Every <see cref="RegionOptions.TokenInterval"/> while any sender is retired: stops those whose stream is
    /// acknowledged, and those retired longer than <see cref="RegionOptions.RetireDepartedStreamsAfter"/>.</summary>
    private void SweepRetired()
    {
        var now = _scheduler.Now;
        for (int i = _retired.Count - 1; i >= 0; i--)
        {
            var retired = _retired[i];
            bool acknowledged = retired.Unacknowledged == 0;
            if (acknowledged || now - _retiredAt[retired] >= _options.RetireDepartedStreamsAfter)
            {
                _retired.RemoveAt(i);
                RetiredSendersTimedOut += acknowledged ? 0 : 1;
                Finish(retired);
            }
        }

        if (_retired.Count > 0)
        {
            _scheduler.ScheduleAfter(_drainAlarm!, _options.TokenInterval);
        }
    }

    /// <summary>Sets this node's id (from the GMS's registration, or given by a simulation). A node that registers again
    /// (the GMS dropped it as silent, or restarted) gets a new id and is a new member to everyone else: the member is
    /// replaced by one with the new id at the next view that includes it, and every sender is retired: it takes no
    /// more from its source (the layer above makes a new sender under the new id) but goes on answering NAKs and
    /// tokens for what it sent, as the stream of a departed sender, until all of it is acknowledged
    /// (docs/architecture.md, "Identity").</summary>
    public void SetNode(uint node)
    {
        if (_node is { } old && old != node)
        {
            var senders = _senders.Values.ToList();
            _senders.Clear();
            foreach (var sender in senders)
            {
                sender.Source = null;
                sender.PeersWaiting = null;
                SenderRetired?.Invoke(sender);
                Retire(sender);
            }

            _continuation.Clear(); // a new id is a new sender everywhere: its streams start at 1
        }

        _node = node;
    }

    /// <summary>The GMS this node registers with restarted empty (a new epoch; docs/membership.md, "A restarted GMS"):
    /// it draws node ids, region ids and view numbers anew from 1, so an id this layer knows may now name another node
    /// or region, and a view number may go back. Nothing keyed by them can be kept: every sender and retired sender
    /// stops at once, first handing the payloads of the packets it sent and had not had acknowledged to
    /// <paramref name="resend"/> (the group layer sends their messages again in the new epoch; without it they are
    /// counted in <see cref="PacketsAbandonedAtNewEpoch"/>), the member stops and leaves its address, and numbering
    /// starts again at 1 under the id the new GMS gives. The new epoch's views then build member and senders afresh; the layer
    /// above makes new senders for its groups, which take what their sources still hold.</summary>
    public void StartNewEpoch(Action<ReadOnlyMemory<byte>>? resend = null)
    {
        foreach (var sender in _retired.Concat(_senders.Values))
        {
            if (resend is null)
            {
                PacketsAbandonedAtNewEpoch += sender.Unacknowledged;
                continue;
            }

            foreach (var payload in sender.UnacknowledgedPayloads())
            {
                PacketsResentAtNewEpoch++;
                resend(payload);
            }
        }

        foreach (var sender in _senders.Values)
        {
            sender.Source = null;
            sender.PeersWaiting = null;
            SenderRetired?.Invoke(sender);
            sender.Stop();
            SendersStopped++;
        }

        foreach (var retired in _retired)
        {
            retired.Stop();
            SendersStopped++;
        }

        _senders.Clear();
        _retired.Clear();
        _retiredAt.Clear();
        _continuation.Clear();
        _pendingStarts.Clear();
        LeaveRegion();
        _admitted = [];
        _node = null;
        NewEpochs++;
    }

    /// <summary>Times <see cref="StartNewEpoch"/> reset this layer (the GMS restarted).</summary>
    public long NewEpochs { get; private set; }

    /// <summary>Packets this node's senders had sent and not had acknowledged when the GMS restarted
    /// (<see cref="StartNewEpoch"/>) and that nobody took to send again: a member that had not received them misses them.</summary>
    public long PacketsAbandonedAtNewEpoch { get; private set; }

    /// <summary>Packets sent and not acknowledged when the GMS restarted whose payloads were handed back to be sent again
    /// in the new epoch (<see cref="StartNewEpoch"/>).</summary>
    public long PacketsResentAtNewEpoch { get; private set; }

    /// <summary>The id <see cref="SetNode"/> gave, if any.</summary>
    public uint? NodeId => _node;

    private uint Node => _node ?? throw new InvalidOperationException("The region layer does not know its node id yet (SetNode).");

    /// <summary>Installs a region view. One that includes this node is its region of overlap: a new region replaces the
    /// member (the old one stops); the sender into that region, if any, sees the view too.</summary>
    public void InstallView(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (view.IndexOf(new NodeId(Node)) >= 0)
        {
            if (Member?.View?.Region != view.Region || Member.Node != Node)
            {
                Member?.Stop(view.MulticastAddress);
                var member = new RegionMember(Node, _transport, _control, _scheduler, _options, _rateOptions);
                if (_options.FlowControl == RegionFlowControl.ReceiverWindow)
                {
                    member.EnableFlowStatus(SendStatus);
                }

                member.AdmitSenders(_admitted);
                member.Delivered += (sender, seq, payload) => Delivered?.Invoke(sender, seq, payload);
                member.Skipped += (sender, seq, payload) => Skipped?.Invoke(sender, seq, payload);
                member.Consumer = (sender, seq, payload) => Consumer?.Invoke(sender, seq, payload) ?? true;
                member.Swept += () =>
                {
                    if (ReferenceEquals(Member, member))
                    {
                        Swept?.Invoke(member);
                    }
                };
                Member = member;
                MemberChanged?.Invoke(member);
                if (_senders.TryGetValue(view.Region.Value, out var own))
                {
                    AttachLocal(own);
                }
            }

            Member.InstallView(view);
        }

        if (_senders.TryGetValue(view.Region.Value, out var existing))
        {
            var before = existing.View;
            existing.InstallView(view);
            if (view.ViewNumber != before.ViewNumber && existing.LastSequence > 0)
            {
                AnnounceStart(existing, before, view);
            }
        }

        ReplayStarts();

        for (int i = _retired.Count - 1; i >= 0; i--)
        {
            var retired = _retired[i];
            if (retired.Region == view.Region.Value)
            {
                retired.InstallView(view);
            }

            if (retired.Unacknowledged == 0)
            {
                _retired.RemoveAt(i);
                Finish(retired);
            }
        }

        if (Member is { View: { } memberView } && memberView.Region == view.Region && view.ViewNumber > memberView.ViewNumber
            && view.IndexOf(new NodeId(Node)) < 0)
        {
            LeaveRegion();
        }
    }

    /// <summary>Members stopped because the node left their region without entering another (<see cref="LeaveRegion"/>).</summary>
    public long MembersStopped { get; private set; }

    /// <summary>The node is in no region of overlap any more: it left its last group (a newer view of its region leaves it
    /// out, or, when it was the region's last member and the region ended, none of its groups' views names the region).
    /// The member stops and leaves the region's multicast address, instead of keeping the old view and the socket's
    /// membership until the node joins a group again.</summary>
    public void LeaveRegion()
    {
        if (Member is { } left)
        {
            left.Stop(null);
            Member = null;
            MembersStopped++;
        }
    }

    /// <summary>Sets the nodes that may send into this node's region of overlap besides its members: the members of
    /// every region of every group mapped to it (the group layer works them out from the GMS's views after each update).
    /// Data from anyone else is dropped and counted (<see cref="DropReason.NotAMember"/>); see
    /// <see cref="RegionMember.AdmitSenders"/>.</summary>
    public void AdmitSenders(IEnumerable<ViewMember> senders)
    {
        ArgumentNullException.ThrowIfNull(senders);
        _admitted = [.. senders];
        Member?.AdmitSenders(_admitted);
        ReplayStarts();
    }

    /// <summary>This node's sender into <paramref name="region"/> under id <paramref name="node"/>: the current one, or
    /// one retired when the node registered again (it still takes the NAKs, ACKs and flow reports of its stream).</summary>
    private RegionSender? SenderFor(uint region, uint node)
    {
        if (_senders.TryGetValue(region, out var sender) && sender.Node == node)
        {
            return sender;
        }

        foreach (var retired in _retired)
        {
            if (retired.Region == region && retired.Node == node)
            {
                return retired;
            }
        }

        return sender; // not ours under any id: the current sender counts the refusal
    }

    /// <summary>Most stream-start hints kept for a view this node has not installed yet (the oldest is dropped beyond it).</summary>
    internal const int MaxPendingStarts = 64;

    /// <summary>Most stream-start hints kept from one source address (a node sends one per region view change).</summary>
    internal const int MaxPendingStartsPerSource = 4;

    /// <summary>A sender that has sent before tells each member new in its view where its stream starts for that member
    /// (<see cref="RegionMember.OnStart"/>). A sender that has sent nothing needs no hint: its first packet, numbered 1,
    /// starts every member's stream.</summary>
    private void AnnounceStart(RegionSender sender, RegionView before, RegionView view)
    {
        Span<byte> message = stackalloc byte[RegionWire.StartSize];
        RegionWire.WriteStart(message, view.Region.Value, sender.Node, view.ViewNumber, sender.ViewStart);
        foreach (var member in view.Members)
        {
            if (member.Node.Value != sender.Node && before.IndexOf(member.Node) < 0)
            {
                _control.Send(member.Address, message);
            }
        }
    }

    /// <summary>Tells a member that held <paramref name="sender"/> back too long to skip its packets up to
    /// <paramref name="through"/> (reliable unicast; this node's own member in place).</summary>
    private void SendSkip(RegionSender sender, ViewMember member, ulong through)
    {
        if (member.Node.Value == _node)
        {
            return; // never chosen (the sender does not count its own member), but never sent to itself either
        }

        Span<byte> message = stackalloc byte[RegionWire.SkipSize];
        RegionWire.WriteSkip(message, sender.Region, sender.Node, sender.View.ViewNumber, through);
        _control.Send(member.Address, message);
    }

    /// <summary>Hands the member the stream-start hints that arrived before the view (or the admission) they need.</summary>
    private void ReplayStarts()
    {
        if (Member is not { } member)
        {
            return;
        }

        for (int i = 0; i < _pendingStarts.Count; i++)
        {
            var (from, header) = _pendingStarts[i];
            if (member.OnStart(from, header))
            {
                _pendingStarts.RemoveAt(i--);
            }
        }
    }

    /// <summary>The sender into <paramref name="view"/>'s region, created on first use.</summary>
    public RegionSender Sender(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (_senders.TryGetValue(view.Region.Value, out var sender))
        {
            return sender;
        }

        for (int i = 0; i < _retired.Count; i++)
        {
            var retired = _retired[i];
            if (retired.Region == view.Region.Value && retired.Node == Node)
            {
                // Released (no group mapped here) and still finishing its stream: it simply goes on.
                _retired.RemoveAt(i);
                _retiredAt.Remove(retired);
                if (retired.View.ViewNumber < view.ViewNumber)
                {
                    retired.InstallView(view);
                }

                _senders.Add(view.Region.Value, retired);
                SendersTakenBack++;
                SenderAdded?.Invoke(retired);
                if (Member?.View?.Region == view.Region)
                {
                    AttachLocal(retired);
                }

                return retired;
            }
        }

        sender = new RegionSender(Node, view, _transport, _scheduler, _options, _rateOptions, _continuation.Take(view.Region.Value));
        var created = sender;
        sender.LaggardFound += (member, through) => SendSkip(created, member, through);
        _senders.Add(view.Region.Value, sender);
        SenderAdded?.Invoke(sender);
        if (Member?.View?.Region == view.Region)
        {
            AttachLocal(sender);
        }

        return sender;
    }

    /// <summary>A sender in its own region delivers its own packets to itself, as every member of the view does.</summary>
    private void AttachLocal(RegionSender sender)
    {
        var member = Member!;
        if (ReferenceEquals(sender.LocalMember, member))
        {
            return; // taken back into use while still attached to this member
        }

        sender.LocalMember = member;
        var address = _transport.LocalAddress;
        sender.Sent += (ulong seq, in LentPacket packet, ReadOnlySpan<byte> sent) =>
        {
            if (ReferenceEquals(Member, member))
            {
                member.OnLocalSend(sender.Node, address, seq, packet, sent, sender.View.ViewNumber, Math.Min(sender.ViewStart, seq));
            }
        };
        sender.LocalPosition = () => ReferenceEquals(Member, member) && member.Streams.TryGetValue(sender.Node, out var own) && own.Anchored ? own.FlowPosition : null;
        sender.SettledAdvanced += settled =>
        {
            if (ReferenceEquals(Member, member) && member.Streams.TryGetValue(sender.Node, out var own))
            {
                own.OnSettled(settled); // as a member hearing it in the sender's next packet would
            }
        };
        sender.CachedAdvanced += cached =>
        {
            if (ReferenceEquals(Member, member) && member.Streams.TryGetValue(sender.Node, out var own))
            {
                own.OnCached(cached); // likewise (docs/qsm.md, "Partition share")
            }
        };
    }

    public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        if (header.Type == RegionWire.StatusType)
        {
            OnStatus(from, header, datagram);
            return;
        }

        if (!RegionWire.TryReadData(header, datagram, out var data, out var payload))
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        PacketArrived?.Invoke(from, data);
        if (Member is { } member)
        {
            member.OnData(from, data, payload);
        }
        else
        {
            Drops.Increment(DropReason.NotForThisNode);
        }
    }

    /// <summary>A flow status datagram: a partition member's report goes to the member (as its partition leader), a
    /// leader's aggregate to this node's sender into that region.</summary>
    private void OnStatus(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        if (!RegionWire.TryReadStatus(header, datagram, out var status))
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (status.Aggregate && !status.Partial)
        {
            if (SenderFor(status.Region, status.Sender) is { } sender)
            {
                sender.OnStatus(from, status, local: false);
            }
            else
            {
                Drops.Increment(DropReason.NotForThisNode);
            }
        }
        else if (Member is not { } member || !member.OnFlowStatus(from, status))
        {
            Drops.Increment(DropReason.NotForThisNode);
        }
    }

    /// <summary>The member's flow status sink: an aggregate for this node's own sender is handed over in place, anything
    /// else is one datagram (unreliable: a lost report is repeated, see <see cref="ReceiverStatus"/>), through the
    /// <see cref="StatusOutbox"/> when the transport has no free slot.</summary>
    private void SendStatus(NetAddress to, in FlowStatus status)
    {
        if (status.Aggregate && !status.Partial && status.Sender == _node && _senders.TryGetValue(status.Region, out var own))
        {
            own.OnStatus(to, status, local: true);
            return;
        }

        _statusOutbox!.Send(to, status);
    }

    /// <summary>A control message: <c>u8 kind | u32 region | …</c> (docs/wire-format.md).</summary>
    private void OnControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.Length < 5)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        uint region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]);
        switch ((RegionControl)message[0])
        {
            case RegionControl.Token or RegionControl.Pull:
                if (Member?.View?.Region.Value == region)
                {
                    Member.OnControl(from, message);
                }
                else
                {
                    Drops.Increment(DropReason.NotForThisNode);
                }

                break;
            case RegionControl.Start:
                if (!RegionWire.TryReadStart(message, out var start))
                {
                    Drops.Increment(DropReason.Malformed);
                }
                else if (Member?.OnStart(from, start) != true)
                {
                    // Kept before its sender can be checked (the view may not be here yet), so one source may hold only a
                    // few: a peer that is no member cannot push the real senders' hints out.
                    if (_pendingStarts.Count(p => p.From == from) >= MaxPendingStartsPerSource)
                    {
                        Drops.Increment(DropReason.ReceiveBufferFull);
                        break;
                    }

                    if (_pendingStarts.Count >= MaxPendingStarts)
                    {
                        _pendingStarts.RemoveAt(0);
                        Drops.Increment(DropReason.ReceiveBufferFull);
                    }

                    _pendingStarts.Add((from, start));
                }

                break;
            case RegionControl.Skip:
                if (!RegionWire.TryReadSkip(message, out uint skipRegion, out uint skipSender, out _, out ulong through))
                {
                    Drops.Increment(DropReason.Malformed);
                }
                else if (Member is not { } skipping)
                {
                    Drops.Increment(DropReason.NotForThisNode);
                }
                else
                {
                    skipping.OnSkip(from, skipRegion, skipSender, through);
                }

                break;
            case RegionControl.Nak or RegionControl.Ack:
                if (message.Length >= 9 && SenderFor(region, BinaryPrimitives.ReadUInt32LittleEndian(message[5..])) is { } sender)
                {
                    sender.OnControl(from, message);
                }
                else
                {
                    Drops.Increment(DropReason.NotForThisNode);
                }

                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    private static RegionOptions Validated(RegionOptions options)
    {
        options.Validate();
        return options;
    }

    private static RateControlOptions Validated(RateControlOptions options)
    {
        options.Validate();
        return options;
    }
}
