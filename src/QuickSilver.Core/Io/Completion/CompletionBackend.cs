namespace QuickSilver.Core.Io.Completion;

/// <summary>
/// The completion backend (<see cref="IoBackendKind.Completion"/>): every socket keeps one reused
/// <see cref="System.Net.Sockets.SocketAsyncEventArgs"/> receive outstanding (I/O completion ports on Windows, the
/// runtime's own epoll thread on Linux); its completion, and that of a send parked on a full socket buffer, is posted
/// into this bounded queue and wakes the core, which handles it on its own thread. Each socket and each endpoint has at
/// most one operation outstanding, so the queue never holds more entries than there are sockets plus endpoints.
/// </summary>
internal sealed class CompletionBackend(QuickSilverCore core) : PostedCompletionBackend(core, QueueCapacity)
{
    /// <summary>Queue capacity: far above the sockets one core opens (one per endpoint plus one per joined group).</summary>
    internal const int QueueCapacity = 1 << 14;

    public override IoBackendKind Kind => IoBackendKind.Completion;

    public override UdpEndpoint CreateUdp(UdpEndpointOptions options) => new CompletionUdpEndpoint(Core, this, options);
}
