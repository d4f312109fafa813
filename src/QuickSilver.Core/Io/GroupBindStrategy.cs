namespace QuickSilver.Core.Io;

/// <summary>How a group's receive socket is bound (docs/core.md, "UDP endpoints"). Internal: tests force the Windows
/// strategy on Linux so its code path runs here.</summary>
internal enum GroupBindStrategy
{
    /// <summary>The OS's own: <see cref="Wildcard"/> on Windows, <see cref="GroupAddress"/> elsewhere.</summary>
    Auto = 0,

    /// <summary>Bind the group address and port: the kernel delivers only that group's datagrams (Linux, BSDs, macOS).</summary>
    GroupAddress,

    /// <summary>Bind 0.0.0.0 and the group's port (Windows refuses to bind a multicast address), join on the interface,
    /// and drop every datagram whose destination (IP_PKTINFO) is not the group. Needs the Completion backend.</summary>
    Wildcard,
}
