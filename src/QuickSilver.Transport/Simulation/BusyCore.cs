using QuickSilver.Core.Alarms;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Simulation;

/// <summary>
/// A simulated core thread whose sends cost time: every datagram a protocol sends through <see cref="Wrap"/>'s
/// transport keeps this core busy for <see cref="CostPerDatagram"/> of virtual time, the datagram leaves when that
/// work is done, and the protocol's alarms (scheduled through this object) fire no earlier than the core is free.
/// So a sender asked for more than its core can do falls behind its own schedule, as a real one does on a busy
/// machine, where the plain <see cref="SimNode"/> (whose alarms are always on time and whose sends are free)
/// would keep any rate it was given.
/// </summary>
/// <remarks>
/// A handler's clock advances with its sends (<see cref="Now"/>); what it sent leaves spaced by the cost, in order. Receive-side CPU is <see cref="SimNode.ProcessingCostPerPacket"/>; work
/// posted to the node directly (not through this scheduler) does not wait for the core.
/// </remarks>
public sealed class BusyCore : IAlarmScheduler
{
    private readonly SimNode _node;
    private readonly AlarmQueue _queue = new();
    private readonly Alarm _pump;
    private readonly Alarm _flush;
    private readonly Queue<Pending> _pending = new();
    private readonly Stack<byte[]> _buffers = new();
    private TimeSpan _busyUntil;

    public BusyCore(SimNode node, TimeSpan costPerDatagram)
    {
        ArgumentNullException.ThrowIfNull(node);
        ArgumentOutOfRangeException.ThrowIfLessThan(costPerDatagram, TimeSpan.Zero);
        _node = node;
        CostPerDatagram = costPerDatagram;
        _pump = new Alarm(_ => Pump());
        _flush = new Alarm(_ => Flush());
    }

    /// <summary>Virtual time one datagram send keeps the core busy.</summary>
    public TimeSpan CostPerDatagram { get; }

    /// <summary>Datagrams sent through this core.</summary>
    public long Datagrams { get; private set; }

    /// <summary>The longest an alarm waited for the core past its deadline.</summary>
    public TimeSpan MaxAlarmDelay { get; private set; }

    /// <summary>The core's time: the network's, or, while the core is busy with what it has sent, the time that work
    /// ends (a real handler that reads the clock after a burst of sends sees the time the burst took).</summary>
    public TimeSpan Now => _busyUntil > _node.Now ? _busyUntil : _node.Now;

    public void Schedule(Alarm alarm, TimeSpan deadline)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        _queue.Schedule(alarm, deadline);
        Arm();
    }

    public bool Cancel(Alarm alarm)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        bool removed = _queue.Cancel(alarm);
        if (removed)
        {
            Arm();
        }

        return removed;
    }

    /// <summary>The core thread is held up for <paramref name="duration"/> from now (a loaded machine descheduled the
    /// process): its alarms fire no earlier than the end, late, and datagrams arriving at its node meanwhile wait in
    /// its receive queue and are handled after it, in order.</summary>
    public void Stall(TimeSpan duration)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(duration, TimeSpan.Zero);
        var end = _node.Now + duration;
        if (end > _busyUntil)
        {
            _busyUntil = end;
        }

        if (end > _node.StalledUntil)
        {
            _node.StalledUntil = end;
        }

        Arm();
    }

    /// <summary>A transport over <paramref name="inner"/> whose sends cost this core's time (copied, sent when done).</summary>
    public IDatagramTransport Wrap(IDatagramTransport inner)
    {
        ArgumentNullException.ThrowIfNull(inner);
        return new CostedTransport(this, inner);
    }

    private void Arm()
    {
        if (!_queue.TryPeekDeadline(out var deadline))
        {
            return; // a stale pump finds nothing and stops
        }

        var at = deadline > _busyUntil ? deadline : _busyUntil;
        if (!_pump.IsScheduled || _pump.Deadline > at)
        {
            _node.Schedule(_pump, at);
        }
    }

    private void Pump()
    {
        while (_node.Now >= _busyUntil && _queue.PopDue(_node.Now) is { } alarm)
        {
            var now = _node.Now;
            var delay = now - alarm.Deadline;
            if (delay > MaxAlarmDelay)
            {
                MaxAlarmDelay = delay;
            }

            alarm.Fire();
        }

        Arm();
    }

    private void Send(IDatagramTransport inner, NetAddress to, ReadOnlySpan<byte> datagram)
    {
        _busyUntil = Now + CostPerDatagram;
        Datagrams++;
        var buffer = _buffers.Count > 0 ? _buffers.Pop() : new byte[inner.MaxDatagramSize];
        datagram.CopyTo(buffer);
        _pending.Enqueue(new Pending(inner, to, buffer, datagram.Length, _busyUntil));
        if (!_flush.IsScheduled)
        {
            _node.Schedule(_flush, _busyUntil);
        }
    }

    private void Flush()
    {
        var now = _node.Now;
        while (_pending.TryPeek(out var p) && p.At <= now)
        {
            _pending.Dequeue();
            p.Transport.TrySend(p.To, p.Buffer.AsSpan(0, p.Length));
            _buffers.Push(p.Buffer);
        }

        if (_pending.TryPeek(out var next))
        {
            _node.Schedule(_flush, next.At);
        }
    }

    private readonly record struct Pending(IDatagramTransport Transport, NetAddress To, byte[] Buffer, int Length, TimeSpan At);

    private sealed class CostedTransport(BusyCore core, IDatagramTransport inner) : IDatagramTransport
    {
        private readonly byte[] _claim = new byte[inner.MaxDatagramSize];

        public NetAddress LocalAddress => inner.LocalAddress;

        public int MaxDatagramSize => inner.MaxDatagramSize;

        public long ReceiveOverflows => inner.ReceiveOverflows;

        public void SetHandler(IDatagramHandler handler) => inner.SetHandler(handler);

        public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
        {
            if (datagram.Length > MaxDatagramSize)
            {
                throw new ArgumentException($"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({MaxDatagramSize}).", nameof(datagram));
            }

            core.Send(inner, to, datagram);
            return true;
        }

        public bool TryClaim(out Span<byte> slot)
        {
            slot = _claim;
            return true;
        }

        public Span<byte> ClaimedSlot => _claim;

        public void Commit(NetAddress to, int length)
        {
            ArgumentOutOfRangeException.ThrowIfNegative(length);
            ArgumentOutOfRangeException.ThrowIfGreaterThan(length, MaxDatagramSize);
            core.Send(inner, to, _claim.AsSpan(0, length));
        }

        /// <summary>Feeds are pulled by the node's uplink, not this core: their sends cost nothing here.</summary>
        public IFeedChannel RegisterFeed(IDatagramFeed feed) => inner.RegisterFeed(feed);

        public void JoinGroup(NetAddress group) => inner.JoinGroup(group);

        public void LeaveGroup(NetAddress group) => inner.LeaveGroup(group);
    }
}
