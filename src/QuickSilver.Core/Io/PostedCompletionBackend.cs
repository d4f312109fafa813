using QuickSilver.Core.Downcalls;

namespace QuickSilver.Core.Io;

/// <summary>Something a completion posted into a <see cref="PostedCompletionBackend"/>'s queue: handled on the core
/// thread.</summary>
internal interface ICompletion
{
    /// <summary>Handles the completed operation (and, for a receive, drains the socket). Returns datagrams handled.</summary>
    int Complete(TimeSpan deadline);
}

/// <summary>
/// The I/O queue of the backends built on .NET socket completions (<see cref="Portable.PortableBackend"/>,
/// <see cref="Completion.CompletionBackend"/>): a completion, on a pool thread or on the core itself, is posted into a
/// bounded queue and wakes the core, which handles it on its own thread. Each socket and endpoint has at most one entry
/// queued, so a full queue only means the core has not caught up yet.
/// </summary>
internal abstract class PostedCompletionBackend(QuickSilverCore core, int capacity) : IIoBackend
{
    private readonly BoundedMpscQueue<ICompletion> _completions = new(capacity);
    private readonly ManualResetEventSlim _signal = new(false, 0);

    protected QuickSilverCore Core { get; } = core;

    public abstract IoBackendKind Kind { get; }

    public bool HasPendingEvents => _completions.Count > 0;

    public abstract UdpEndpoint CreateUdp(UdpEndpointOptions options);

    /// <summary>Queues a completion and wakes the core. Any thread.</summary>
    internal void Post(ICompletion completion)
    {
        var spin = default(SpinWait);
        while (!_completions.TryEnqueue(completion))
        {
            spin.SpinOnce(); // at most one entry per socket and endpoint is ever queued: this only waits for the core to catch up
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
        while (Core.Now < deadline && _completions.TryDequeue(out var completion))
        {
            handled += completion.Complete(deadline);
        }

        return handled;
    }

    public void Wake() => _signal.Set();

    public void Dispose() => _signal.Dispose();
}
