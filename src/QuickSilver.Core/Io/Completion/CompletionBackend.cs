using QuickSilver.Core.Downcalls;

namespace QuickSilver.Core.Io.Completion;

/// <summary>Something a completion posted into the backend's queue: handled on the core thread.</summary>
internal interface ICompletion
{
    /// <summary>Handles the completed operation (and, for a receive, drains the socket). Returns datagrams handled.</summary>
    int Complete(TimeSpan deadline);
}

/// <summary>
/// The completion backend (<see cref="IoBackendKind.Completion"/>): every socket keeps one reused
/// <see cref="System.Net.Sockets.SocketAsyncEventArgs"/> receive outstanding (I/O completion ports on Windows, the
/// runtime's own epoll thread on Linux); its completion, and that of a send parked on a full socket buffer, is posted
/// into this bounded queue and wakes the core, which handles it on its own thread. Each socket and each endpoint has at
/// most one operation outstanding, so the queue never holds more entries than there are sockets plus endpoints.
/// </summary>
internal sealed class CompletionBackend : IIoBackend
{
    /// <summary>Queue capacity: far above the sockets one core opens (one per endpoint plus one per joined group).</summary>
    internal const int QueueCapacity = 1 << 14;

    private readonly QuickSilverCore _core;
    private readonly BoundedMpscQueue<ICompletion> _completions = new(QueueCapacity);
    private readonly ManualResetEventSlim _signal = new(false, 0);

    public CompletionBackend(QuickSilverCore core)
    {
        _core = core;
    }

    public IoBackendKind Kind => IoBackendKind.Completion;

    public bool HasPendingEvents => _completions.Count > 0;

    public UdpEndpoint CreateUdp(UdpEndpointOptions options) => new CompletionUdpEndpoint(_core, this, options);

    /// <summary>Queues a completion and wakes the core. Any thread (a pool thread, or the core itself when an
    /// operation completed synchronously).</summary>
    internal void Post(ICompletion completion)
    {
        var spin = default(SpinWait);
        while (!_completions.TryEnqueue(completion))
        {
            // Unreachable while sockets + endpoints stay below QueueCapacity: each has at most one entry queued.
            spin.SpinOnce();
        }

        Wake();
    }

    public int PollAndDispatch(int timeoutMs, TimeSpan deadline)
    {
        if (_completions.Count == 0 && timeoutMs != 0)
        {
            _signal.Wait(timeoutMs);
        }

        _signal.Reset();
        int handled = 0;
        while (_core.Now < deadline && _completions.TryDequeue(out var completion))
        {
            handled += completion.Complete(deadline);
        }

        return handled;
    }

    public void Wake() => _signal.Set();

    public void Dispose() => _signal.Dispose();
}
