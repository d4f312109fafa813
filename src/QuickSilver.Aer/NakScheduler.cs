using QuickSilver.Core.Alarms;

namespace QuickSilver.Aer;

/// <summary>
/// The NAK side of AER (§4.1) for one receiver or repair server: per missing packet, wait a random time in
/// [0, delayMax], then NAK the nearest upstream repair server and start the NAK retransmission timer. A NAK subcast from
/// upstream heard before ours is sent suppresses ours (we wait on the retransmission timer as if we had sent it). A timer
/// that expires without the repair counts as a new loss: a new random wait, a new NAK. At most <c>capacity</c> packets
/// are tracked (the caller re-offers the rest later); the alarms are pooled with their entries. Core thread only.
/// </summary>
public sealed class NakScheduler
{
    private readonly IAlarmScheduler _scheduler;
    private readonly Random _random;
    private readonly int _capacity;
    private readonly Action<long> _sendNak;
    private readonly Dictionary<long, Entry> _pending = new();
    private readonly Stack<Entry> _pool = new();

    /// <param name="sendNak">Sends a NAK for the packet upstream (the owner picks the upstream and counts it).</param>
    public NakScheduler(IAlarmScheduler scheduler, Random random, int capacity, Action<long> sendNak)
    {
        _scheduler = scheduler;
        _random = random;
        _capacity = capacity;
        _sendNak = sendNak;
    }

    /// <summary>The random wait's upper bound.</summary>
    public TimeSpan DelayMax { get; set; }

    /// <summary>The NAK retransmission timer.</summary>
    public TimeSpan RetryTimeout { get; set; } = TimeSpan.FromMilliseconds(40);

    /// <summary>The timer after a suppression: the upstream is fetching from further up, so the repair takes the round
    /// trip from there (the owner sets it from the SPMs' path round trip). Never shorter than <see cref="RetryTimeout"/>.</summary>
    public TimeSpan SuppressedRetryTimeout { get; set; } = TimeSpan.FromMilliseconds(40);

    public int Count => _pending.Count;

    /// <summary>Called when a retransmission timer expires (the owner counts it).</summary>
    public Action? Expired { get; set; }

    public long Suppressed { get; private set; }

    public long Sent { get; private set; }

    public long Timeouts { get; private set; }

    /// <summary>Timers that expired in a row since a repair last arrived (the owner's sign of a failed upstream).</summary>
    public int ConsecutiveTimeouts { get; private set; }

    public bool IsPending(long seq) => _pending.ContainsKey(seq);

    /// <summary>Called with the time from a packet's loss detection to its arrival, for each packet repaired while tracked
    /// (the seed's "repair latency", §5).</summary>
    public Action<TimeSpan>? RepairLatency { get; set; }

    /// <summary>The packet is missing: start its random wait, unless it is tracked already. False when at capacity.</summary>
    public bool Missing(long seq)
    {
        if (_pending.ContainsKey(seq))
        {
            return true;
        }

        if (_pending.Count >= _capacity)
        {
            return false;
        }

        var entry = Rent(seq);
        Wait(entry);
        return true;
    }

    /// <summary>A NAK for the packet came down from upstream: do not send ours; wait for the repair. True when it
    /// suppressed a NAK not yet sent.</summary>
    public bool Suppress(long seq)
    {
        ConsecutiveTimeouts = 0; // the upstream is alive and fetching
        if (!_pending.TryGetValue(seq, out var entry))
        {
            if (_pending.Count >= _capacity)
            {
                return false;
            }

            entry = Rent(seq);
        }
        else if (entry.Sent)
        {
            // Ours went already (or an earlier NAK suppressed it): the upstream says it is fetching from further up,
            // so the repair takes that long.
            _scheduler.ScheduleAfter(entry.Alarm, SuppressedRetryTimeout > RetryTimeout ? SuppressedRetryTimeout : RetryTimeout);
            return false;
        }

        entry.Sent = true;
        Suppressed++;
        _scheduler.ScheduleAfter(entry.Alarm, SuppressedRetryTimeout > RetryTimeout ? SuppressedRetryTimeout : RetryTimeout);
        return true;
    }

    /// <summary>The packet arrived (first transmission or repair): stop tracking it.</summary>
    public void Received(long seq, bool repair)
    {
        if (repair)
        {
            ConsecutiveTimeouts = 0;
        }

        if (_pending.Remove(seq, out var entry))
        {
            if (repair)
            {
                RepairLatency?.Invoke(_scheduler.Now - entry.DetectedAt);
            }

            _scheduler.Cancel(entry.Alarm);
            _pool.Push(entry);
        }
    }

    /// <summary>Drops every packet below <paramref name="seq"/> (they can no longer be repaired, or were delivered).</summary>
    public void ForgetBelow(long seq)
    {
        if (_pending.Count == 0)
        {
            return;
        }

        List<long>? gone = null;
        foreach (var key in _pending.Keys)
        {
            if (key < seq)
            {
                (gone ??= new()).Add(key);
            }
        }

        if (gone is not null)
        {
            foreach (var key in gone)
            {
                Received(key, repair: false);
            }
        }
    }

    /// <summary>Sends every waiting NAK now to wherever the owner now points (after an upstream change).</summary>
    public void ResetConsecutiveTimeouts() => ConsecutiveTimeouts = 0;

    public void Clear()
    {
        foreach (var entry in _pending.Values)
        {
            _scheduler.Cancel(entry.Alarm);
            _pool.Push(entry);
        }

        _pending.Clear();
    }

    private Entry Rent(long seq)
    {
        var entry = _pool.Count > 0 ? _pool.Pop() : new Entry(this);
        entry.Seq = seq;
        entry.Sent = false;
        entry.DetectedAt = _scheduler.Now;
        _pending.Add(seq, entry);
        return entry;
    }

    private void Wait(Entry entry)
    {
        entry.Sent = false;
        var delay = TimeSpan.FromTicks((long)(_random.NextDouble() * DelayMax.Ticks));
        _scheduler.ScheduleAfter(entry.Alarm, delay);
    }

    private void OnAlarm(Entry entry)
    {
        if (!entry.Sent)
        {
            entry.Sent = true;
            Sent++;
            _scheduler.ScheduleAfter(entry.Alarm, RetryTimeout);
            _sendNak(entry.Seq);
            return;
        }

        // §4.1: the retransmission timer expired without the repair, which counts as a new loss.
        Timeouts++;
        Expired?.Invoke();
        ConsecutiveTimeouts++;
        Wait(entry);
    }

    private sealed class Entry
    {
        public Entry(NakScheduler owner) => Alarm = new Alarm(a => owner.OnAlarm((Entry)a.State!), this);

        public Alarm Alarm { get; }

        public long Seq;
        public bool Sent;
        public TimeSpan DetectedAt;
    }
}
