using System.Diagnostics;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Downcalls;
using QuickSilver.Core.Io;
using QuickSilver.Core.Io.Completion;
using QuickSilver.Core.Io.Linux;
using QuickSilver.Core.Io.Portable;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace QuickSilver.Core;

/// <summary>
/// The QuickSilver core (QSM §2.5): one thread that owns all protocol state and drains, in round-robin batches,
/// an I/O queue (epoll, or posted socket completions) for up to <see cref="CoreOptions.IoQuantum"/> and the alarm splay
/// tree for up to <see cref="CoreOptions.AlarmQuantum"/>. Application threads reach it only through downcalls
/// (<see cref="TryPost"/>, <see cref="InvokeAsync{T}"/>); protocol code runs on it and sees it as an
/// <see cref="IAlarmScheduler"/>. When nothing is due it blocks in one system call until I/O, a downcall or the next alarm.
/// </summary>
public sealed class QuickSilverCore : IAlarmScheduler, ICoreDispatcher, IDisposable
{
    private readonly AlarmQueue _alarms = new();
    private readonly BoundedMpscQueue<Downcall> _downcalls;
    private readonly List<UdpEndpoint> _dirty = new();
    private readonly List<UdpEndpoint> _endpoints = new();
    private readonly Func<TimeSpan> _time;
    private readonly IIoBackend _backend;
    private readonly Thread _thread;
    private readonly TaskCompletionSource _stopped = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _sleeping;
    private volatile bool _stopRequested;
    private Exception? _fault;

    private QuickSilverCore(CoreOptions options)
    {
        Options = options;
        Log = options.Logger ?? NullLogger.Instance;
        _downcalls = new BoundedMpscQueue<Downcall>(options.DowncallQueueCapacity);
        Counters = new CoreCounters(options.Name, () => _downcalls.Count, options.MeterFactory);
        if (options.TimeSource is { } source)
        {
            _time = source;
        }
        else
        {
            long origin = Stopwatch.GetTimestamp();
            _time = () => Stopwatch.GetElapsedTime(origin);
        }

        var kind = options.Backend == IoBackendKind.Auto
            ? (OperatingSystem.IsLinux() ? IoBackendKind.Epoll : IoBackendKind.Completion)
            : options.Backend;
        _backend = kind switch
        {
            IoBackendKind.Epoll => new EpollBackend(this),
            IoBackendKind.Portable => new PortableBackend(this),
            _ => new CompletionBackend(this),
        };
        _thread = new Thread(Run) { Name = $"qs-core:{options.Name}", IsBackground = true };
    }

    /// <summary>Validates <paramref name="options"/>, creates the core and starts its thread.</summary>
    public static QuickSilverCore Start(CoreOptions? options = null)
    {
        options ??= new CoreOptions();
        options.Validate();
        var core = new QuickSilverCore(options);
        core._thread.Start();
        return core;
    }

    public CoreOptions Options { get; }

    public CoreCounters Counters { get; }

    public IoBackendKind Backend => _backend.Kind;

    internal ILogger Log { get; }

    /// <summary>Completes when the core thread has exited (after <see cref="Stop"/> or a fatal fault).</summary>
    public Task Completion => _stopped.Task;

    public TimeSpan Now => _time();

    public bool IsCoreThread => Environment.CurrentManagedThreadId == _thread.ManagedThreadId;

    internal bool HasPendingIoForTests => _backend.HasPendingEvents;

    /// <summary>Number of alarms currently scheduled.</summary>
    public int ScheduledAlarms => _alarms.Count;

    public void Schedule(Alarm alarm, TimeSpan deadline)
    {
        ThrowIfNotCoreThread();
        _alarms.Schedule(alarm, deadline);
    }

    public bool Cancel(Alarm alarm)
    {
        ThrowIfNotCoreThread();
        return _alarms.Cancel(alarm);
    }

    /// <summary>Queues a downcall and wakes the core. Any thread; no allocation. False when the queue is full or the core stopped.</summary>
    public bool TryPost(Action<object?> action, object? state)
    {
        ArgumentNullException.ThrowIfNull(action);
        if (_stopRequested)
        {
            return false;
        }

        if (!_downcalls.TryEnqueue(new Downcall(action, state)))
        {
            Interlocked.Increment(ref Counters.DowncallsRefused); // the queue's bound: the caller waits and posts again
            return false;
        }

        if (Volatile.Read(ref _sleeping) == 1 && Interlocked.Exchange(ref _sleeping, 0) == 1)
        {
            _backend.Wake();
        }

        return true;
    }

    /// <summary>Runs <paramref name="func"/> on the core thread and returns its result (convenience for set-up code; allocates).</summary>
    public Task<T> InvokeAsync<T>(Func<T> func)
    {
        ArgumentNullException.ThrowIfNull(func);
        var tcs = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        if (IsCoreThread)
        {
            tcs.SetResult(func());
            return tcs.Task;
        }

        var spin = default(SpinWait);
        while (!TryPost(static s =>
        {
            var (f, t) = ((Func<T>, TaskCompletionSource<T>))s!;
            try
            {
                t.SetResult(f());
            }
            catch (Exception e)
            {
                t.SetException(e);
            }
        }, (func, tcs)))
        {
            if (_stopRequested)
            {
                throw new ObjectDisposedException(nameof(QuickSilverCore), $"Core '{Options.Name}' has stopped.");
            }

            spin.SpinOnce();
        }

        return tcs.Task;
    }

    /// <summary>Runs <paramref name="action"/> on the core thread and waits for it.</summary>
    public void Invoke(Action action)
    {
        ArgumentNullException.ThrowIfNull(action);
        InvokeAsync(() =>
        {
            action();
            return true;
        }).GetAwaiter().GetResult();
    }

    /// <summary>Opens a UDP endpoint owned by this core. Callable from any thread (marshalled to the core).</summary>
    public UdpEndpoint OpenUdp(UdpEndpointOptions? options = null)
    {
        options ??= new UdpEndpointOptions();
        options.Validate();
        if (!IsCoreThread)
        {
            return InvokeAsync(() => OpenUdp(options)).GetAwaiter().GetResult();
        }

        var endpoint = _backend.CreateUdp(options);
        endpoint.Start();
        _endpoints.Add(endpoint);
        return endpoint;
    }

    /// <summary>Asks the core to stop, waits for its thread to exit, and rethrows a fault that stopped it. Called on the
    /// core thread itself (from a handler), it only asks: the loop ends after the current event.</summary>
    public void Stop()
    {
        if (IsCoreThread)
        {
            _stopRequested = true;
            return;
        }

        if (!_stopRequested)
        {
            _stopRequested = true;
            _backend.Wake();
        }

        _thread.Join();
        if (_fault is not null)
        {
            throw new InvalidOperationException($"Core '{Options.Name}' stopped on a fault.", _fault);
        }
    }

    /// <summary>Stops the core (see <see cref="Stop"/>) and releases the backend. A fault that stopped the core was
    /// logged when it happened; Dispose does not rethrow it (call <see cref="Stop"/> first to observe it).</summary>
    public void Dispose()
    {
        if (IsCoreThread)
        {
            throw new InvalidOperationException($"Core '{Options.Name}' cannot be disposed from its own thread; call Stop() there.");
        }

        try
        {
            Stop();
        }
        catch (InvalidOperationException) when (_fault is not null)
        {
            // Already logged by the core thread.
        }
        finally
        {
            if (_thread.ThreadState == System.Threading.ThreadState.Stopped)
            {
                _backend.Dispose();
                Counters.Dispose();
            }
        }
    }

    internal void ThrowIfNotCoreThread()
    {
        if (!IsCoreThread && _thread.IsAlive)
        {
            throw new InvalidOperationException(
                $"This call must be made on core '{Options.Name}''s thread; from other threads use TryPost or InvokeAsync.");
        }
    }

    /// <summary>Marks an endpoint as having something to send; the core flushes it at the end of the current batch.</summary>
    internal void MarkDirty(UdpEndpoint endpoint)
    {
        if (!endpoint.InDirtyList)
        {
            endpoint.InDirtyList = true;
            _dirty.Add(endpoint);
        }
    }

    internal void Forget(UdpEndpoint endpoint) => _endpoints.Remove(endpoint);

    private void Run()
    {
        try
        {
            Loop();
        }
        catch (Exception e)
        {
            _fault = e;
            CoreLog.Faulted(Log, e, Options.Name);
        }
        finally
        {
            Shutdown();
            _stopped.TrySetResult();
        }
    }

    private void Loop()
    {
        bool received = false;
        while (!_stopRequested)
        {
            RunDowncalls();
            if (_stopRequested)
            {
                break;
            }

            // I/O round: block only when nothing else is due.
            int timeout = ComputeTimeoutMs();
            if (timeout != 0 && received && Options.ReceiveCoalescing > TimeSpan.Zero)
            {
                Nap();
                timeout = 0;
            }

            var ioDeadline = Now + Options.IoQuantum;
            int handled = SafePoll(timeout, ioDeadline);
            received = handled > 0;
            if (handled > 0 || _dirty.Count > 0)
            {
                FlushDirty();
            }

            // Alarm round.
            var alarmDeadline = Now + Options.AlarmQuantum;
            int fired = 0;
            var now = Now;
            while (_alarms.PopDue(now) is { } alarm)
            {
                fired++;
                try
                {
                    alarm.Fire();
                }
                catch (Exception e)
                {
                    OnUpcallFault(e);
                }

                now = Now;
                if (now >= alarmDeadline)
                {
                    break;
                }
            }

            if (fired > 0)
            {
                Counters.AlarmBatches++;
                Counters.AlarmsFired += fired;
                FlushDirty();
            }
        }
    }

    /// <summary>Receive coalescing (<see cref="CoreOptions.ReceiveCoalescing"/>): the last round received, so sleep
    /// before polling again, at most until the next alarm. A downcall posted meanwhile waits for the nap to end (its
    /// wake-up stays pending in the backend and is drained by the next poll).</summary>
    private void Nap()
    {
        var nap = Options.ReceiveCoalescing;
        if (_alarms.TryPeekDeadline(out var next) && next - Now < nap)
        {
            nap = next - Now;
        }

        if (nap <= TimeSpan.Zero)
        {
            return;
        }

        Counters.CoalescingNaps++;
        if (OperatingSystem.IsLinux())
        {
            unsafe
            {
                long* ts = stackalloc long[2];
                ts[0] = nap.Ticks / TimeSpan.TicksPerSecond;
                ts[1] = nap.Ticks % TimeSpan.TicksPerSecond * 100;
                _ = Io.Linux.LinuxNative.clock_nanosleep(Io.Linux.LinuxNative.CLOCK_MONOTONIC, 0, ts, null);
            }
        }
        else
        {
            Thread.Sleep((int)Math.Ceiling(nap.TotalMilliseconds));
        }
    }

    private int SafePoll(int timeoutMs, TimeSpan deadline)
    {
        try
        {
            return _backend.PollAndDispatch(timeoutMs, deadline);
        }
        catch (Exception e) when (e is not System.Net.Sockets.SocketException)
        {
            // A handler threw while the backend was delivering: count it, keep the core alive.
            OnUpcallFault(e);
            return 1;
        }
    }

    private int ComputeTimeoutMs()
    {
        if (_dirty.Count > 0 || _downcalls.Count > 0)
        {
            return 0;
        }

        int timeout = -1;
        if (_alarms.TryPeekDeadline(out var next))
        {
            var wait = next - Now;
            if (wait <= TimeSpan.Zero)
            {
                return 0;
            }

            // Round up, so the core does not wake a fraction of a millisecond early and spin.
            timeout = (int)Math.Min(int.MaxValue, Math.Ceiling(wait.TotalMilliseconds));
        }

        // Announce that we are about to sleep, then re-check: a producer that enqueued before seeing the flag
        // is caught here; one that enqueues after will see it and wake us.
        Volatile.Write(ref _sleeping, 1);
        Interlocked.MemoryBarrier();
        if (_downcalls.Count > 0 || _stopRequested)
        {
            Volatile.Write(ref _sleeping, 0);
            return 0;
        }

        return timeout;
    }

    private void RunDowncalls()
    {
        Volatile.Write(ref _sleeping, 0);

        // Bounded per round so a flood of downcalls cannot starve I/O and alarms.
        int budget = Math.Max(1024, _downcalls.Capacity);
        int ran = 0;
        while (ran < budget && _downcalls.TryDequeue(out var downcall))
        {
            ran++;
            try
            {
                downcall.Invoke();
            }
            catch (Exception e)
            {
                OnUpcallFault(e);
            }
        }

        Counters.DowncallsRun += ran;
        if (ran > 0)
        {
            FlushDirty();
        }
    }

    private void FlushDirty()
    {
        for (int i = 0; i < _dirty.Count; i++)
        {
            var endpoint = _dirty[i];
            bool more;
            try
            {
                more = endpoint.Flush();
            }
            catch (Exception e)
            {
                OnUpcallFault(e); // a feed threw
                more = false;
            }

            if (!more)
            {
                endpoint.InDirtyList = false;
                _dirty[i] = _dirty[^1];
                _dirty.RemoveAt(_dirty.Count - 1);
                i--;
            }
        }
    }

    private void OnUpcallFault(Exception e)
    {
        Counters.UpcallFaults++;
        CoreLog.UpcallFault(Log, e, Options.Name);
    }

    private void Shutdown()
    {
        // Run what was already posted, so callers waiting on InvokeAsync are not left hanging.
        while (_downcalls.TryDequeue(out var downcall))
        {
            try
            {
                downcall.Invoke();
            }
            catch (Exception e)
            {
                OnUpcallFault(e);
            }
        }

        if (_alarms.Count > 0)
        {
            CoreLog.Stopping(Log, Options.Name, _alarms.Count);
        }

        foreach (var endpoint in _endpoints.ToArray())
        {
            endpoint.Dispose(); // flushes what the socket still takes, reports the rest
        }
    }
}
