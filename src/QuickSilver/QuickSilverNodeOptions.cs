using QuickSilver.Aer;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;

namespace QuickSilver;

/// <summary>Options of a <see cref="QuickSilverNode"/>. The defaults run on one machine over loopback IP multicast.</summary>
public sealed record QuickSilverNodeOptions
{
    /// <summary>Where the GMS listens. Default 127.0.0.1:47001.</summary>
    public NetAddress Gms { get; init; } = NetAddress.Loopback(47001);

    /// <summary>The replicas of a replicated GMS (their GMS addresses, as given to each replica's <c>--peers</c>); empty
    /// (the default): the single GMS at <see cref="Gms"/>. The node talks to the leader, follows redirects and leader
    /// changes, and keeps its id and views across them (docs/membership.md, "Replicated GMS"). At most 7, no duplicates;
    /// not with <see cref="EmbeddedGms"/>.</summary>
    public IReadOnlyList<NetAddress> GmsReplicas { get; init; } = [];

    /// <summary>The GMS address a node first contacts: the first replica, or <see cref="Gms"/>.</summary>
    internal NetAddress FirstGms => GmsReplicas.Count > 0 ? GmsReplicas[0] : Gms;

    /// <summary>Run the GMS inside this node, listening on <see cref="Gms"/>. Exactly one node (or a standalone GMS) should.</summary>
    public bool EmbeddedGms { get; init; }

    /// <summary>This node's unicast address; port 0 picks a free port.</summary>
    public NetAddress Bind { get; init; } = NetAddress.Loopback(0);

    /// <summary>The core's I/O backend: <see cref="IoBackendKind.Auto"/> (the default) is epoll on Linux, the completion (SocketAsyncEventArgs) backend elsewhere.</summary>
    public IoBackendKind Backend { get; init; } = IoBackendKind.Auto;

    /// <summary>Largest datagram of the node's endpoint (data packets and control segments; a larger control message,
    /// such as a big view or token, travels as several segments). Null (the default) fits the interface:
    /// <see cref="LoopbackDatagramSize"/> (16 KiB) when <see cref="Bind"/> is a loopback address (loopback's MTU is 64 KiB,
    /// and more messages per packet is faster), otherwise <see cref="EthernetDatagramSize"/> (1,472 bytes: a 1,500-byte
    /// Ethernet MTU less the IPv4 and UDP headers). A datagram larger than the path MTU is cut into IP fragments, and
    /// losing any one fragment loses the whole datagram, so on a real network a datagram should fit one frame
    /// (docs/architecture.md).</summary>
    public int? MaxDatagramSize { get; init; }

    /// <summary>The default datagram size on a loopback <see cref="Bind"/> address: 16 KiB.</summary>
    public const int LoopbackDatagramSize = 16 * 1024;

    /// <summary>The default datagram size elsewhere: 1,472 bytes (a 1,500-byte Ethernet MTU less the IPv4 and UDP headers).</summary>
    public const int EthernetDatagramSize = 1472;

    /// <summary>The datagram size in force: <see cref="MaxDatagramSize"/>, or the interface's default.</summary>
    public int DatagramSize => MaxDatagramSize ?? (Bind.IsLoopback ? LoopbackDatagramSize : EthernetDatagramSize);

    /// <summary>Messages a group may hold for sending before <see cref="QuickSilverGroup.TryPublish"/> refuses.</summary>
    public int PublishBuffer { get; init; } = 10_000;

    /// <summary>Messages a group may hold for <see cref="QuickSilverGroup.ReadAllAsync"/> before delivery in it pauses: a
    /// reader that falls this far behind makes the node stop delivering the packets that carry the group's messages (it
    /// keeps them; nothing is dropped) until the reader has taken half of them; the node then reports less progress
    /// to the region, which is how the sender feels a slow reader. One packet's messages may take the queue a little
    /// beyond this bound. Not used by a group with <see cref="QuickSilverGroup.QueueMessages"/> off.</summary>
    public int ReceiveBuffer { get; init; } = 65_536;

    /// <summary>Fraction of datagrams this node's endpoint drops on receipt on purpose (counted as InjectedLoss), to
    /// measure loss recovery over real sockets; passed to <see cref="UdpEndpointOptions.InjectedLossRate"/>. Not applied
    /// to an embedded GMS's endpoint. 0 (the default) in production.</summary>
    public double InjectedLossRate { get; init; }

    /// <summary>Where the node's core, its protocol layers and an embedded GMS log (Microsoft.Extensions.Logging;
    /// categories "QuickSilver.Core", "QuickSilver.Protocol", "QuickSilver.Gms", "QuickSilver.Node"). Null (the default):
    /// nowhere. On the generic host, <c>AddQuickSilver</c> passes the host's factory; with Serilog, pass
    /// <c>new SerilogLoggerFactory(Log.Logger)</c> (Serilog.Extensions.Logging), as qs and the samples do.</summary>
    public Microsoft.Extensions.Logging.ILoggerFactory? LoggerFactory { get; init; }

    /// <summary>Where the node's meters ("QuickSilver.Core", "QuickSilver.Qsm") come from: the host's
    /// <see cref="System.Diagnostics.Metrics.IMeterFactory"/> (<c>AddQuickSilver</c> passes the one in dependency
    /// injection), or null (the default) for meters of the node's own. Either way <c>dotnet-counters</c> and
    /// OpenTelemetry see them by name (docs/ecosystem.md).</summary>
    public System.Diagnostics.Metrics.IMeterFactory? MeterFactory { get; init; }

    /// <summary>Trace publishing and delivery as activities of the "QuickSilver" <see cref="System.Diagnostics.ActivitySource"/>
    /// (<see cref="QuickSilverTelemetry"/>). Off by default: then the per-message path does not look at the source at all;
    /// on, it starts an activity per message only while a listener samples it (docs/ecosystem.md, "Telemetry").</summary>
    public bool Tracing { get; init; }

    /// <summary>The QSM region protocol's options (R, token interval, window, FIFO delivery, …; docs/qsm.md).</summary>
    public RegionOptions Region { get; init; } = new();

    /// <summary>The paper's rate control (k, Δ, λ, μ_min, ρ, C, C_low, C_high, Δ_max; docs/qsm.md).</summary>
    public RateControlOptions RateControl { get; init; } = new();

    /// <summary>The embedded GMS's options (batching, heartbeats, multicast pool, limits); used only with <see cref="EmbeddedGms"/>.</summary>
    public GmsOptions GmsServer { get; init; } = new();

    /// <summary>Authentication (and optional encryption) of every datagram this node, and its embedded GMS, sends and
    /// receives: <see cref="DatagramSecurityOptions.Mode"/> and the <see cref="DatagramSecurityOptions.ClusterSecret"/>
    /// every node and the GMS share. Off by default; a node whose secret or mode differs from the cluster's cannot
    /// register or exchange anything with it (docs/security.md, "Datagram authentication").</summary>
    public DatagramSecurityOptions Security { get; init; } = new();

    /// <summary>The AER/NCA layer's timers and bounds (docs/aer.md, "Options"), used by this node's AER groups
    /// (<see cref="GroupTransport.Aer"/>) and repair servers.</summary>
    public AerOptions Aer { get; init; } = new();

    /// <summary>Repair servers this node runs for AER sessions, from start to dispose (the builder option of issue 15;
    /// `qs repair-server` runs one in a process of its own). A node with a repair server for a session cannot also join
    /// that session's group. Empty by default.</summary>
    public IReadOnlyList<AerRepairServerOptions> RepairServers { get; init; } = [];

    /// <summary>Capacity of the core's downcall queue (<see cref="CoreOptions.DowncallQueueCapacity"/>, rounded up to a
    /// power of two): work application threads hand the core thread (publish wake-ups, feed signals, resumes, calls).
    /// At the bound the calling application thread waits until the core makes room (back-pressure), counted in the
    /// core's <c>DowncallsRefused</c>. Default 65,536; 2 to 2^24.</summary>
    public int DowncallQueueCapacity { get; init; } = 65_536;

    /// <summary>Datagrams that may wait in the send ring of the node's endpoint (and of an embedded GMS's), in native
    /// memory of <see cref="DatagramSize"/> bytes each (<see cref="UdpEndpointOptions.SendQueueCapacity"/>). At the bound
    /// feeds are not pulled (back-pressure) and a direct send is refused and counted (<c>SendQueueFull</c>). Default 256;
    /// 1 to 65,536.</summary>
    public int SendQueueCapacity { get; init; } = 256;

    /// <summary>SO_RCVBUF asked for the node's sockets, in bytes (the kernel may cap it;
    /// <see cref="UdpEndpointOptions.SocketReceiveBufferBytes"/>). Default 4 MiB; 4 KiB to 1 GiB.</summary>
    public int SocketReceiveBufferBytes { get; init; } = 4 << 20;

    /// <summary>SO_SNDBUF asked for the node's sockets, in bytes (the kernel may cap it;
    /// <see cref="UdpEndpointOptions.SocketSendBufferBytes"/>). Default 1 MiB; 4 KiB to 1 GiB.</summary>
    public int SocketSendBufferBytes { get; init; } = 1 << 20;

    /// <summary>The control channel's reliable unicast (to the GMS, tokens, NAKs, ACKs) of this node and of its embedded
    /// GMS: its bounds (<see cref="ReliableUnicastOptions.MaxPeers"/>, <see cref="ReliableUnicastOptions.MaxConnectionsPerIp"/>,
    /// <see cref="ReliableUnicastOptions.SendBufferSegments"/>, <see cref="ReliableUnicastOptions.MaxMessageBytes"/>,
    /// timeouts) and timers (docs/reliable-unicast.md; docs/security.md, "Bounds"). Segments are sized to
    /// <see cref="DatagramSize"/> unless <see cref="ReliableUnicastOptions.MaxSegmentBytes"/> is set smaller.</summary>
    public ReliableUnicastOptions ReliableUnicast { get; init; } = new();

    /// <summary>The options of the node's endpoint bound at <paramref name="bind"/> (and of an embedded GMS's).</summary>
    internal UdpEndpointOptions EndpointOptions(NetAddress bind) => new()
    {
        Bind = bind,
        MaxDatagramSize = DatagramSize,
        SendQueueCapacity = SendQueueCapacity,
        SocketReceiveBufferBytes = SocketReceiveBufferBytes,
        SocketSendBufferBytes = SocketSendBufferBytes,
    };

    /// <summary>The reliable unicast options in force: <see cref="ReliableUnicast"/> with segments sized to the datagrams
    /// when its segment size was left at the default.</summary>
    internal ReliableUnicastOptions EffectiveReliableUnicast
    {
        get
        {
            int fits = QuickSilver.Qsm.QsmStack.SegmentBytesFor(DatagramSize, Security);
            return ReliableUnicast.MaxSegmentBytes == ReliableUnicastOptions.DefaultMaxSegmentBytes
                ? ReliableUnicast with { MaxSegmentBytes = fits }
                : ReliableUnicast;
        }
    }

    /// <summary>Throws <see cref="ArgumentException"/> (or <see cref="ArgumentOutOfRangeException"/>) naming the first invalid
    /// option; <see cref="QuickSilverNode.StartAsync"/> and the hosting package's start-up validation call it.</summary>
    public void Validate()
    {
        if (Gms.IsMulticast || Gms.Port == 0)
        {
            throw new ArgumentException($"QuickSilverNodeOptions.Gms must be a unicast address with a port, got {Gms}.", nameof(Gms));
        }

        ArgumentNullException.ThrowIfNull(GmsReplicas, nameof(GmsReplicas));
        GmsOptions.ValidateReplicas(GmsReplicas, $"QuickSilverNodeOptions.{nameof(GmsReplicas)}");
        if (EmbeddedGms && GmsReplicas.Count > 0)
        {
            throw new ArgumentException("QuickSilverNodeOptions.EmbeddedGms runs a single GMS in the node; it cannot be combined with GmsReplicas (run the replicas with `qs gms --id N --peers ...`).", nameof(GmsReplicas));
        }

        if (Bind.IsMulticast)
        {
            throw new ArgumentException($"QuickSilverNodeOptions.Bind must be a unicast address, got {Bind}.", nameof(Bind));
        }

        if (MaxDatagramSize is { } size)
        {
            OptionChecks.InRange(size, 1024, 65507, $"QuickSilverNodeOptions.{nameof(MaxDatagramSize)}");
        }

        OptionChecks.InRange(InjectedLossRate, 0, 1, $"QuickSilverNodeOptions.{nameof(InjectedLossRate)}");
        OptionChecks.InRange(PublishBuffer, 1, 1 << 24, $"QuickSilverNodeOptions.{nameof(PublishBuffer)}");
        OptionChecks.InRange(ReceiveBuffer, 2, 1 << 24, $"QuickSilverNodeOptions.{nameof(ReceiveBuffer)}");
        OptionChecks.InRange(DowncallQueueCapacity, 2, 1 << 24, $"QuickSilverNodeOptions.{nameof(DowncallQueueCapacity)}");
        OptionChecks.InRange(SendQueueCapacity, 1, 1 << 16, $"QuickSilverNodeOptions.{nameof(SendQueueCapacity)}");
        OptionChecks.InRange(SocketReceiveBufferBytes, 4096, 1 << 30, $"QuickSilverNodeOptions.{nameof(SocketReceiveBufferBytes)}");
        OptionChecks.InRange(SocketSendBufferBytes, 4096, 1 << 30, $"QuickSilverNodeOptions.{nameof(SocketSendBufferBytes)}");
        ArgumentNullException.ThrowIfNull(ReliableUnicast, nameof(ReliableUnicast));
        ArgumentNullException.ThrowIfNull(Region, nameof(Region));
        ArgumentNullException.ThrowIfNull(RateControl, nameof(RateControl));
        ArgumentNullException.ThrowIfNull(GmsServer, nameof(GmsServer));
        ArgumentNullException.ThrowIfNull(Security, nameof(Security));
        Security.Validate($"QuickSilverNodeOptions.{nameof(Security)}");
        int segmentFits = QuickSilver.Qsm.QsmStack.SegmentBytesFor(DatagramSize, Security);
        if (ReliableUnicast.MaxSegmentBytes > segmentFits)
        {
            throw new ArgumentOutOfRangeException($"QuickSilverNodeOptions.{nameof(ReliableUnicast)}.{nameof(ReliableUnicastOptions.MaxSegmentBytes)}", ReliableUnicast.MaxSegmentBytes,
                $"QuickSilverNodeOptions.ReliableUnicast.MaxSegmentBytes ({ReliableUnicast.MaxSegmentBytes}) must fit the node's datagrams: at most {segmentFits} with a datagram size of {DatagramSize}.");
        }

        EffectiveReliableUnicast.Validate($"QuickSilverNodeOptions.{nameof(ReliableUnicast)}");
        Region.Validate();
        RateControl.Validate();
        GmsServer.Validate();
        ArgumentNullException.ThrowIfNull(Aer, nameof(Aer));
        Aer.Validate();
        ArgumentNullException.ThrowIfNull(RepairServers, nameof(RepairServers));
        var sessions = new HashSet<uint>();
        foreach (var server in RepairServers)
        {
            ArgumentNullException.ThrowIfNull(server, nameof(RepairServers));
            server.Validate();
            if (!sessions.Add(server.Session))
            {
                throw new ArgumentException($"QuickSilverNodeOptions.RepairServers lists AER session {server.Session} twice: a node runs one repair server per session.", nameof(RepairServers));
            }
        }
    }
}
