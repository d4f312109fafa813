using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// A sender's side of a region (QSM §2.2–§2.4): numbers its packets for the region, multicasts them at the rate the
/// region's feedback allows, and keeps each until the region's collective ACK says it is stable on its caching replicas.
/// It retransmits what a partition's collective NAK names, and (rarely, the paper notes) what no ACK has covered after a
/// timeout. I/O-free; core thread only.
/// </summary>
public sealed class RegionSender
{
    private readonly uint _node;
    private readonly IDatagramTransport _data;
    private readonly IAlarmScheduler _scheduler;
    private readonly RegionOptions _options;
    private readonly RateController _rate;
    private readonly Dictionary<ulong, Outgoing> _buffer = new();
    private readonly Queue<ulong> _waiting = new();
    private readonly Queue<ulong> _repairs = new();
    private readonly HashSet<ulong> _repairQueued = new();
    private readonly byte[] _datagram;
    private readonly byte[] _open;
    private readonly NakSet _naks;
    private readonly Alarm _retransmitAlarm;
    private readonly Alarm _flushAlarm;
    private RegionView _view;
    private TimeSpan _lastProgress;
    private ulong _regionMaxSeen;
    private ulong _viewStart = 1;
    private int _openLength;
    private bool _refused;      // someone was told "no room"; SpaceAvailable is owed once there is
    private bool _notifying;

    public RegionSender(uint node, RegionView view, IDatagramTransport data, IAlarmScheduler scheduler,
        RegionOptions? options = null, RateControlOptions? rateOptions = null)
    {
        _node = node;
        _view = view ?? throw new ArgumentNullException(nameof(view));
        _data = data ?? throw new ArgumentNullException(nameof(data));
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _options = options ?? new RegionOptions();
        _options.Validate();
        _rate = new RateController(scheduler, rateOptions);
        _rate.CreditAvailable += SendWaiting;
        _datagram = new byte[data.MaxDatagramSize];
        _open = new byte[MaxPayload];
        _naks = new NakSet(_options.MaxNakRanges);
        _retransmitAlarm = new Alarm(_ => RetransmitOverdue());
        _flushAlarm = new Alarm(_ => SendWaiting());
        _scheduler.ScheduleAfter(_retransmitAlarm, _options.TokenInterval);
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

    /// <summary>The sending node's id.</summary>
    public uint Node => _node;

    /// <summary>Stops the sender's timers (the stack is stopping).</summary>
    public void Stop()
    {
        _scheduler.Cancel(_retransmitAlarm);
        _scheduler.Cancel(_flushAlarm);
    }

    /// <summary>The region this sender multicasts into.</summary>
    public uint Region => _view.Region.Value;

    public ulong LastSequence { get; private set; }

    /// <summary>The region's collective ACK: every packet up to here is stable on its caching replicas.</summary>
    public ulong Acknowledged { get; private set; }

    public int Unacknowledged => _buffer.Count;

    public bool HasSpace => _buffer.Count < _options.SenderWindow;

    public long Retransmissions => RetransmittedOnNak + RetransmittedOnTimeout;

    /// <summary>Packets resent because a partition's collective NAK named them.</summary>
    public long RetransmittedOnNak { get; private set; }

    /// <summary>Packets resent because no ACK covered them in time (the paper: this "essentially never kicks in").</summary>
    public long RetransmittedOnTimeout { get; private set; }

    public RateController RateController => _rate;

    public DropCounters Drops { get; } = new();

    /// <summary>Raised, after a refusal (<see cref="TrySend"/>, <see cref="TryAppend"/> or <see cref="CanAppend"/> said
    /// no), once the sender would take more: the window has room and no sealed packet is waiting for credit.</summary>
    public event Action? SpaceAvailable;

    /// <summary>Raised for every transmission of a packet, first or repeated (observability: the region simulation's timeline).</summary>
    public event Action<ulong>? Transmitted;

    /// <summary>Raised when the region's ACK moves <see cref="Acknowledged"/> forward: (before, after).</summary>
    public event Action<ulong, ulong>? AcknowledgedAdvanced;

    /// <summary>Raised for each packet sent for the first time (a sender that is a member records it locally).</summary>
    public event Action<ulong, ReadOnlyMemory<byte>>? Sent;

    /// <summary>Installs a new region view; packets numbered from now on record it, and where it starts.</summary>
    public void InstallView(RegionView view)
    {
        ArgumentNullException.ThrowIfNull(view);
        if (view.ViewNumber != _view.ViewNumber)
        {
            SealOpen(); // what was appended under the old view is numbered under it
            _viewStart = LastSequence + 1;
        }

        _view = view;
    }

    /// <summary>Numbers and sends one packet. False when the window is full (wait for <see cref="SpaceAvailable"/>).</summary>
    public bool TrySend(ReadOnlySpan<byte> payload)
    {
        CheckSize(payload.Length, nameof(payload));
        if (_buffer.Count + (_openLength > 0 ? 2 : 1) > _options.SenderWindow)
        {
            _refused = true;
            return false;
        }

        SealOpen(); // keeps the order of what was appended before
        Enqueue(payload.ToArray());
        TransmitWaiting(flushOpen: true); // no SpaceAvailable from inside the caller's own send
        return true;
    }

    /// <summary>Whether <see cref="TryAppend"/> would accept a record of <paramref name="length"/> bytes now. False
    /// arms <see cref="SpaceAvailable"/>.</summary>
    public bool CanAppend(int length)
    {
        if (_openLength + length <= MaxPayload || CanSeal)
        {
            return true;
        }

        _refused = true;
        return false;
    }

    /// <summary>
    /// The open packet may be sealed (numbered) for a new one: the window has room and no sealed packet waits for credit.
    /// This is what makes the group layer's feeds pull-driven (DESIGN: "the layer below pulls when rate control and
    /// buffers allow"): records are taken only while they can go out now or fill the packet that goes next, so at most
    /// two packets' worth is held beyond what rate control has released, whatever the window.
    /// </summary>
    private bool CanSeal => _waiting.Count == 0 && HasSpace;

    /// <summary>
    /// Packing (§2.2: "small messages bound for the same region share one datagram"): appends a self-delimiting record to
    /// the open packet. A full packet is sealed and sent as rate control allows; a partly filled one goes out from an
    /// alarm due now, which the core runs after the work already queued (the rest of a batch of downcalls, the rest of a
    /// feed), so records appended together share a packet and a lone record still leaves at once. False when the open
    /// packet is full and cannot be sealed yet (see <see cref="CanSeal"/>; wait for <see cref="SpaceAvailable"/>).
    /// </summary>
    public bool TryAppend(ReadOnlySpan<byte> record)
    {
        CheckSize(record.Length, nameof(record));
        if (_openLength + record.Length > MaxPayload)
        {
            if (!CanSeal)
            {
                _refused = true;
                return false;
            }

            SealOpen();
        }

        record.CopyTo(_open.AsSpan(_openLength));
        _openLength += record.Length;
        TransmitWaiting(flushOpen: false); // sealed packets only; no upcall into the caller's loop
        if (_openLength > 0 && !_flushAlarm.IsScheduled)
        {
            _scheduler.Schedule(_flushAlarm, _scheduler.Now);
        }

        return true;
    }

    private void CheckSize(int length, string paramName)
    {
        if (length > MaxPayload)
        {
            throw new ArgumentException($"A region packet carries at most {MaxPayload} bytes; got {length}.", paramName);
        }
    }

    private void SealOpen()
    {
        if (_openLength > 0)
        {
            Enqueue(_open.AsSpan(0, _openLength).ToArray());
            _openLength = 0;
        }
    }

    private void Enqueue(byte[] payload)
    {
        ulong seq = ++LastSequence;
        _buffer[seq] = new Outgoing(payload, _view.ViewNumber, Math.Min(_viewStart, seq)) { SentAt = TimeSpan.MinValue };
        Sent?.Invoke(seq, payload);
        _waiting.Enqueue(seq);
    }

    /// <summary>Sends what rate control allows, the open packet included, then tells whoever was refused that there is
    /// room (not re-entrantly).</summary>
    private void SendWaiting()
    {
        TransmitWaiting(flushOpen: true);
        NotifyIfRoom();
    }

    /// <summary>Sends what rate control allows: resends a NAK or the timeout asked for first, then new packets, then the
    /// open packet if <paramref name="flushOpen"/>. Resends are multicast like the originals, so they spend credits too:
    /// a burst of losses answered all at once would overrun the receivers that just lost them (docs/qsm.md).</summary>
    private void TransmitWaiting(bool flushOpen)
    {
        while (true)
        {
            if (_repairs.Count > 0 && !_buffer.ContainsKey(_repairs.Peek()))
            {
                _repairQueued.Remove(_repairs.Dequeue()); // acknowledged meanwhile
                continue;
            }

            if (_waiting.Count > 0 && !_buffer.ContainsKey(_waiting.Peek()))
            {
                _waiting.Dequeue(); // already acknowledged (a repair got there first)
                continue;
            }

            if (_repairs.Count == 0 && _waiting.Count == 0 && (!flushOpen || _openLength == 0 || !HasSpace))
            {
                return;
            }

            if (!_rate.TryConsume())
            {
                return; // CreditAvailable resumes
            }

            if (_repairs.Count > 0)
            {
                ulong seq = _repairs.Dequeue();
                _repairQueued.Remove(seq);
                Transmit(seq);
                continue;
            }

            if (_waiting.Count == 0)
            {
                SealOpen();
            }

            Transmit(_waiting.Dequeue());
        }
    }

    /// <summary>Raises <see cref="SpaceAvailable"/> if someone was refused and there is room now; not re-entered (a
    /// refusal during the upcall is answered by the loop once that call returns).</summary>
    private void NotifyIfRoom()
    {
        if (_notifying)
        {
            return;
        }

        _notifying = true;
        try
        {
            while (_refused && CanSeal)
            {
                _refused = false;
                SpaceAvailable?.Invoke();
            }
        }
        finally
        {
            _notifying = false;
        }
    }

    /// <summary>Queues a resend of <paramref name="seq"/> (once, however often it is asked for before it goes out).</summary>
    private bool QueueRepair(ulong seq)
    {
        if (!_buffer.ContainsKey(seq) || !_repairQueued.Add(seq))
        {
            return false;
        }

        _repairs.Enqueue(seq);
        return true;
    }

    private void Transmit(ulong seq)
    {
        var outgoing = _buffer[seq];
        int length = RegionWire.WriteData(_datagram, new DataHeader(_node, _view.Region.Value, outgoing.View, outgoing.ViewStart, seq), outgoing.Payload);
        if (_view.MulticastAddress is { } group)
        {
            _data.TrySend(group, _datagram.AsSpan(0, length));
        }
        else
        {
            foreach (var member in _view.Members)
            {
                if (member.Node.Value != _node)
                {
                    _data.TrySend(member.Address, _datagram.AsSpan(0, length)); // no multicast: unicast fan-out
                }
            }
        }

        outgoing.SentAt = _scheduler.Now;
        Transmitted?.Invoke(seq);
    }

    /// <summary>An ACK or a NAK from the region (reliable unicast payload).</summary>
    public void OnControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.IsEmpty)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        switch ((RegionControl)message[0])
        {
            case RegionControl.Ack when RegionWire.TryReadAck(message, out uint region, out uint sender, out ulong stable, out ulong maxSeen, out double rate, out double loss)
                                        && region == _view.Region.Value && sender == _node:
                OnAck(stable, maxSeen, rate, loss);
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

                SendWaiting();
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    private void OnAck(ulong stable, ulong maxSeen, double rate, double loss)
    {
        if (maxSeen > LastSequence)
        {
            Drops.Increment(DropReason.Malformed); // reports packets never sent
            return;
        }

        for (ulong seq = Acknowledged + 1; seq <= stable; seq++)
        {
            _buffer.Remove(seq);
        }

        if (stable > Acknowledged)
        {
            ulong before = Acknowledged;
            Acknowledged = stable;
            _lastProgress = _scheduler.Now;
            AcknowledgedAdvanced?.Invoke(before, stable);
        }

        _regionMaxSeen = Math.Max(_regionMaxSeen, maxSeen);
        _rate.OnReceiverRate(rate, loss);
        SendWaiting(); // an open packet may have been waiting for window space; whoever was refused resumes
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
            if (_buffer.TryGetValue(seq, out var outgoing) && outgoing.SentAt != TimeSpan.MinValue && now - outgoing.SentAt >= overdue
                && (seq > _regionMaxSeen || stalled) && QueueRepair(seq))
            {
                RetransmittedOnTimeout++;
                budget--;
            }
        }

        SendWaiting();
        _scheduler.ScheduleAfter(_retransmitAlarm, _options.TokenInterval);
    }

    /// <summary>A numbered packet, with the view it was numbered in and that view's first seq.</summary>
    private sealed class Outgoing(byte[] payload, uint view, ulong viewStart)
    {
        public byte[] Payload { get; } = payload;
        public uint View { get; } = view;
        public ulong ViewStart { get; } = viewStart;
        public TimeSpan SentAt { get; set; }
    }
}
