namespace QuickSilver.Core.Io;

/// <summary>Options of one UDP endpoint. The defaults work on one machine over loopback.</summary>
public sealed record UdpEndpointOptions
{
    /// <summary>Unicast address to bind. Port 0 picks a free port. Default 127.0.0.1:0.</summary>
    public NetAddress Bind { get; init; } = NetAddress.Loopback(0);

    /// <summary>Interface used to send and join IP multicast, by its IPv4 address. Default loopback.</summary>
    public NetAddress MulticastInterface { get; init; } = NetAddress.Loopback(0);

    /// <summary>IP multicast TTL. 1 keeps traffic on the local network (and on loopback).</summary>
    public int MulticastTtl { get; init; } = 1;

    /// <summary>Whether this host's own sockets receive the multicast it sends (needed on one machine).</summary>
    public bool MulticastLoopback { get; init; } = true;

    /// <summary>Whether this endpoint's group sockets receive the datagrams it multicast itself. Off by default: on
    /// Linux a socket filter drops them in the kernel (the layers above have their own packets already; docs/core.md,
    /// "UDP endpoints"); other sockets on the host, other processes' included, still receive them through
    /// <see cref="MulticastLoopback"/>. Elsewhere they arrive as before.</summary>
    public bool ReceiveOwnMulticast { get; init; }

    /// <summary>Largest datagram sent or accepted. Larger received datagrams are dropped and counted (Oversized).</summary>
    public int MaxDatagramSize { get; init; } = 1472;

    /// <summary>Datagrams that may wait in the endpoint's send ring; <c>TrySend</c> fails beyond it.</summary>
    public int SendQueueCapacity { get; init; } = 256;

    /// <summary>SO_RCVBUF request in bytes (the kernel may cap it).</summary>
    public int SocketReceiveBufferBytes { get; init; } = 4 << 20;

    /// <summary>SO_SNDBUF request in bytes (the kernel may cap it).</summary>
    public int SocketSendBufferBytes { get; init; } = 1 << 20;

    /// <summary>Fraction of received datagrams to drop on purpose (counted as InjectedLoss), to test and measure loss
    /// recovery over real sockets. 0 in production.</summary>
    public double InjectedLossRate { get; init; }

    /// <summary>Seed of the injected-loss generator, so a lossy run can be repeated.</summary>
    public int InjectedLossSeed { get; init; } = 1;

    /// <summary>How group sockets bind; <see cref="GroupBindStrategy.Auto"/> follows the OS. Internal: tests force
    /// <see cref="GroupBindStrategy.Wildcard"/> (the Windows way) on Linux.</summary>
    internal GroupBindStrategy GroupBind { get; init; }

    /// <summary>The strategy <see cref="GroupBind"/> resolves to on this OS.</summary>
    internal GroupBindStrategy EffectiveGroupBind => GroupBind != GroupBindStrategy.Auto
        ? GroupBind
        : OperatingSystem.IsWindows() ? GroupBindStrategy.Wildcard : GroupBindStrategy.GroupAddress;

    public void Validate()
    {
        OptionChecks.InRange(InjectedLossRate, 0, 1, $"UdpEndpointOptions.{nameof(InjectedLossRate)}");
        if (Bind.IsMulticast)
        {
            throw new ArgumentException($"UdpEndpointOptions.Bind must be a unicast address, got {Bind}.", nameof(Bind));
        }

        if (MulticastInterface.IsMulticast)
        {
            throw new ArgumentException($"UdpEndpointOptions.MulticastInterface must be a unicast interface address, got {MulticastInterface}.", nameof(MulticastInterface));
        }

        OptionChecks.InRange(MulticastTtl, 0, 255, $"UdpEndpointOptions.{nameof(MulticastTtl)}");
        OptionChecks.InRange(MaxDatagramSize, Wire.PacketHeader.Size, 65507, $"UdpEndpointOptions.{nameof(MaxDatagramSize)}");
        OptionChecks.InRange(SendQueueCapacity, 1, 1 << 16, $"UdpEndpointOptions.{nameof(SendQueueCapacity)}");
        OptionChecks.InRange(SocketReceiveBufferBytes, 4096, 1 << 30, $"UdpEndpointOptions.{nameof(SocketReceiveBufferBytes)}");
        OptionChecks.InRange(SocketSendBufferBytes, 4096, 1 << 30, $"UdpEndpointOptions.{nameof(SocketSendBufferBytes)}");
        if (!Enum.IsDefined(GroupBind))
        {
            throw new ArgumentOutOfRangeException(nameof(GroupBind), GroupBind, "UdpEndpointOptions.GroupBind is not a known strategy.");
        }
    }
}
