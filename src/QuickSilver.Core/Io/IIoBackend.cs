namespace QuickSilver.Core.Io;

/// <summary>The I/O queue a core drains: epoll on Linux, or completions posted by .NET sockets.</summary>
internal interface IIoBackend : IDisposable
{
    IoBackendKind Kind { get; }

    UdpEndpoint CreateUdp(UdpEndpointOptions options);

    /// <summary>
    /// Waits up to <paramref name="timeoutMs"/> (-1: no limit, 0: don't block) for I/O or a wake-up, then handles ready
    /// sockets, draining each one completely, until nothing is ready or <paramref name="deadline"/> (core time) passes.
    /// Returns the number of datagrams handled.
    /// </summary>
    int PollAndDispatch(int timeoutMs, TimeSpan deadline);

    /// <summary>Test hook: true when the backend knows of I/O waiting to be handled (always true for epoll, which can't tell without polling).</summary>
    bool HasPendingEvents { get; }

    /// <summary>Interrupts a blocked <see cref="PollAndDispatch"/>. Any thread.</summary>
    void Wake();
}
