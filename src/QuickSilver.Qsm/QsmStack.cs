using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using Serilog;

namespace QuickSilver.Qsm;

/// <summary>What a QSM node stack is made of: its incarnation, where its GMS is, and the options of each layer.</summary>
internal sealed record QsmStackOptions
{
    /// <summary>This node's incarnation: non-zero, different after a restart (random in production, seeded in simulation).</summary>
    public uint Epoch { get; init; } = 1;

    /// <summary>The GMS's address (node stacks).</summary>
    public NetAddress Gms { get; init; } = NetAddress.Loopback(47001);

    public RegionOptions Region { get; init; } = new();

    public RateControlOptions RateControl { get; init; } = new();

    /// <summary>Reliable unicast options; null: the defaults with segments sized to the transport's datagrams.</summary>
    public ReliableUnicastOptions? Reliable { get; init; }

    public GmsClientOptions? GmsClient { get; init; }
}

/// <summary>
/// The one place QuickSilver's stacks are assembled (docs/architecture.md). Every stack is built here, bottom first,
/// so a reader sees each as one list:
/// <code>
/// node:        transport → reliable unicast → membership (GMS client) → QSM region → QSM group → application
/// region sim:  transport → reliable unicast → QSM region        (views installed by the simulation, no GMS)
/// GMS:         transport → reliable unicast → GMS server
/// </code>
/// The real node (QuickSilverNode), the whole-stack simulation (NodeCluster), the region simulation (RegionCluster)
/// and the embedded or standalone GMS all call these. Call on the core thread that owns the transport.
/// </summary>
internal static class QsmStack
{
    /// <summary>A node: reliable unicast, the GMS client, the region layer and the group layer.</summary>
    public static ProtocolStack BuildNode(IDatagramTransport transport, IAlarmScheduler scheduler, QsmStackOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        ArgumentNullException.ThrowIfNull(options);
        return new StackBuilder(transport, scheduler, log)
            .Add(new ReliableUnicast(options.Epoch, ReliableOptions(transport, options.Reliable)))
            .Add(new MembershipLayer(options.Gms, options.Epoch, options.GmsClient))
            .Add(new RegionLayer(options.Region, options.RateControl))
            .Add(new GroupLayer())
            .Build();
    }

    /// <summary>A region-only stack (the region simulation): reliable unicast and the region layer, node id given.</summary>
    public static ProtocolStack BuildRegion(IDatagramTransport transport, IAlarmScheduler scheduler, uint node, QsmStackOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        ArgumentNullException.ThrowIfNull(options);
        var stack = new StackBuilder(transport, scheduler, log)
            .Add(new ReliableUnicast(options.Epoch, ReliableOptions(transport, options.Reliable)))
            .Add(new RegionLayer(options.Region, options.RateControl))
            .Build();
        stack.Get<RegionLayer>().SetNode(node);
        return stack;
    }

    /// <summary>A GMS: reliable unicast and the GMS server.</summary>
    public static ProtocolStack BuildGms(IDatagramTransport transport, IAlarmScheduler scheduler, uint epoch, ulong gmsEpoch, GmsOptions options,
        ReliableUnicastOptions? reliable = null, ILogger? logger = null, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        return new StackBuilder(transport, scheduler, log)
            .Add(new ReliableUnicast(epoch, ReliableOptions(transport, reliable)))
            .Add(new GmsServerLayer(gmsEpoch, options, logger))
            .Build();
    }

    /// <summary>Segments sized to the transport's datagrams (64 bytes left for headers) unless given.</summary>
    private static ReliableUnicastOptions ReliableOptions(IDatagramTransport transport, ReliableUnicastOptions? given)
        => given ?? new ReliableUnicastOptions { MaxSegmentBytes = transport.MaxDatagramSize - 64 };
}
