using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using Microsoft.Extensions.Logging;

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

    /// <summary>Datagram authentication and encryption of the whole stack; null: off.</summary>
    public DatagramSecurityOptions? Security { get; init; }

    /// <summary>The wide-area recovery layer beside the region layer (the AER layer, which the public face makes: this
    /// project does not know it); null: none. Groups choose between the two (docs/aer.md, "Per group in
    /// QuickSilverNode").</summary>
    public IProtocolLayer? WideArea { get; init; }
}

/// <summary>
/// The one place QuickSilver's stacks are assembled (docs/architecture.md). Every stack is built here, bottom first,
/// so a reader sees each as one list:
/// <code>
/// node:        transport → reliable unicast → membership (GMS client) → QSM region [+ AER] → QSM group → application
/// region sim:  transport → reliable unicast → QSM region        (views installed by the simulation, no GMS)
/// GMS:         transport → reliable unicast → GMS server
/// </code>
/// The real node (QuickSilverNode), the whole-stack simulation (NodeCluster), the region simulation (RegionCluster)
/// and the embedded or standalone GMS all call these. With security on, the transport under every layer is the
/// <see cref="SecureTransport"/> around the endpoint. Call on the core thread that owns the transport.
/// </summary>
internal static class QsmStack
{
    /// <summary>A node: reliable unicast, the GMS client, the region layer (and, when given, the wide-area layer beside
    /// it: <see cref="QsmStackOptions.WideArea"/>) and the group layer.</summary>
    public static ProtocolStack BuildNode(IDatagramTransport transport, IAlarmScheduler scheduler, QsmStackOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        ArgumentNullException.ThrowIfNull(options);
        var builder = new StackBuilder(transport, scheduler, log)
            .Secure(options.Security)
            .Add(new ReliableUnicast(options.Epoch, ReliableOptions(transport, options.Reliable, options.Security)))
            .Add(new MembershipLayer(options.Gms, options.Epoch, options.GmsClient))
            .Add(new RegionLayer(options.Region, options.RateControl));
        if (options.WideArea is { } wideArea)
        {
            builder.Add(wideArea);
        }

        return builder.Add(new GroupLayer()).Build();
    }

    /// <summary>A region-only stack (the region simulation): reliable unicast and the region layer, node id given.</summary>
    public static ProtocolStack BuildRegion(IDatagramTransport transport, IAlarmScheduler scheduler, uint node, QsmStackOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        ArgumentNullException.ThrowIfNull(options);
        var stack = new StackBuilder(transport, scheduler, log)
            .Secure(options.Security)
            .Add(new ReliableUnicast(options.Epoch, ReliableOptions(transport, options.Reliable, options.Security)))
            .Add(new RegionLayer(options.Region, options.RateControl))
            .Build();
        stack.Get<RegionLayer>().SetNode(node);
        return stack;
    }

    /// <summary>A GMS: reliable unicast and the GMS server.</summary>
    public static ProtocolStack BuildGms(IDatagramTransport transport, IAlarmScheduler scheduler, uint epoch, ulong gmsEpoch, GmsOptions options,
        ReliableUnicastOptions? reliable = null, ILogger? logger = null, RateLimitedLog? log = null, DatagramSecurityOptions? security = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        return new StackBuilder(transport, scheduler, log)
            .Secure(security)
            .Add(new ReliableUnicast(epoch, ReliableOptions(transport, reliable, security)))
            .Add(new GmsServerLayer(gmsEpoch, options, logger))
            .Build();
    }

    /// <summary>Segments sized to the transport's datagrams (64 bytes left for headers, and the security trailer's room) unless given.</summary>
    private static ReliableUnicastOptions ReliableOptions(IDatagramTransport transport, ReliableUnicastOptions? given, DatagramSecurityOptions? security)
        => given ?? new ReliableUnicastOptions { MaxSegmentBytes = SegmentBytesFor(transport.MaxDatagramSize, security) };

    /// <summary>The largest reliable segment in datagrams of <paramref name="maxDatagramSize"/> bytes: 64 bytes left for
    /// headers, and the security trailer's room when datagrams are sealed.</summary>
    internal static int SegmentBytesFor(int maxDatagramSize, DatagramSecurityOptions? security)
        => maxDatagramSize - 64 - (security is { Enabled: true } ? DatagramSealer.OverheadOf(security.Cipher) : 0);
}
