using System.Buffers.Binary;
using System.Numerics;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Membership;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// What a <see cref="RegionSender"/> pulls its packets' payloads from (the group layer's records, or a simulation's
/// numbered payloads). Core thread only.
/// </summary>
internal interface IRegionPacketSource
{
    /// <summary>Writes the next packet's payload into <paramref name="payload"/> (whose length is the most one packet
    /// carries) and returns how many bytes it wrote; 0 means "nothing now": the sender asks again only after
    /// <see cref="RegionSender.Signal"/>.</summary>
    int WritePayload(Span<byte> payload);
}

/// <summary>A packet the sender numbered and sent for the first time: its datagram in the sender's window, valid only
/// during the call unless the handler keeps it as the lender allows (<see cref="IPacketLender"/>), and
/// <paramref name="sent"/>, the same payload in the transport's send slot, valid only during the call. Read the packet
/// now from <paramref name="sent"/>: in a region with multicast the window's copy was written past the cache
/// (<see cref="StreamingCopy"/>).</summary>
internal delegate void PacketSentHandler(ulong seq, in LentPacket packet, ReadOnlySpan<byte> sent);

/// <summary>
/// A sender's side of a region (QSM §2.2–§2.4): numbers its packets for the region, multicasts them at the rate the
/// region's feedback allows, and keeps each until the region's collective ACK says it is stable on its caching replicas.
/// It retransmits what a partition's collective NAK names, and (rarely, the paper notes) what no ACK has covered after a
/// timeout. I/O-free; core thread only.
/// <para>The send path is pull-driven and copy-free (docs/architecture.md): the sender is a datagram feed of its
/// transport, which pulls it only when a send slot is free (back-pressure: a full send queue stops the pulls, nothing is
/// dropped). On a pull it writes the data header straight into the slot and asks its <see cref="Source"/> to write the
/// payload after it, so the group layer's records go from the application's buffer into the send slot in one copy; then
/// the finished datagram is copied once into the window ring, the copy retransmissions are made from. A new packet is
/// made only when rate control has a credit and the window has room, so nothing is taken from the source that cannot
/// leave now.</para>
/// </summary>
internal sealed class RegionSender : IDatagramFeed, IPacketLender
{
    private readonly uint _node;
    private readonly IDatagramTransport _data;
    private readonly IAlarmScheduler _scheduler;
    private readonly RegionOptions _options;
    private readonly RateController _rate;
    private readonly Outgoing[] _window;
    private readonly Stack<byte[]> _spare; // datagram buffers this node's member gave back after the window moved on
    private readonly Queue<ulong> _repairs = new();
    private readonly HashSet<NetAddress> _viewAddresses = new();
    private readonly NakSet _naks;
    private readonly Alarm _retransmitAlarm;
    private readonly IFeedChannel _feed;
    private RegionView _view;
    private TimeSpan _lastProgress;
    private ulong _regionMaxSeen;
    private ulong _viewStart = 1;
    private ulong _fanoutSeq;      // a packet still to be sent to more members (no multicast), or 0
    private int _fanoutNext;       // the next view index to send it to
    private bool _stopped;
    private readonly bool _receiverWindow;
    private PartitionReport[] _reports = [];
    private bool _alone;        // every partition of the view is this node alone: no one reports (receiver window mode)
    private ulong _sentBytes;   // bytes of every packet numbered so far (the stream's byte position)
    private ulong _ackedBytes;  // the byte position of the last acknowledged packet
    private ulong _byteLimit;   // new packets go only while _sentBytes is below it (receiver window mode)
    private ulong _baseLimit = ulong.MaxValue; // _byteLimit without the windows counted from members' highest packets
    private ulong _seqLimit = ulong.MaxValue;  // above _baseLimit, new packets go only while LastSequence is below it
    private int _limiting = -1; // the partition whose report sets _byteLimit, or -1 (the local member, or none)
    private WindowHold _limitingAbove; // for that partition: AboveHighest or Horizon when its bound counts from its highest packet
    private readonly CongestionWindow? _congestion; // receiver-window mode with RegionOptions.CongestionControl
    private bool _congestionBinds; // the congestion window, not a receiver's, sets _byteLimit
    private ulong _limitSpan;      // _byteLimit less the slowest partition's position (bytes): the window in force
    private ulong _requestedAt;    // the _byteLimit under which a report was last requested
    private readonly bool _skipAhead;
    private bool _windowBlocked; // the window (bytes or packets) refused a new packet and none has been numbered since
    private readonly Alarm _laggardAlarm;
    private uint _heldBy;       // the laggard holding this sender back since _heldSince (SkipAhead), or 0
    private TimeSpan _heldSince;

    /// <param name="continueAfter">The last sequence number an earlier sender of this node into the same region numbered
    /// (<see cref="SenderContinuation"/>): this one numbers from the next, so members that still hold the earlier
    /// stream take its packets as the stream's continuation, not as duplicates. 0: a new stream, numbered from 1.</param>
    public RegionSender(uint node, RegionView view, IDatagramTransport data, IAlarmScheduler scheduler,
        RegionOptions? options = null, RateControlOptions? rateOptions = null, ulong continueAfter = 0)
    {
        _node = node;
        LastSequence = Acknowledged = _regionMaxSeen = continueAfter;
        _viewStart = continueAfter + 1;
        _view = view ?? throw new ArgumentNullException(nameof(view));
        SetViewAddresses(view);
        _data = data ?? throw new ArgumentNullException(nameof(data));
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _options = options ?? new RegionOptions();
        _options.Validate();
        _rate = new RateController(scheduler, rateOptions);
        _rate.CreditAvailable += Signal;
        _window = new Outgoing[_options.SenderWindow];
        _spare = new Stack<byte[]>();
        _naks = new NakSet(_options.MaxNakRanges);
        _retransmitAlarm = new Alarm(_ => RetransmitOverdue());
        _scheduler.ScheduleAfter(_retransmitAlarm, _options.TokenInterval);
        _laggardAlarm = new Alarm(_ => WatchLaggard());
        _receiverWindow = _options.FlowControl == RegionFlowControl.ReceiverWindow;
        _skipAhead = _receiverWindow && _options.SlowReceivers == SlowReceiverPolicy.SkipAhead;
        if (_receiverWindow && _options.CongestionControl)
        {
            // Floor: a quarter of the initial window (16 KiB when it starts open), at least four of the largest packets;
            // ceiling: the largest window a receiver can grant.
            ulong initial = (ulong)_options.InitialCongestionWindowBytes;
            ulong floor = Math.Max(initial == 0 ? 16UL << 10 : initial / 4, (ulong)(4 * PayloadCapacity(data.MaxDatagramSize, _options)));
            _congestion = new CongestionWindow(initial, floor, 1UL << 30);
        }

        ResetReports();
        _feed = data.RegisterFeed(this);
    }

    /// <summary>The largest payload one packet can carry.</summary>
    public int MaxPayload => PayloadCapacity(_data.MaxDatagramSize, _options);

    /// <summary>The largest payload of a region packet on an endpoint whose datagrams are at most
    /// <paramref name="maxDatagramSize"/>, within <see cref="RegionOptions.MaxPacketBytes"/>.</summary>
    public static int PayloadCapacity(int maxDatagramSize, RegionOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        int packet = options.MaxPacketBytes > 0 ? Math.Min(options.MaxPacketBytes, maxDatagramSize) : maxDatagramSize;
        return packet - RegionWire.DataHeaderSize;
    }

    /// <summary>Where new packets' payloads come from; the sender pulls it when it can send.</summary>
    public IRegionPacketSource? Source { get; set; }

    /// <summary>The sending node's id.</summary>
    public uint Node => _node;

    /// <summary>The region this sender multicasts into.</summary>
    public uint Region => _view.Region.Value;

    /// <summary>The region view this sender numbers its packets in.</summary>
    internal RegionView View => _view;

    /// <summary>The first seq this sender numbers (or numbered) in <see cref="View"/>.</summary>
    internal ulong ViewStart => _viewStart;

    public ulong LastSequence { get; private set; }

    /// <summary>The region's collective ACK: every packet up to here is stable on its caching replicas.</summary>
    public ulong Acknowledged { get; private set; }

    /// <summary>Packets numbered and not yet acknowledged (at most <see cref="RegionOptions.SenderWindow"/>).</summary>
    public int Unacknowledged => (int)(LastSequence - Acknowledged);

    /// <summary>The payloads (group records) of the packets sent and not yet acknowledged, oldest first: what a node that
    /// starts afresh at a new GMS epoch sends again (<see cref="RegionLayer.StartNewEpoch"/>). Views of this sender's
    /// window buffers: valid while it is stopped and not reused.</summary>
    internal IEnumerable<ReadOnlyMemory<byte>> UnacknowledgedPayloads()
    {
        for (ulong seq = Acknowledged + 1; seq <= LastSequence; seq++)
        {
            var outgoing = _window[seq % (ulong)_window.Length];
            if (outgoing.Datagram is { } datagram && outgoing.Length >= RegionWire.DataHeaderSize)
            {
                yield return datagram.AsMemory(RegionWire.DataHeaderSize, outgoing.Length - RegionWire.DataHeaderSize);
            }
        }
    }

    public bool HasSpace => Unacknowledged < _options.SenderWindow;

    public long Retransmissions => RetransmittedOnNak + RetransmittedOnTimeout + RetransmittedOnStatus;

    /// <summary>Packets resent because a partition's collective NAK named them.</summary>
    public long RetransmittedOnNak { get; private set; }

    /// <summary>Packets resent because no ACK covered them in time (the paper: this "essentially never kicks in").</summary>
    public long RetransmittedOnTimeout { get; private set; }

    public RateController RateController => _rate;

    public DropCounters Drops { get; } = new();

    /// <summary>Raised for every transmission of a packet, first or repeated (observability: the region simulation's timeline).</summary>
    public event Action<ulong>? Transmitted;

    /// <summary>Raised when the region's ACK moves <see cref="Acknowledged"/> forward: (before, after).</summary>
    public event Action<ulong, ulong>? AcknowledgedAdvanced;

    /// <summary>Raised for each packet sent for the first time (a sender that is a member records it locally).</summary>
    public event PacketSentHandler? Sent;

    /// <summary>The source has something again (or something else changed that may let a packet go): pull soon.</summary>
    public void Signal()
    {
        if (!_stopped)
        {
            _feed.Signal();
        }
    }

    /// <summary>The region member this sender's own packets are recorded at (<see cref="RegionLayer"/>'s local attachment),
    /// so a sender taken back into use is not attached to the same member twice.</summary>
    internal object? LocalMember { get; set; }

    /// <summary>Stops the sender: no more pulls or timers (the stack is stopping).</summary>
    public void Stop()
    {
        _stopped = true;
        _scheduler.Cancel(_retransmitAlarm);
        _scheduler.Cancel(_laggardAlarm);
        _feed.Dispose();
    }

    /// <summary>Installs a new region view; packets numbered from now on record it, and where it starts.</summary>
    public void InstallView(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (view.ViewNumber != _view.ViewNumber)
        {
            _viewStart = LastSequence + 1;
        }

        _view = view;
        SetViewAddresses(view);
        ResetReports();
        _fanoutSeq = 0; // a fan-out in progress follows the old membership: the region's recovery covers the rest
        Signal();
    }

    /// <summary>The addresses of the members of this sender's view of the region: NAKs and ACKs come only from them.</summary>
    private void SetViewAddresses(RegionView view)
    {
        _viewAddresses.Clear();
        foreach (var member in view.Members)
        {
            _viewAddresses.Add(member.Address);
        }
    }

    /// <summary>The transport has a free send slot: the next datagram, written in place. Order: the rest of a
    /// fan-out, then resends (a NAK or the timeout asked for them), then a new packet. Resends are multicast like the
    /// originals, so they spend credits too: a burst of losses answered all at once would overrun the receivers that
    /// just lost them (docs/qsm.md).</summary>
    int IDatagramFeed.Pull(Span<byte> slot, out NetAddress to)
    {
        to = default;
        while (!_stopped)
        {
            if (_fanoutSeq != 0)
            {
                ulong fanned = _fanoutSeq;
                if (NextFanout(out to))
                {
                    return CopyOut(fanned, slot);
                }
            }

            while (_repairs.Count > 0 && !IsBuffered(_repairs.Peek()))
            {
                _window[_repairs.Dequeue() % (ulong)_window.Length].RepairQueued = false; // acknowledged meanwhile
            }

            if (_repairs.Count > 0)
            {
                if (!_receiverWindow && !_rate.TryConsume())
                {
                    return 0; // CreditAvailable signals
                }

                ulong seq = _repairs.Dequeue();
                _window[seq % (ulong)_window.Length].RepairQueued = false;
                if (FirstDestination(seq, out to))
                {
                    return CopyOut(seq, slot);
                }

                continue; // no one else in the region
            }

            if (Source is not { } source)
            {
                return 0; // the source signals
            }

            if (!HasSpace)
            {
                _windowBlocked = true;
                return 0; // an ACK (window) signals
            }

            if (_receiverWindow)
            {
                if (_sentBytes >= _byteLimit || (LastSequence >= _seqLimit && _sentBytes >= _baseLimit))
                {
                    if (_congestionBinds)
                    {
                        _congestion!.OnLimited();
                    }

                    WindowBlocked++;
                    if (!_windowBlocked)
                    {
                        _blockedSince = _scheduler.Now;
                        _blockedBy = BlockCause();
                    }

                    _windowBlocked = true;
                    return 0; // the slowest receiver's window is full: its next flow status signals
                }
            }
            else if (_rate.Credits <= 0)
            {
                _rate.TryConsume(); // arms the refill; CreditAvailable signals
                return 0;
            }

            int packetBytes = RegionWire.DataHeaderSize + MaxPayload;
            int written = source.WritePayload(slot[RegionWire.DataHeaderSize..packetBytes]);
            if (written <= 0)
            {
                return 0;
            }

            if (!_receiverWindow)
            {
                _rate.TryConsume();
            }

            if (_windowBlocked && _blockedBy != WindowHold.None)
            {
                _heldFor[(int)_blockedBy] += _scheduler.Now - _blockedSince;
                _blockedBy = WindowHold.None;
            }

            _windowBlocked = false;
            ulong next = ++LastSequence;
            int length = RegionWire.WriteHeader(slot, new DataHeader(_node, _view.Region.Value, _view.ViewNumber, Math.Min(_viewStart, next), next, Settled,
                ReportRequested: RequestReport(RegionWire.DataHeaderSize + written), Cached: Math.Min(Cached, next - 1)), written);
            ref var outgoing = ref _window[next % (ulong)_window.Length];
            if (outgoing.Lent || outgoing.Datagram is null || outgoing.Datagram.Length < length)
            {
                // Once per window slot, and again while this node's member still holds the slot's last packet: the
                // buffer is reused for every later packet.
                outgoing.Datagram = _spare.TryPop(out var spare) && spare.Length >= packetBytes ? spare : new byte[packetBytes];
                outgoing.Lent = false;
            }

            if (_view.MulticastAddress is not null)
            {
                StreamingCopy.Copy(slot[..length], outgoing.Datagram); // kept for resends: not read again unless one is lost
            }
            else
            {
                slot[..length].CopyTo(outgoing.Datagram); // a unicast fan-out copies it out again for each other member, now
            }
            outgoing.Length = length;
            outgoing.View = _view.ViewNumber;
            outgoing.SentAt = _scheduler.Now;
            outgoing.FirstSentAt = outgoing.SentAt;
            outgoing.LastAtSend = next;
            outgoing.RepairQueued = false;
            outgoing.ResentOnReport = false;
            _sentBytes += (ulong)length;
            outgoing.EndBytes = _sentBytes;
            Sent?.Invoke(next, new LentPacket(outgoing.Datagram, RegionWire.DataHeaderSize, length - RegionWire.DataHeaderSize, this),
                slot[RegionWire.DataHeaderSize..length]);
            if (_alone)
            {
                SettleAlone();
            }

            if (FirstDestination(next, out to))
            {
                Transmitted?.Invoke(next);
                return length;
            }

            // A region of this node alone without multicast: numbered and delivered locally, nothing to send.
        }

        return 0;
    }

    /// <summary>The region's multicast address or, without multicast, the first member of a unicast fan-out (the rest
    /// follow on the next pulls). False when there is no one to send to.</summary>
    private bool FirstDestination(ulong seq, out NetAddress to)
    {
        if (_view.MulticastAddress is { } group)
        {
            to = group;
            return true;
        }

        _fanoutSeq = seq;
        _fanoutNext = 0;
        return NextFanout(out to);
    }

    /// <summary>The next member (not this node) the fanned-out packet still goes to; ends the fan-out after the last.</summary>
    private bool NextFanout(out NetAddress to)
    {
        var members = _view.Members;
        to = default;
        bool found = false;
        while (_fanoutNext < members.Length)
        {
            var member = members[_fanoutNext++];
            if (member.Node.Value != _node)
            {
                to = member.Address;
                found = true;
                break;
            }
        }

        while (_fanoutNext < members.Length && members[_fanoutNext].Node.Value == _node)
        {
            _fanoutNext++;
        }

        if (_fanoutNext >= members.Length)
        {
            _fanoutSeq = 0;
        }

        return found;
    }

    /// <summary>A resend or a fan-out copy: the kept datagram, as first sent, into the slot.</summary>
    private int CopyOut(ulong seq, Span<byte> slot)
    {
        ref var outgoing = ref _window[seq % (ulong)_window.Length];
        outgoing.Datagram.AsSpan(0, outgoing.Length).CopyTo(slot);
        BinaryPrimitives.WriteUInt64LittleEndian(slot[RegionWire.SettledOffset..], Math.Min(Settled, seq - 1)); // what is settled now
        BinaryPrimitives.WriteUInt64LittleEndian(slot[RegionWire.CachedOffset..], Math.Min(Cached, seq - 1)); // and cached
        outgoing.SentAt = _scheduler.Now;
        outgoing.LastAtSend = LastSequence;
        Transmitted?.Invoke(seq);
        return outgoing.Length;
    }

    private bool IsBuffered(ulong seq) => seq > Acknowledged && seq <= LastSequence;

    /// <summary>Queues a resend of <paramref name="seq"/> (once, however often it is asked for before it goes out).</summary>
    private bool QueueRepair(ulong seq)
    {
        if (!IsBuffered(seq))
        {
            return false;
        }

        ref var outgoing = ref _window[seq % (ulong)_window.Length];
        if (outgoing.RepairQueued)
        {
            return false;
        }

        outgoing.RepairQueued = true;
        _repairs.Enqueue(seq);
        return true;
    }

    /// <summary>An ACK or a NAK from the region (its control message, kind byte first).</summary>
    public void OnControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.IsEmpty)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (!_viewAddresses.Contains(from))
        {
            Drops.Increment(DropReason.NotAMember); // only the region's members acknowledge and NAK
            return;
        }

        switch ((RegionControl)message[0])
        {
            case RegionControl.Ack when RegionWire.TryReadAck(message, out var ack) && ack.Region == _view.Region.Value && ack.Sender == _node:
                OnAck(ack);
                break;
            case RegionControl.Nak when RegionWire.TryReadRanges(message, _naks, out uint region, out uint sender, out int partition, out int partitions)
                                        && region == _view.Region.Value && sender == _node:
                foreach (var range in _naks.Ranges)
                {
                    // Only packets still buffered can be resent: clamp the range to them (a peer's range is untrusted).
                    ulong p = (ulong)partitions;
                    ulong first = Math.Max(range.First, (Acknowledged + 1) / p);
                    ulong last = Math.Min(range.Last, LastSequence / p);
                    for (ulong k = first; k <= last; k++)
                    {
                        if (QueueRepair((k * p) + (ulong)partition))
                        {
                            RetransmittedOnNak++;
                        }
                    }
                }

                Signal();
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    /// <summary>
    /// The region's collective ACK. It releases packets only up to the first one numbered in a later region view than
    /// the round that computed it: a round of an older view vouches for its own members, not for a node that joined
    /// since (a sender may install the newer view, and number packets under it, before the ring does; releasing those
    /// on the old ring's word would let the region purge packets the newcomer never got).
    /// </summary>
    private void OnAck(in RegionAck ack)
    {
        if (ack.MaxSeen > LastSequence)
        {
            Drops.Increment(DropReason.Malformed); // reports packets never sent
            return;
        }

        AcknowledgedByToken++;
        ulong stable = ack.Stable;
        if (_options.FlowControl == RegionFlowControl.ReceiverWindow)
        {
            // Stable means held by the packet's caching partition, not taken by every member. While the latest flow
            // reports name a packet missing, keep it and what follows: released, it could no longer be resent, and the
            // member would wait a token round for a pull from the caching partition. (A member that has taken less but
            // lacks nothing, such as a paused reader, does not hold the sender's copies.)
            ulong firstGap = LowestNamedGap();
            if (firstGap <= stable)
            {
                stable = Math.Max(firstGap - 1, Acknowledged);
                HeldAgainstToken++;
            }
        }

        Release(stable, ack.View);
        _regionMaxSeen = Math.Max(_regionMaxSeen, ack.MaxSeen);
        _rate.OnReceiverRate(ack.Rate, ack.Loss);
        UpdateByteLimit();
        Signal(); // the window may have room again
    }

    /// <summary>The lowest position the flow reports give (at most <see cref="LastSequence"/>), and whether every
    /// report slot has been heard in this view and is complete (every member behind it reported).</summary>
    private ulong ReportedMinimum(out bool complete)
    {
        complete = true;
        ulong minimum = ulong.MaxValue;
        foreach (var r in _reports)
        {
            complete &= r.Heard && r.Complete;
            minimum = Math.Min(minimum, r.Position);
        }

        return Math.Min(minimum, LastSequence);
    }

    /// <summary>The lowest packet the latest flow reports name missing (<see cref="ulong.MaxValue"/> if none does).</summary>
    private ulong LowestNamedGap()
    {
        ulong lowest = ulong.MaxValue;
        foreach (var r in _reports)
        {
            if (r.Heard && r.FirstGap != 0 && r.FirstGap < lowest)
            {
                lowest = r.FirstGap;
            }
        }

        return lowest;
    }

    /// <summary>The lowest packet <paramref name="missing"/> names after <paramref name="position"/>, or 0.</summary>
    private static ulong FirstNamed(ulong position, in GapMap missing)
    {
        for (int w = 0; w < GapMap.Words; w++)
        {
            ulong word = missing.Word(w);
            if (word != 0)
            {
                return position + 1 + (ulong)(w * 64) + (ulong)BitOperations.TrailingZeroCount(word);
            }
        }

        return 0;
    }

    /// <summary>Releases the packets up to <paramref name="stable"/>, but only up to the first one numbered in a later
    /// view than <paramref name="view"/> (the view whose members vouched for them).</summary>
    private void Release(ulong stable, uint view)
    {
        stable = VouchedBy(stable, view);
        if (stable > Acknowledged)
        {
            ulong before = Acknowledged;
            for (ulong seq = before + 1; seq <= stable; seq++)
            {
                _window[seq % (ulong)_window.Length].RepairQueued = false;
            }

            _ackedBytes = _window[stable % (ulong)_window.Length].EndBytes;
            Acknowledged = stable;
            _lastProgress = _scheduler.Now;
            AcknowledgedAdvanced?.Invoke(before, stable);
            AdvanceCached(stable);
        }
    }

    /// <summary>
    /// The sender's cached point (docs/qsm.md, "Partition share"): every packet up to here is held by every member of its
    /// caching partition (packet i by partition i mod p), or has been taken by every member. Never below
    /// <see cref="Acknowledged"/>, which the sender itself releases on the same word (a token's ACK: stable on every
    /// caching replica; a complete flow report: taken by everyone); in receiver window mode it also moves on the partitions'
    /// reports of what their members hold of their own class (<see cref="FlowStatus.Cached"/>): the lowest over the
    /// partitions of the lowest over each partition's members, so a paused reader (which still receives and holds its
    /// class) does not hold it back, where it holds <see cref="Acknowledged"/> and <see cref="Settled"/> back. Every
    /// replica, not one: a packet released elsewhere is then lost only if the sender and its whole caching partition go
    /// (one holder was not enough in the soak: it left or crashed, then the sender did). Data packets carry it
    /// (<see cref="DataHeader.Cached"/>), and <see cref="CachedAdvanced"/> tells this node's own member: a member with the
    /// partition share releases a delivered packet of another partition's class only once this point has passed it, so
    /// a packet that reached only members outside its caching partition is still held by them if the sender crashes.
    /// </summary>
    public ulong Cached { get; private set; }

    /// <summary><see cref="Cached"/> moved (the new value).</summary>
    public event Action<ulong>? CachedAdvanced;

    private void AdvanceCached(ulong point)
    {
        point = Math.Min(point, LastSequence);
        if (point > Cached)
        {
            Cached = point;
            CachedAdvanced?.Invoke(point);
        }
    }

    /// <summary>The partitions' reported cached points (<see cref="FlowStatus.Cached"/>, clamped to what was sent): the
    /// lowest over the view's report slots; a slot not heard from in this view, or standing for this node alone (the
    /// sender is no holder others can count on: it may be the one that crashes), counts as 0.</summary>
    private ulong ReportedCached()
    {
        ulong lowest = ulong.MaxValue;
        foreach (var r in _reports)
        {
            lowest = Math.Min(lowest, r.Heard && r.Position != ulong.MaxValue ? r.Cached : 0);
        }

        return lowest == ulong.MaxValue ? 0 : lowest;
    }

    /// <summary>The highest packet up to <paramref name="upTo"/> (at most <see cref="LastSequence"/>) below the first one
    /// numbered in a later view than <paramref name="view"/>: what a round or a report of that view can vouch for.</summary>
    private ulong VouchedBy(ulong upTo, uint view)
    {
        upTo = Math.Min(upTo, LastSequence);
        for (ulong seq = Acknowledged + 1; seq <= upTo; seq++)
        {
            if (_window[seq % (ulong)_window.Length].View > view)
            {
                return seq - 1;
            }
        }

        return upTo;
    }

    /// <summary>
    /// The point up to which complete flow reports (every partition, every member of the view) say every member has
    /// taken this stream (receiver window mode; 0 before the first). Stronger than <see cref="Acknowledged"/>, which a
    /// token's ACK may move on the word that each packet is cached by its partition: no member will ask for a packet up
    /// to here again, so each may drop its copy at once. Data packets carry it (<see cref="DataHeader.Settled"/>), and
    /// <see cref="SettledAdvanced"/> tells this node's own member.
    /// </summary>
    public ulong Settled { get; private set; }

    /// <summary><see cref="Settled"/> moved (the new value).</summary>
    public event Action<ulong>? SettledAdvanced;

    /// <summary>Acknowledgements that came from the token (the rest came from complete flow status reports).</summary>
    public long AcknowledgedByToken { get; private set; }

    /// <summary>Pulls refused because the slowest receiver's window was full (receiver window mode).</summary>
    public long WindowBlocked { get; private set; }

    /// <summary>Virtual time this sender spent unable to number a packet because the byte limit was reached (receiver
    /// window mode), by what set the limit when it was first reached (<see cref="WindowHold"/>), up to now (a stall still
    /// open counts so far). Observability: the figures runner prints it to say where a lossy run's rate went.</summary>
    public TimeSpan HeldBy(WindowHold cause)
        => _heldFor[(int)cause] + (_windowBlocked && _blockedBy == cause && cause != WindowHold.None ? _scheduler.Now - _blockedSince : TimeSpan.Zero);

    private readonly TimeSpan[] _heldFor = new TimeSpan[Enum.GetValues<WindowHold>().Length];
    private TimeSpan _blockedSince;
    private WindowHold _blockedBy;

    /// <summary>What sets the byte limit now (<see cref="UpdateByteLimit"/>'s choice).</summary>
    private WindowHold BlockCause()
    {
        if (_congestionBinds)
        {
            return WindowHold.Congestion;
        }

        if (_limiting < 0)
        {
            return WindowHold.Local;
        }

        ref var report = ref _reports[_limiting];
        return !report.Heard || !report.Complete ? WindowHold.Incomplete
            : _limitingAbove != WindowHold.None ? _limitingAbove
            : report.Highest > report.Position ? WindowHold.Gap : WindowHold.Taken;
    }

    /// <summary>Times a partition's limit was counted from its members' highest packet rather than their position, and
    /// went further for it (<see cref="FlowStatus.RoomAboveHighest"/>, docs/qsm.md "The window above a gap").</summary>
    public long LimitsAboveHighest { get; private set; }

    /// <summary>Flow status reports taken from partition leaders.</summary>
    public long StatusReports { get; private set; }

    /// <summary>The bytes the sender may still send before the slowest receiver's window is full (receiver window
    /// mode; observability).</summary>
    public long WindowRemaining => _byteLimit > _sentBytes ? (long)Math.Min(_byteLimit - _sentBytes, long.MaxValue) : 0;

    /// <summary>
    /// A partition leader's flow status (receiver window mode): the minimum position and window over the members of its
    /// partition that reported, complete once all of them have. It moves the byte limit (min over partitions of the
    /// position's byte offset plus the window; a partition not heard from in this view counts at the acknowledged point
    /// with the default window, and so does one whose report is not yet complete: a member not heard from may be far
    /// behind the ones that were), and once every partition's latest report is complete, acknowledges up to the lowest
    /// of their positions: every member of the view has taken those packets. Reports from a node that is not the leader
    /// of the partition it names in this sender's view, or from another address, are dropped.
    /// </summary>
    public void OnStatus(NetAddress from, in FlowStatus status, bool local)
    {
        if (!_receiverWindow || !status.Aggregate || status.Sender != _node || status.Region != _view.Region.Value)
        {
            Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        int reporter = ReporterIndex(status.Partition);
        if (status.View != _view.ViewNumber || status.Partition >= _reports.Length || reporter >= _view.Count
            || _view.Members[reporter].Node.Value != status.Reporter || (!local && _view.Members[reporter].Address != from))
        {
            Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        if (status.Position > LastSequence || status.Highest > LastSequence)
        {
            Drops.Increment(DropReason.Malformed); // reports packets never sent (a stored highest past them would stop every later one)
            return;
        }

        StatusReports++;
        if (status.Overflowed)
        {
            _congestion?.OnOverflow();
        }

        if (!status.Missing.IsEmpty)
        {
            RepairGaps(status.Position, status.Missing, Math.Min(status.Highest, LastSequence));
        }

        ref var report = ref _reports[status.Partition];
        if (status.Highest > report.Highest)
        {
            SampleDelay(status.Highest); // only a report that the highest packet moved says how long one took to arrive
            report.Highest = status.Highest;
        }
        if (status.Highest < LastSequence && status.Highest == status.Position && report.Heard && report.Position == status.Position)
        {
            RepairTail(status.Highest); // a repeat: the partition took all it got and got nothing more since
        }

        report.Heard = true;
        report.Complete = status.Complete;
        report.Cached = Math.Max(report.Cached, Math.Min(status.Cached, LastSequence)); // never goes back in a view
        report.Position = status.Position;
        report.Window = status.WindowBytes;
        report.RoomAbove = status.RoomAboveHighest ? Math.Min(status.Highest, LastSequence) : 0; // paired with this report's window
        report.Slowest = status.Slowest;
        report.Leading = status.Leading;
        report.FirstGap = FirstNamed(status.Position, status.Missing);

        ulong minimum = ReportedMinimum(out bool complete);
        if (complete && minimum > Acknowledged)
        {
            Release(minimum, status.View);
        }

        if (complete && minimum > Settled)
        {
            // Release vouched Acknowledged at least this far (the same clamp, from a point no higher).
            ulong settled = Math.Min(VouchedBy(minimum, status.View), Acknowledged);
            if (settled > Settled)
            {
                Settled = settled;
                SettledAdvanced?.Invoke(settled);
            }
        }

        AdvanceCached(ReportedCached());
        UpdateByteLimit();
        WatchLaggard();
        Signal();
    }

    /// <summary>Packets (and so messages) members were told to skip because they held this sender back for
    /// <see cref="RegionOptions.LaggardTimeout"/> (<see cref="SlowReceiverPolicy.SkipAhead"/>): one per notice.</summary>
    public long LaggardsSkipped { get; private set; }

    /// <summary>Whether this sender wanted to number a packet and its window (bytes or packets) has not let it since.</summary>
    public bool IsHeld => _windowBlocked;

    /// <summary>Set by the group layer: whether another of this node's senders, into a region that carries one of this
    /// region's groups, is waiting for data while this one is held back. A member alone in its region has no other member
    /// to be compared with; this is how it is found slower than the rest (the group's messages wait for its region
    /// alone).</summary>
    public Func<bool>? PeersWaiting { get; set; }

    /// <summary>A member held this sender back for <see cref="RegionOptions.LaggardTimeout"/>: the region layer sends it
    /// a skip notice up to the given seq (<see cref="SlowReceiverPolicy.SkipAhead"/>).</summary>
    public event Action<ViewMember, ulong>? LaggardFound;

    /// <summary>
    /// With <see cref="SlowReceiverPolicy.SkipAhead"/>, after each flow report: who holds this sender back? The member at
    /// the lowest position of the partition whose report sets the byte limit, when the sender was held back by its window
    /// (it wanted to number a packet and has not been able to since), that partition's report is complete, and that member is
    /// at least half a window behind the furthest member of any partition (half its byte window, or half
    /// <see cref="RegionOptions.SenderWindow"/> in packets, whichever held the sender), or another of this node's senders
    /// into a region of the same groups waits for data meanwhile (<see cref="PeersWaiting"/>: the laggard is alone in its
    /// region, so the group waits for its region alone). The same member held back the
    /// sender for <see cref="RegionOptions.LaggardTimeout"/>: it is told to skip ahead to the last packet numbered. Equally
    /// slow members (a sender faster than all of its receivers, or a link that is the bottleneck) are never far apart, so
    /// none of them is a laggard: the rule singles out one member slower than the rest.
    /// </summary>
    private void WatchLaggard()
    {
        if (!_skipAhead)
        {
            return;
        }

        var now = _scheduler.Now;
        if (_limiting < 0 || _limiting >= _reports.Length || !_windowBlocked || _stopped)
        {
            _heldBy = 0;
            return;
        }

        ref var held = ref _reports[_limiting];
        ulong leading = 0;
        foreach (var r in _reports)
        {
            if (r.Heard && r.Position != ulong.MaxValue)
            {
                leading = Math.Max(leading, r.Leading);
            }
        }

        leading = Math.Min(leading, LastSequence);
        bool behindOthers = leading > held.Position
            && (leading - held.Position >= (ulong)_options.SenderWindow / 2 || BytesUpTo(leading) - BytesUpTo(held.Position) >= held.Window / 2);
        if (!held.Heard || !held.Complete || held.Slowest == _node || !(behindOthers || PeersWaiting?.Invoke() == true)
            || _view.IndexOf(new NodeId(held.Slowest)) < 0) // last: linear in the view
        {
            _heldBy = 0;
            return;
        }

        if (_heldBy != held.Slowest)
        {
            // Look again when the time is up even if no report comes (a stalled member's partition stops repeating its
            // unchanged report after a while), from the latest reports.
            _heldBy = held.Slowest;
            _heldSince = now;
            _scheduler.Cancel(_laggardAlarm);
            _scheduler.ScheduleAfter(_laggardAlarm, _options.LaggardTimeout);
            return;
        }

        if (now - _heldSince >= _options.LaggardTimeout)
        {
            var member = _view.Members[_view.IndexOf(new NodeId(_heldBy))];
            LaggardsSkipped++;
            _heldBy = 0;
            LaggardFound?.Invoke(member, LastSequence);
        }
    }

    /// <summary>Queues resends of the packets a status names as missing (bit i: position + 1 + i), each at most once per
    /// <see cref="RepairHoldoff"/> (a report may have left before the last resend arrived), unless the report shows the
    /// last resend lost: its reporters' lowest highest packet, <paramref name="highest"/>, was first sent after it.</summary>
    private void RepairGaps(ulong position, in GapMap missing, ulong highest)
    {
        var now = _scheduler.Now;
        for (int w = 0; w < GapMap.Words; w++)
        {
            for (ulong word = missing.Word(w); word != 0; word &= word - 1)
            {
                ulong seq = position + 1 + (ulong)(w * 64) + (ulong)BitOperations.TrailingZeroCount(word);
                RepairAsked?.Invoke(seq);
                if (RepairDue(seq, now, _options.GapReportInterval, highest) && QueueRepair(seq))
                {
                    RetransmittedOnStatus++;
                }
            }
        }
    }

    /// <summary>A partition's repeated report says a member has taken everything it got up to <paramref name="highest"/>
    /// and nothing after it, though the sender's last packet left at least a <see cref="RepairHoldoff"/> (with the status interval's floor)
    /// ago: the tail was lost, and nothing later will show the member a gap, so it (at most 64 packets) is resent, each
    /// at most once per interval. A member still working through a backlog would have moved its position between the
    /// two reports.</summary>
    private void RepairTail(ulong highest)
    {
        var now = _scheduler.Now;
        if (now - _window[LastSequence % (ulong)_window.Length].SentAt < RepairHoldoff(_options.StatusInterval))
        {
            return; // still in flight, or the sender is still sending (a gap will show)
        }

        ulong last = Math.Min(LastSequence, highest + 64);
        for (ulong seq = Math.Max(highest, Acknowledged) + 1; seq <= last; seq++)
        {
            if (RepairDue(seq, now, _options.StatusInterval) && QueueRepair(seq))
            {
                RetransmittedOnStatus++;
                TailResends++;
            }
        }
    }

    /// <summary>Whether a report may have a buffered packet resent now: at once the first time (a later packet arrived,
    /// so this one was lost), then at most once per <see cref="RepairHoldoff"/> (a report may have left
    /// before the last resend arrived), or at once again when the report's <paramref name="highest"/> packet was first
    /// sent after the last resend left (<see cref="LostResends"/>).</summary>
    private bool RepairDue(ulong seq, TimeSpan now, TimeSpan floor, ulong highest = 0)
    {
        if (!IsBuffered(seq))
        {
            if (seq <= Acknowledged && seq > 0)
            {
                RepairsTooLate++; // released already: the member pulls it from its caching partition (a gap pull, or the token's)
            }

            return false;
        }

        ref var outgoing = ref _window[seq % (ulong)_window.Length];
        if (outgoing.ResentOnReport && now - outgoing.SentAt < RepairHoldoff(floor))
        {
            if (outgoing.RepairQueued)
            {
                return false; // a resend is on its way out already
            }

            if (highest > outgoing.LastAtSend)
            {
                LostResends++;
                return true;
            }

            RepairsDeferred++;
            DeferredHoldoffTotal += RepairHoldoff(floor);
            return false;
        }

        outgoing.ResentOnReport = true;
        return true;
    }

    /// <summary>The smoothed time from a packet's first send to a report that it arrived (queueing included): reports
    /// take at least this long to reflect a resend, so a packet is not resent again, nor a tail presumed lost, sooner
    /// than twice it (and never sooner than <see cref="RegionOptions.GapReportInterval"/>). Without it, a link whose queue
    /// held more than a status interval of traffic had every queued packet "lost" and resent again every interval,
    /// which filled the queue further (a collapse seen in simulation at 100 Mbit/s with four senders).</summary>
    public TimeSpan ReportDelay { get; private set; }

    /// <summary>Twice <see cref="ReportDelay"/>, at least <paramref name="floor"/>: <see cref="RegionOptions.GapReportInterval"/>
    /// for a gap a report names (a later packet arrived, so this one was lost: a lost resend is asked for again within a
    /// gap interval), <see cref="RegionOptions.StatusInterval"/> for a tail presumed lost (nothing later shows it: with a
    /// 1 ms floor a slow receiver's socket backlog looked lost and its resends overran it).</summary>
    private TimeSpan RepairHoldoff(TimeSpan floor) => ReportDelay * 2 > floor ? ReportDelay * 2 : floor;

    private void SampleDelay(ulong highest)
    {
        if (highest <= Acknowledged || highest > LastSequence)
        {
            return;
        }

        var sample = _scheduler.Now - _window[highest % (ulong)_window.Length].FirstSentAt;
        ReportDelay = ReportDelay == TimeSpan.Zero ? sample : ReportDelay + ((sample - ReportDelay) / 8);
    }

    /// <summary>A flow status named this buffered packet missing (each time one does, whether or not it is resent):
    /// the simulator's timeline takes the first as the time the sender learnt of the loss.</summary>
    public event Action<ulong>? RepairAsked;

    /// <summary>Reports that named a packet missing while its last resend was within <see cref="RepairHoldoff"/> (and no
    /// resend of it was queued): the resend they asked for was deferred.</summary>
    public long RepairsDeferred { get; private set; }

    /// <summary>The sum of <see cref="RepairHoldoff"/> over <see cref="RepairsDeferred"/>: its mean is the hold-off the
    /// deferred requests met.</summary>
    public TimeSpan DeferredHoldoffTotal { get; private set; }

    /// <summary>
    /// Of <see cref="RetransmittedOnStatus"/>, resends sent again within <see cref="RepairHoldoff"/> because the report
    /// that named the packet missing had arrived after a packet first sent after the last resend: every member behind the
    /// report had received that packet, so, a sender's datagrams keeping their order on the way (as on a LAN, loopback
    /// and the simulator's links), the resend before it was lost, not still on its way. The hold-off (twice the report
    /// delay, 35 ms on this machine at 5 % loss) had held such a packet's members, and so the sender, that long. A
    /// reordering network resends such a packet once more than needed.
    /// </summary>
    public long LostResends { get; private set; }

    /// <summary>Token ACKs this sender took only up to the packet before the lowest one a flow report names missing
    /// (<see cref="RegionFlowControl.ReceiverWindow"/>): a member still lacked a packet the ACK called stable.</summary>
    public long HeldAgainstToken { get; private set; }

    /// <summary>Times a report named a packet missing after this sender had released it (a token's ACK: stable on their
    /// caching partition): not resent; the member pulls them from that partition at the next token round.</summary>
    public long RepairsTooLate { get; private set; }

    /// <summary>Of <see cref="RetransmittedOnStatus"/>, packets resent as a lost tail (<see cref="RepairTail"/>).</summary>
    public long TailResends { get; private set; }

    /// <summary>Packets resent because a flow status named them missing (receiver window mode).</summary>
    public long RetransmittedOnStatus { get; private set; }

    /// <summary>In a region of more than <see cref="RegionOptions.ReportFanIn"/> partitions, reports come one per block of
    /// that many partitions, from the leader of the block's first partition; else one per partition from its leader.</summary>
    private int ReportSlots(int partitions) => partitions > _options.ReportFanIn ? (partitions + _options.ReportFanIn - 1) / _options.ReportFanIn : partitions;

    /// <summary>The view index of the node that sends report slot <paramref name="slot"/>.</summary>
    private int ReporterIndex(int slot)
        => _view.PartitionCount(_options.ReplicationFactor) > _options.ReportFanIn ? slot * _options.ReportFanIn : slot;

    /// <summary>A new view: its partitions have not reported yet.</summary>
    private void ResetReports()
    {
        _limiting = -1;
        _heldBy = 0;
        int partitions = _view.PartitionCount(_options.ReplicationFactor);
        int slots = ReportSlots(partitions);
        int perSlot = partitions > _options.ReportFanIn ? _options.ReportFanIn : 1;
        if (_reports.Length != slots)
        {
            _reports = new PartitionReport[slots];
        }
        else
        {
            Array.Clear(_reports);
        }

        // A partition (or block) of this node alone has no one to report: it stands for nothing (the local member is read in place).
        for (int j = 0; j < slots; j++)
        {
            bool onlyThisNode = true;
            for (int p = j * perSlot; p < Math.Min(partitions, (j + 1) * perSlot); p++)
            {
                for (int i = p; i < _view.Count; i += partitions)
                {
                    onlyThisNode &= _view.Members[i].Node.Value == _node;
                }
            }

            if (onlyThisNode)
            {
                _reports[j] = new PartitionReport { Heard = true, Complete = true, Position = ulong.MaxValue, Window = uint.MaxValue };
            }
        }

        _alone = _receiverWindow && Array.TrueForAll(_reports, r => r.Position == ulong.MaxValue);
        if (_alone)
        {
            SettleAlone(); // moves the byte limit too
        }
        else
        {
            UpdateByteLimit();
        }
    }

    /// <summary>The byte limit: over the view's partitions, the least byte position the slowest receiver has taken plus
    /// its window.</summary>
    private void UpdateByteLimit()
    {
        ulong limit = ulong.MaxValue;
        ulong floor = ulong.MaxValue; // the slowest partition's position, in bytes of the stream
        ulong arrived = ulong.MaxValue; // over the partitions, the least of their highest packets offering room above (else positions), in bytes
        ulong baseLimit = ulong.MaxValue; // the limit without any window counted from a highest packet
        ulong seqLimit = ulong.MaxValue;
        _limiting = -1;
        _limitingAbove = WindowHold.None;
        for (int j = 0; j < _reports.Length; j++)
        {
            ref var report = ref _reports[j];
            if (report.Position == ulong.MaxValue)
            {
                continue; // a partition of this node alone
            }

            ulong position = report.Heard && report.Complete ? Math.Max(report.Position, Acknowledged) : Acknowledged;
            ulong window = report.Heard ? report.Window : (ulong)_options.ReceiveWindowBytes;
            ulong bytes = BytesUpTo(position);
            floor = Math.Min(floor, bytes);
            ulong bound = bytes + window;
            baseLimit = Math.Min(baseLimit, bound);
            ulong arrivedHere = bytes; // where the congestion window counts from for this partition
            var above = WindowHold.None;
            if (report.Heard && report.Complete && report.RoomAbove > position)
            {
                // Every member has room for its window above its highest packet: the window counts from there, up to the
                // packets above the position that the members' reports can name as missing (GapReportPackets).
                ulong aboveHighest = BytesUpTo(report.RoomAbove) + window;
                ulong horizon = position + (ulong)_options.GapReportPackets;
                bool atHorizon = horizon <= LastSequence && BytesUpTo(horizon) < aboveHighest;
                if (atHorizon)
                {
                    aboveHighest = BytesUpTo(horizon);
                }
                else if (horizon > LastSequence)
                {
                    seqLimit = Math.Min(seqLimit, horizon); // not sent yet: counted in packets as they go
                }

                if (aboveHighest > bound)
                {
                    bound = aboveHighest;
                    above = atHorizon ? WindowHold.Horizon : WindowHold.AboveHighest;
                    LimitsAboveHighest++;
                }

                arrivedHere = BytesUpTo(report.RoomAbove);
            }

            arrived = Math.Min(arrived, arrivedHere);

            if (bound < limit)
            {
                limit = bound;
                _limiting = j;
                _limitingAbove = above;
            }
        }

        if (LocalPosition?.Invoke() is { } local)
        {
            ulong bound = BytesUpTo(Math.Max(local, Acknowledged)) + (ulong)_options.ReceiveWindowBytes;
            if (bound < limit)
            {
                limit = bound;
                _limiting = -1; // this node's own subscriber: not a laggard to skip
            }
        }

        _congestionBinds = false;
        if (_congestion is not null && arrived != ulong.MaxValue)
        {
            // Under a window counted from the members' highest packets, so is the congestion window: what is in flight
            // is what left and has not arrived (TCP's pipe with SACK), a gap's repair is owed, not queued.
            _congestion.OnProgress(arrived, _sentBytes);
            ulong bound = arrived + _congestion.Window;
            if (bound < limit)
            {
                limit = bound;
                _congestionBinds = true;
            }
        }

        _byteLimit = limit;
        _baseLimit = Math.Min(baseLimit, limit);
        _seqLimit = seqLimit;
        ulong from = _congestionBinds ? arrived : floor;
        _limitSpan = from == ulong.MaxValue || limit == ulong.MaxValue || limit <= from ? 0 : limit - from;
    }

    /// <summary>Whether the packet about to go (<paramref name="length"/> bytes) asks members to report when they reach it:
    /// while the congestion window sets the limit, once per limit, when less than half of it would be left after this
    /// packet. Members report every eighth of their own window; a smaller congestion window would otherwise wait for the
    /// status tick to open (a lone message after a burst took more than 5 ms in the whole-stack simulation). Asked for
    /// under the receivers' windows too, the extra reports cost the sender 10 % in the paper's cost model.</summary>
    private bool RequestReport(int length)
    {
        if (!_congestionBinds || _limitSpan == 0 || _requestedAt == _byteLimit)
        {
            return false; // only under a congestion window: receivers' own windows are what their reports are sized to
        }

        ulong after = _sentBytes + (ulong)length;
        ulong left = _byteLimit > after ? _byteLimit - after : 0;
        if (left >= _limitSpan / 2)
        {
            return false;
        }

        _requestedAt = _byteLimit;
        ReportsRequested++;
        return true;
    }

    /// <summary>Packets that asked members to report on reaching them (<see cref="RequestReport"/>).</summary>
    public long ReportsRequested { get; private set; }

    /// <summary>The congestion window in bytes (0 without <see cref="RegionOptions.CongestionControl"/>).</summary>
    public long CongestionWindowBytes => _congestion is null ? 0 : (long)_congestion.Window;

    /// <summary>Round trips that ended with an overflow signal and cut the congestion window.</summary>
    public long CongestionDecreases => _congestion?.Decreases ?? 0;

    /// <summary>The stream's byte position after packet <paramref name="seq"/> (at least the acknowledged point's).</summary>
    private ulong BytesUpTo(ulong seq) => seq <= Acknowledged ? _ackedBytes : seq >= LastSequence ? _sentBytes : _window[seq % (ulong)_window.Length].EndBytes;

    /// <summary>Where this node's own member has taken this sender's stream (a sender that is a member of its region:
    /// set by the region layer), or null. Its own member needs no report: a local subscriber that pauses holds the sender
    /// through this.</summary>
    public Func<ulong?>? LocalPosition { get; set; }

    /// <summary>The local member took more of this sender's stream (its subscriber resumed): the limit may have moved.</summary>
    public void OnLocalProgress()
    {
        if (_receiverWindow)
        {
            if (_alone)
            {
                SettleAlone(); // moves the byte limit too
            }
            else
            {
                UpdateByteLimit();
            }

            Signal();
        }
    }

    /// <summary>
    /// A view of this node alone (receiver window mode): no member reports, so the local member's position (every
    /// packet it has taken; all that were sent when it is not a member) acknowledges and settles at once. Before, such a
    /// sender, a publisher alone in its region because no other node has its exact set of groups, waited for its own
    /// token round (1 s) to acknowledge each window: 2 MiB a second, whatever the other regions took.
    /// </summary>
    private void SettleAlone()
    {
        ulong position = LocalPosition?.Invoke() ?? LastSequence;
        if (position > Acknowledged)
        {
            Release(position, _view.ViewNumber);
        }

        ulong settled = Math.Min(position, Acknowledged);
        if (settled > Settled)
        {
            Settled = settled;
            SettledAdvanced?.Invoke(settled);
        }

        UpdateByteLimit(); // nothing else moves it here: no reports come, and the token's ACKs find nothing left to release
    }

    /// <summary>
    /// The sender's timeout, which should rarely act (§2.3.3): packets the region has not even seen (above the
    /// highest seq its last ACK reported: lost by every member) are resent once overdue; packets the region has seen are
    /// left to its own recovery unless its acknowledgements stop advancing for a whole timeout.
    /// </summary>
    private void RetransmitOverdue()
    {
        var overdue = _options.TokenInterval * _options.RetransmitIntervals;
        var now = _scheduler.Now;
        bool stalled = now - _lastProgress >= overdue;
        int budget = 256;
        for (ulong seq = Acknowledged + 1; seq <= LastSequence && budget > 0; seq++)
        {
            if (now - _window[seq % (ulong)_window.Length].SentAt >= overdue && (seq > _regionMaxSeen || stalled) && QueueRepair(seq))
            {
                RetransmittedOnTimeout++;
                budget--;
            }
        }

        Signal();
        _scheduler.ScheduleAfter(_retransmitAlarm, _options.TokenInterval);
    }

    void IPacketLender.Lend(ulong seq, byte[] buffer)
    {
        ref var outgoing = ref _window[seq % (ulong)_window.Length];
        if (ReferenceEquals(outgoing.Datagram, buffer))
        {
            outgoing.Lent = true;
        }
    }

    void IPacketLender.GiveBack(ulong seq, byte[] buffer)
    {
        ref var outgoing = ref _window[seq % (ulong)_window.Length];
        if (ReferenceEquals(outgoing.Datagram, buffer))
        {
            outgoing.Lent = false; // still the window's: it is reused when the slot is
        }
        else if (_spare.Count < _window.Length)
        {
            _spare.Push(buffer); // the slot moved on to a newer packet in another buffer: this one is free
        }
    }

    /// <summary>A numbered packet kept for retransmission: the whole datagram as first sent (its header names the view it
    /// was numbered in and that view's first seq). The buffer belongs to the window slot and is reused, unless it is
    /// <see cref="Lent"/>.</summary>
    private struct Outgoing
    {
        public byte[]? Datagram;
        public bool Lent; // this node's member holds Datagram (IPacketLender): it is not written again until given back
        public int Length;
        public uint View;
        public TimeSpan SentAt;
        public bool RepairQueued;
        public ulong EndBytes; // the stream's byte position after this packet
        public bool ResentOnReport; // a flow report had it resent already (later ones wait a hold-off)
        public TimeSpan FirstSentAt;
        public ulong LastAtSend; // LastSequence when this packet's latest copy left: a report whose highest is above it came after
    }

    /// <summary>A partition leader's latest flow status for this sender (receiver window mode).</summary>
    private struct PartitionReport
    {
        public bool Heard;
        public bool Complete;
        public ulong Position;
        public uint Window;
        public ulong Highest;
        public uint Slowest;  // the member at Position
        public ulong Leading; // the furthest position of the partition's members
        public ulong Cached;  // the partition's cached point (FlowStatus.Cached)
        public ulong RoomAbove; // the report's highest packet, when every member has room for its window above it (else 0)
        public ulong FirstGap;  // the lowest packet the report names missing (0: none; packets are numbered from 1)
    }
}

/// <summary>What held a sender at its byte limit (<see cref="RegionSender.HeldBy"/>).</summary>
public enum WindowHold
{
    /// <summary>Not held.</summary>
    None,

    /// <summary>The congestion window (<see cref="RegionOptions.CongestionControl"/>).</summary>
    Congestion,

    /// <summary>This node's own member's position plus its window.</summary>
    Local,

    /// <summary>A partition (or block) whose latest report is missing or incomplete: it counts at the acknowledged point.</summary>
    Incomplete,

    /// <summary>A partition whose slowest member has received past its position: it waits for a repair of a gap.</summary>
    Gap,

    /// <summary>A partition whose slowest member has taken all it received: its window is full of unprocessed data, or
    /// the report saying otherwise has not arrived.</summary>
    Taken,

    /// <summary>A partition whose members have a gap and room above their highest packet: the window counted from that
    /// packet is in flight (docs/qsm.md, "The window above a gap").</summary>
    AboveHighest,

    /// <summary>As <see cref="AboveHighest"/>, but at the most the members' reports can name above their position
    /// (<see cref="RegionOptions.GapReportPackets"/>): a gap that old holds the sender.</summary>
    Horizon,
}
