using QuickSilver.Core.Downcalls;

namespace QuickSilver.Core.Io.Portable;

/// <summary>
/// The portable I/O queue: each socket keeps one asynchronous receive outstanding (completion ports on Windows,
/// the runtime's own epoll thread on Linux); a completion is posted into this queue and wakes the core, which then
/// drains that socket synchronously on its own thread and re-arms the receive.
/// </summary>
internal sealed class PortableBackend : IIoBackend
{
    private readonly QuickSilverCore _core;
    private readonly BoundedMpscQueue<PortableReceiver> _completions;
    private readonly ManualResetEventSlim _signal = new(false, 0);

    public PortableBackend(QuickSilverCore core)
    {
        _core = core;
        _completions = new BoundedMpscQueue<PortableReceiver>(4096);
    }

    public IoBackendKind Kind => IoBackendKind.Portable;

    public bool HasPendingEvents => _completions.Count > 0;

    public UdpEndpoint CreateUdp(UdpEndpointOptions options) => new PortableUdpEndpoint(_core, this, options);

    /// <summary>Called on a pool thread when a receiver's asynchronous receive completes.</summary>
    internal void Post(PortableReceiver receiver)
    {
        var spin = default(SpinWait);
        while (!_completions.TryEnqueue(receiver))
        {
            spin.SpinOnce(); // at most one entry per socket is ever queued, so this only waits for the core to catch up
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
        while (_core.Now < deadline && _completions.TryDequeue(out var receiver))
        {
            handled += receiver.Complete(deadline);
        }

        return handled;
    }

    public void Wake() => _signal.Set();

    public void Dispose() => _signal.Dispose();
}
