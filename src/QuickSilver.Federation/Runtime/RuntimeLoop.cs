using QuickSilver.Federation.NativeNet;

namespace QuickSilver.Federation.Runtime;

/// <summary>What a runtime does with one of its own events (kinds from <see cref="RuntimeLoop.FirstOwnerKind"/> up).</summary>
internal delegate void InboxRecordHandler(in InboxRecord record, ReadOnlySpan<byte> payload);

/// <summary>
/// The loop thread of a gateway or data node runtime: it owns the state machine, drains its <see cref="LoopInbox"/>
/// (actions, native packets, and the runtime's own events: frames from peers, datagrams) in batches, and calls
/// <c>tick</c> every <see cref="TickEvery"/> on the runtime's monotonic clock. It is also the hosted plug-in's
/// <see cref="INativeNetLoop"/>: a native packet crosses into the loop as bytes in the inbox, not as a closure over a
/// copy.
/// </summary>
internal sealed class RuntimeLoop : INativeNetLoop
{
    public static readonly TimeSpan TickEvery = TimeSpan.FromMilliseconds(100);

    /// <summary>The first event kind a runtime may define for itself.</summary>
    public const byte FirstOwnerKind = 2;

    private const byte ActionKind = 0;
    private const byte NativeDataKind = 1;

    private readonly LoopInbox _inbox;
    private readonly Thread _thread;
    private readonly Func<TimeSpan> _clock;
    private readonly Action<TimeSpan> _tick;
    private readonly InboxRecordHandler _onRecord;
    private volatile bool _stopping;
    private readonly bool _tickAtStart;
    private readonly Action? _afterTurn;
    private INativeNetUpcalls? _upcalls;
    private IHostedNativeNet? _native;
    private long _dropped;

    /// <param name="tickAtStart">Tick as soon as the loop starts (a data node's first HEARTBEAT), not a tick later.</param>
    /// <param name="afterTurn">Runs at the end of every turn, after the plug-in's <see cref="IHostedNativeNet.FlushSends"/>
    /// (the runtime's own gathered sends).</param>
    public RuntimeLoop(string name, Func<TimeSpan> clock, Action<TimeSpan> tick, InboxRecordHandler onRecord, bool tickAtStart = false,
        Action? afterTurn = null, LoopInbox? inbox = null)
    {
        _tickAtStart = tickAtStart;
        _afterTurn = afterTurn;
        _clock = clock;
        _tick = tick;
        _onRecord = onRecord;
        _inbox = inbox ?? new LoopInbox();
        _thread = new Thread(Run) { IsBackground = true, Name = name };
    }

    /// <summary>Events refused because the inbox was full (<see cref="TryPost"/>, <see cref="TryPostData"/>,
    /// <see cref="TryWrite"/>).</summary>
    public long Dropped => Interlocked.Read(ref _dropped);

    public bool Stopping => _stopping;

    /// <summary>Where <see cref="TryPostData"/> delivers (the gateway or the data node), and the plug-in whose gathered
    /// sends are flushed after every batch of events.</summary>
    public void Bind(INativeNetUpcalls upcalls, INativeNet native)
    {
        _upcalls = upcalls;
        _native = native as IHostedNativeNet;
    }

    public void Start() => _thread.Start();

    /// <summary>Runs <paramref name="action"/> on the loop thread, waiting for room (back-pressure); not from the loop
    /// thread itself.</summary>
    public void Post(Action action) => _inbox.Write(ActionKind, 0, action, default);

    /// <summary>Runs <paramref name="action"/> on the loop thread unless the inbox is full (then dropped and counted).</summary>
    public bool TryPost(Action action) => Count(_inbox.TryWrite(ActionKind, 0, action, default));

    public bool TryPostData(NativeChannel channel, ReadOnlySpan<byte> data) => Count(_inbox.TryWrite(NativeDataKind, 0, channel, data));

    /// <summary>One of the runtime's own events, dropped and counted when the inbox is full (datagrams).</summary>
    public bool TryWrite(byte kind, uint key, object? target, ReadOnlySpan<byte> payload)
        => Count(_inbox.TryWrite(Own(kind), key, target, payload));

    /// <summary>One of the runtime's own events, waiting for room (frames from a TCP connection: the wait pushes back
    /// on the sender); false only when stopping.</summary>
    public bool Write(byte kind, uint key, object? target, ReadOnlySpan<byte> payload)
        => _inbox.Write(Own(kind), key, target, payload);

    /// <summary>Stops the loop and waits for it (at most <paramref name="timeout"/>); true when the loop has ended.</summary>
    public bool Stop(TimeSpan timeout)
    {
        _stopping = true;
        _inbox.Close();
        if (Thread.CurrentThread == _thread)
        {
            return false;
        }

        return !_thread.IsAlive || _thread.Join(timeout);
    }

    private static byte Own(byte kind)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(kind, FirstOwnerKind);
        return kind;
    }

    private bool Count(bool written)
    {
        if (!written)
        {
            Interlocked.Increment(ref _dropped);
        }

        return written;
    }

    private void Run()
    {
        var handler = new Dispatch(this);
        var nextTick = _tickAtStart ? _clock() : _clock() + TickEvery;
        while (!_stopping)
        {
            int handled = _inbox.Drain(ref handler);
            var now = _clock();
            if (now >= nextTick)
            {
                _tick(now);
                nextTick = now + TickEvery;
            }

            _native?.FlushSends(); // what this turn sent into the island, in one go
            _afterTurn?.Invoke();
            if (handled == 0)
            {
                _inbox.WaitForWork(nextTick - now);
            }
        }
    }

    private readonly struct Dispatch(RuntimeLoop loop) : IInboxHandler
    {
        public void Handle(in InboxRecord record, ReadOnlySpan<byte> payload)
        {
            switch (record.Kind)
            {
                case ActionKind:
                    ((Action)record.Target!)();
                    break;
                case NativeDataKind:
                    loop._upcalls?.RecvdData((NativeChannel)record.Target!, payload);
                    break;
                default:
                    loop._onRecord(record, payload);
                    break;
            }
        }
    }
}
