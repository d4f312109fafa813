namespace QuickSilver.Core.Io.Portable;

/// <summary>
/// The portable I/O queue: each socket keeps one asynchronous receive outstanding (completion ports on Windows,
/// the runtime's own epoll thread on Linux); a completion is posted into this queue and wakes the core, which then
/// drains that socket synchronously on its own thread and re-arms the receive.
/// </summary>
internal sealed class PortableBackend(QuickSilverCore core) : PostedCompletionBackend(core, 4096)
{
    public override IoBackendKind Kind => IoBackendKind.Portable;

    public override UdpEndpoint CreateUdp(UdpEndpointOptions options) => new PortableUdpEndpoint(Core, this, options);
}
