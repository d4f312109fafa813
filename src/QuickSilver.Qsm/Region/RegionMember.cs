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
/// recovery and acknowledgement. I/O-free: data and repairs go through the node's <see cref="IDatagramTransport"/>,
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
    private readonly Dictionary<uint, (ulong Cutoff, ulong Purge, ulong Stable)> _lastRound = new();
    private readonly Alarm _tokenAlarm;
    private readonly Alarm _rateAlarm;
    private readonly NakSet _mine;
    private readonly NakSet _scratch;
    private readonly NakSet _lacks;
    private readonly byte[] _message = new byte[64 * 1024];
    private readonly byte[] _datagram;
    private NakSet[] _others = [];
    private uint _firstView;
    private readonly RateControlOptions _rateOptions;
    private readonly RateEstimator _receiveRate;
    private readonly RateEstimator _lossRate;
    private Token? _early;
    private bool _stopped;
    private List<RegionLayout.Partition> _partitions = new();
    private ulong _round;
    private TimeSpan _roundStarted;
    private bool _roundOpen;

    /// <param name="rateOptions">k and Δ of the receive-rate and loss estimates this member reports (§2.4).</param>
    public RegionMember(uint node, IDatagramTransport data, IControlChannel control, IAlarmScheduler scheduler, RegionOptions? options = null,
        RateControlOptions? rateOptions = null)
    {
        _node = node;
        _data = data ?? throw new ArgumentNullException(nameof(data));
        _control = control ?? throw new ArgumentNullException(nameof(control));
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _options = options ?? new RegionOptions();
        _options.Validate();
        _rateOptions = rateOptions ?? new RateControlOptions();
        _rateOptions.Validate();
        _receiveRate = new RateEstimator(_rateOptions.Samples, _rateOptions.SampleInterval);
        _lossRate = new RateEstimator(_rateOptions.Samples, _rateOptions.SampleInterval);
        _mine = new NakSet(_options.MaxNakRanges);
        _scratch = new NakSet(_options.MaxNakRanges);
        _lacks = new NakSet(_options.MaxNakRanges + 1);
        _datagram = new byte[data.MaxDatagramSize];
        _pool = new PacketPool(_options.MaxHeldPackets);
        _deliverOne = DeliverOne;
        _tokenAlarm = new Alarm(_ => OnTokenTimer());
        _rateAlarm = new Alarm(_ => SampleRates());
        _scheduler.ScheduleAfter(_rateAlarm, _rateOptions.SampleInterval);
    }

    public RegionView? View { get; private set; }

    /// <summary>Index of this node in the view (view order = ascending address).</summary>
    public int Index { get; private set; } = -1;

    public int Partitions { get; private set; } = 1;

    public int Partition { get; private set; }

    public bool IsRegionLeader => Index == 0;

    public DropCounters Drops { get; } = new();

    /// <summary>Token rounds this node completed as region leader.</summary>
    public long RoundsCompleted { get; private set; }

    public long RepairsSent { get; private set; }

    public long PullsSent { get; private set; }

    public long NaksSent { get; private set; }

    /// <summary>Tokens whose NAK sets this node coarsened so the token fit one control message.</summary>
    public long TokensCoarsened { get; private set; }

    /// <summary>Raised for each packet delivered (after <see cref="Consumer"/> took it).</summary>
    public event RegionDeliveryHandler? Delivered;

    /// <summary>Takes each packet first and may refuse it for now (see <see cref="RegionPacketConsumer"/>); null takes all.</summary>
    public RegionPacketConsumer? Consumer { get; set; }

    /// <summary>Packets the <see cref="Consumer"/> refused (each is offered again after <see cref="ResumeDelivery"/>).</summary>
    public long DeliveriesRefused { get; private set; }

    /// <summary>Packets held by this member's streams (delivered ones awaiting the purge, and undelivered ones).</summary>
    public int HeldPackets
    {
        get
        {
            int held = 0;
            foreach (var stream in _streamList)
            {
                held += stream.HeldCount;
            }

            return held;
        }
    }

    /// <summary>Receive-buffer buffers allocated because none was free (the warm-up or a burst; flat when steady).</summary>
    public long BuffersAllocated => _pool.Allocated;

    /// <summary>Installs a new region view (from the GMS). Partitions and the ring follow from it alone (§2.3.1).</summary>
    public void InstallView(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (View is null)
        {
            _firstView = view.ViewNumber;
        }

        bool changed = View is not null && View.ViewNumber != view.ViewNumber;
        View = view;
        Index = view.IndexOf(new NodeId(_node));
        Partitions = view.PartitionCount(_options.ReplicationFactor);
        Partition = Index >= 0 ? view.PartitionOf(Index, _options.ReplicationFactor) : 0;
        _partitions = RegionLayout.Build(view, Partitions);
        _others = new NakSet[Partitions];
        for (int i = 0; i < Partitions; i++)
        {
            _others[i] = new NakSet(_options.MaxNakRanges);
        }

        if (view.MulticastAddress is { } group)
        {
            _data.JoinGroup(group);
        }

        if (IsRegionLeader && !_stopped && changed)
        {
            // A round in flight follows the old view's ring and will be dropped: abandon it and start one now.
            _roundOpen = false;
            _scheduler.ScheduleAfter(_tokenAlarm, TimeSpan.Zero);
        }
        else if (IsRegionLeader && !_stopped && !_tokenAlarm.IsScheduled)
        {
            _scheduler.ScheduleAfter(_tokenAlarm, _options.TokenInterval);
        }

        if (_early is { } early)
        {
            if (early.View == view.ViewNumber)
            {
                _early = null;
                OnToken(early);
            }
            else if (early.View < view.ViewNumber)
            {
                _early = null;
            }
        }
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
        $"rounds {RoundsCompleted}, repairs {RepairsSent}, pulls {PullsSent}, NAKs {NaksSent}, drops {Drops.Total}; " +
        string.Join("; ", _streams.Values.Select(s => $"sender {s.Sender}: delivered {s.Delivered}, seen {s.MaxSeen}, held {s.HeldCount}, " +
            $"overflows {s.Overflows}, anchored {s.Anchored}{(s.Paused ? ", paused" : "")}"));

    /// <summary>Stops this member (the node moved to another region): no more tokens or rate samples, and its multicast
    /// address is left unless <paramref name="keepAddress"/> (the next region's) is the same.</summary>
    public void Stop(NetAddress? keepAddress)
    {
        _scheduler.Cancel(_tokenAlarm);
        _scheduler.Cancel(_rateAlarm);
        _stopped = true;
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

        var stream = Stream(header.Sender);
        if (header.View != RegionWire.RepairView)
        {
            stream.Address = from; // an original or a sender's retransmission: from the sender itself
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

        if (header.View != RegionWire.RepairView && stream.Anchored && header.Seq > stream.MaxSeen + 1)
        {
            _lossRate.Count((long)(header.Seq - stream.MaxSeen - 1)); // a gap in the sender's stream: packets lost on the way
        }

        Accept(stream, header.Seq, payload);
    }

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
    public void OnLocalSend(uint sender, NetAddress senderAddress, ulong seq, ReadOnlySpan<byte> payload)
    {
        var stream = Stream(sender);
        stream.Address = senderAddress;
        if (!stream.Anchored)
        {
            stream.Anchor(seq - 1);
        }

        Accept(stream, seq, payload);
    }

    private void Accept(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload)
    {
        if (stream.Add(seq, payload))
        {
            _receiveRate.Count();
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

        switch ((RegionControl)message[0])
        {
            case RegionControl.Token:
                var token = Token.TryRead(message, _options.MaxNakRanges, _options.MaxSenders);
                if (token is null || token.Region != View.Region.Value)
                {
                    Drops.Increment(DropReason.Malformed);
                    return;
                }

                if (token.View < View.ViewNumber)
                {
                    // A round started under an older view: its ring positions are not this view's. The leader abandons it
                    // when it installs the newer view and starts a new round at once.
                    Drops.Increment(DropReason.NotForThisNode);
                    return;
                }

                if (token.View > View.ViewNumber)
                {
                    _early = token; // the GMS's update has not reached this node yet: hold it until it does
                    return;
                }

                OnToken(token);
                break;
            case RegionControl.Pull:
                if (!RegionWire.TryReadRanges(message, _scratch, out _, out uint sender, out int partition, out int partitions)
                    || !_streams.TryGetValue(sender, out var stream))
                {
                    Drops.Increment(DropReason.Malformed);
                    return;
                }

                SendRepairs(stream, from, _scratch, partition, partitions);
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
            stream = new SenderStream(sender, _deliverOne, _options.FifoDelivery, _options.MaxHeldPackets, _options.SenderWindow, _pool, Drops);
            _streams.Add(sender, stream);
            _streamList.Add(stream);
        }

        return stream;
    }

    // ---- the token ring (§2.3.2, §2.3.3) ----

    private void OnTokenTimer()
    {
        if (!IsRegionLeader)
        {
            return;
        }

        // A round that has not come back within the timeout is presumed lost (a holder crashed): start another.
        if (_roundOpen && _scheduler.Now - _roundStarted < _options.TokenInterval * _options.TokenTimeoutIntervals)
        {
            _scheduler.ScheduleAfter(_tokenAlarm, _options.TokenInterval);
            return;
        }

        var token = new Token { Region = View!.Region.Value, View = View.ViewNumber, Round = ++_round, Partition = 0, Step = 0 };
        foreach (var stream in _streams.Values.Where(s => s.Anchored))
        {
            if (token.Sections.Count == _options.MaxSenders)
            {
                break;
            }

            var section = new TokenSection(stream.Sender, _options.MaxNakRanges);
            if (_lastRound.TryGetValue(stream.Sender, out var last))
            {
                (section.Cutoff, section.PurgeUpTo, section.StableBefore) = last;
            }

            token.Sections.Add(section);
        }

        // Senders the region reported on last round that this leader has no stream for still get a section from the
        // start, so every holder's state is in it.
        foreach (var sender in _lastRound.Keys)
        {
            if (token.Sections.Count < _options.MaxSenders && token.Find(sender) is null)
            {
                var section = new TokenSection(sender, _options.MaxNakRanges);
                (section.Cutoff, section.PurgeUpTo, section.StableBefore) = _lastRound[sender];
                token.Sections.Add(section);
            }
        }

        _roundOpen = true;
        _roundStarted = _scheduler.Now;
        _scheduler.ScheduleAfter(_tokenAlarm, _options.TokenInterval);
        OnToken(token);
    }

    private void OnToken(Token token)
    {
        if (token.Partition >= Partitions)
        {
            if (IsRegionLeader && token.Round == _round)
            {
                FinishRound(token);
            }

            return;
        }

        var members = _partitions[token.Partition].Members;
        int closingStep = members.Count;
        if (Index < 0 || token.Step > closingStep || members[token.Step % closingStep] != Index)
        {
            Drops.Increment(DropReason.Malformed); // not ours to hold under this view
            return;
        }

        // Senders this node knows that the token does not carry yet get a section. The holders before this one never
        // saw it, so it cannot vouch for them: its minimums start at 0 (no purge, no stability this round); from the
        // next round the leader starts it with the others.
        foreach (var stream in _streams.Values)
        {
            if (stream.Anchored && token.Find(stream.Sender) is null && token.Sections.Count < _options.MaxSenders)
            {
                token.Sections.Add(new TokenSection(stream.Sender, _options.MaxNakRanges) { ReceivedMin = 0, StableMin = 0 });
            }
        }

        ProcessAll(token, closingStep, members);

        // A partition of one closes at once.
        if (token.Step == 0 && closingStep == 1)
        {
            token.Step = 1;
            ProcessAll(token, closingStep, members);
        }

        Forward(token, members, closingStep);
    }

    /// <summary>Processes every section of the token for a sender whose stream this node has started; a section for a
    /// sender this node has not heard from yet passes through untouched.</summary>
    private void ProcessAll(Token token, int closingStep, List<int> members)
    {
        foreach (var section in token.Sections)
        {
            if (_streams.TryGetValue(section.Sender, out var stream) && stream.Candidate is { } candidate && !stream.Anchored)
            {
                stream.Anchor(Math.Max(candidate, section.PurgeUpTo));
            }

            if (stream is { Anchored: true })
            {
                Process(section, stream, token.Step, closingStep, members);
            }
            else if (token.Step < closingStep)
            {
                // Not started on this sender yet (nothing heard, or its start not known): it has received nothing the
                // region may purge on its behalf beyond where its stream would start. Without this, a member of the
                // view that had not heard the sender yet was left out of the purge point, the region purged packets
                // it was owed, and no peer could repair them.
                section.ReceivedMin = Math.Min(section.ReceivedMin, stream?.Candidate ?? 0);
            }
        }
    }

    /// <summary>
    /// What this member cannot serve to its partition (its part in the collective NAK, §2.3.3): what it lacks up to the
    /// cutoff, plus, for a member that joined mid-stream, the partition's packets between the purge point and where it
    /// started. Those were never owed to it, so it does not NAK them, but it does not hold them either: without this, a
    /// joiner would hide from the sender a packet that every older replica of its partition lost.
    /// </summary>
    private void CannotServe(SenderStream stream, ulong purgeUpTo)
    {
        _lacks.CopyFrom(_mine);
        if (stream.AnchoredAt > purgeUpTo)
        {
            ulong p = (ulong)Partitions;
            ulong mine = (ulong)Partition;
            ulong first = (purgeUpTo + 1 + (p - 1 - mine)) / p; // the first index k with k·p + partition > purgeUpTo
            ulong last = stream.AnchoredAt < mine ? 0 : (stream.AnchoredAt - mine) / p;
            if (first <= last && (last * p) + mine <= stream.AnchoredAt)
            {
                _lacks.AddRange(first, last);
            }
        }
    }

    private void Process(TokenSection section, SenderStream stream, int step, int closingStep, List<int> members)
    {
        stream.Purge(section.PurgeUpTo);
        stream.CachedMissing(section.Cutoff, Partitions, Partition, _mine);
        CannotServe(stream, section.PurgeUpTo);

        if (step > 0)
        {
            // Compare with the predecessor on the ring: push what it lacks and we have, pull what we lack and it has.
            var predecessor = View!.Members[members[step - 1]].Address;
            _scratch.SetDifference(section.PredecessorNaks, _mine);
            SendRepairs(stream, predecessor, _scratch, Partition, Partitions);
            _scratch.SetDifference(_mine, section.PredecessorNaks);
            if (!_scratch.IsEmpty)
            {
                SendRanges(predecessor, RegionControl.Pull, stream.Sender, Partition, _scratch);
                PullsSent++;
            }

            _scratch.SetIntersection(section.PartitionNaks, _lacks);
            section.PartitionNaks.CopyFrom(_scratch);
        }
        else
        {
            section.PartitionNaks.CopyFrom(_lacks);
        }

        if (step == closingStep)
        {
            // Back at the partition leader: what the whole partition lacks goes to the sender as one collective NAK.
            if (!section.PartitionNaks.IsEmpty && stream.Address != default)
            {
                SendRanges(stream.Address, RegionControl.Nak, stream.Sender, Partition, section.PartitionNaks);
                NaksSent++;
            }

            section.PredecessorNaks.Clear();
            section.PartitionNaks.Clear();
        }
        else
        {
            section.PredecessorNaks.CopyFrom(_mine);

            // First visit this round: pull packets cached elsewhere, once they are stable on their replicas.
            ulong limit = Math.Min(section.Cutoff, section.StableBefore);
            if (limit > stream.Delivered && Partitions > 1)
            {
                stream.OtherMissing(limit, Partitions, Partition, _others);
                for (int j = 0; j < Partitions; j++)
                {
                    if (j != Partition && !_others[j].IsEmpty)
                    {
                        var leader = View!.Members[_partitions[j].Members[0]].Address;
                        SendRanges(leader, RegionControl.Pull, stream.Sender, j, _others[j]);
                        PullsSent++;
                    }
                }
            }

            section.MaxSeen = Math.Max(section.MaxSeen, stream.MaxSeen);
            section.StableMin = Math.Min(section.StableMin, stream.CachedUpTo(Partitions, Partition, Math.Max(section.Cutoff, section.MaxSeen)));
            section.ReceivedMin = Math.Min(section.ReceivedMin, stream.Delivered);
            section.RateMin = Math.Min(section.RateMin, _receiveRate.Rate); // μ_rec^(i): new packets from all senders
            section.LossMax = Math.Max(section.LossMax, LossFraction);
        }
    }

    private void Forward(Token token, List<int> members, int closingStep)
    {
        if (token.Step < closingStep)
        {
            token.Step++;
            var next = members[token.Step % closingStep];
            SendToken(token, next);
            return;
        }

        // The partition's ring is closed: on to the next partition's leader, or back to the region leader.
        token.Partition++;
        token.Step = 0;
        int target = token.Partition < Partitions ? _partitions[token.Partition].Members[0] : _partitions[0].Members[0];
        SendToken(token, target);
    }

    private void SendToken(Token token, int memberIndex)
    {
        if (memberIndex == Index)
        {
            OnToken(token); // the next hop is this node (e.g. a one-partition region's leader closing the round)
            return;
        }

        // A token must fit one control message: with many senders and full NAK sets it may not, so its NAK sets are
        // coarsened (supersets: a few duplicate repairs) until it does; one that still does not fit is dropped.
        int length = token.Write(_message);
        if (length > _control.MaxMessageBytes)
        {
            TokensCoarsened++;
        }

        for (int ranges = _options.MaxNakRanges / 2; length > _control.MaxMessageBytes && ranges >= 1; ranges /= 2)
        {
            foreach (var section in token.Sections)
            {
                section.PredecessorNaks.CoarsenTo(ranges);
                section.PartitionNaks.CoarsenTo(ranges);
            }

            length = token.Write(_message);
        }

        if (length > _control.MaxMessageBytes)
        {
            // Still too large: drop the predecessor NAK sets. They only steer push and pull between ring neighbours: a
            // successor that sees none pulls what it lacks and the predecessor answers with what it has, so recovery
            // costs a few requests more; the partition NAK sets (what goes to the sender) are kept.
            foreach (var section in token.Sections)
            {
                section.PredecessorNaks.Clear();
            }

            length = token.Write(_message);
        }

        if (length > _control.MaxMessageBytes)
        {
            Drops.Increment(DropReason.Oversized); // too many senders for one message; the leader retries after the timeout
            return;
        }

        if (!_control.Send(View!.Members[memberIndex].Address, _message.AsSpan(0, length)))
        {
            Drops.Increment(DropReason.SendQueueFull); // the round is lost; the leader starts another after the timeout
        }
    }

    private void FinishRound(Token token)
    {
        _roundOpen = false;
        RoundsCompleted++;
        // m of formula (1): the senders currently multicasting, i.e. with data the region has not all made stable, or
        // new data since the last round; an idle sender keeps its section but takes no share.
        int senders = Math.Max(1, token.Sections.Count(s => s.StableMin == ulong.MaxValue || s.StableMin < s.MaxSeen
            || !_lastRound.TryGetValue(s.Sender, out var last) || s.MaxSeen > last.Cutoff));
        foreach (var section in token.Sections)
        {
            ulong stable = section.StableMin == ulong.MaxValue ? 0 : section.StableMin;
            ulong received = section.ReceivedMin == ulong.MaxValue ? 0 : section.ReceivedMin;
            _lastRound[section.Sender] = (section.MaxSeen, received, stable);
            if (_streams.TryGetValue(section.Sender, out var joined) && !joined.Anchored && joined.Candidate is { } candidate)
            {
                joined.Anchor(Math.Max(candidate, received)); // a new leader that joined mid-stream
            }

            if (_streams.TryGetValue(section.Sender, out var stream) && stream.Address != default)
            {
                double rate = section.RateMin == double.MaxValue ? 0 : section.RateMin / senders; // formula (1)
                int length = RegionWire.WriteAck(_message, new RegionAck(View!.Region.Value, section.Sender, token.View, stable, Math.Max(stable, section.MaxSeen), rate, section.LossMax));
                _control.Send(stream.Address, _message.AsSpan(0, length));
            }
        }
    }

    private void SendRanges(NetAddress to, RegionControl kind, uint sender, int partition, NakSet ranges)
    {
        int length = RegionWire.WriteRanges(_message, kind, View!.Region.Value, sender, partition, Partitions, ranges);
        _control.Send(to, _message.AsSpan(0, length));
    }

    /// <summary>Pushes or answers a pull: at most <see cref="RegionOptions.MaxRepairBurst"/> packets per request (the rest
    /// are asked for again next round), and only within what this member has seen (a peer's ranges are untrusted).</summary>
    private void SendRepairs(SenderStream stream, NetAddress to, NakSet indices, int partition, int partitions)
    {
        int budget = _options.MaxRepairBurst;
        ulong p = (ulong)partitions;
        foreach (var range in indices.Ranges)
        {
            ulong last = Math.Min(range.Last, stream.MaxSeen / p);
            for (ulong k = range.First; k <= last && budget > 0; k++)
            {
                ulong seq = (k * p) + (ulong)partition;
                if (stream.TryGet(seq, out var payload))
                {
                    budget--;
                    int length = RegionWire.WriteData(_datagram, new DataHeader(stream.Sender, View!.Region.Value, RegionWire.RepairView, seq, seq), payload);
                    _data.TrySend(to, _datagram.AsSpan(0, length));
                    RepairsSent++;
                }
            }
        }
    }

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
