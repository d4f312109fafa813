using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;

namespace QuickSilver.Federation.Trees;

/// <summary>
/// One session's tree state at one gateway (seed §5.2.3, Figure 6): the upstream peer toward the owner island, the
/// downstream peers, and whether clients of our own island want the session, all soft state with expiry times that
/// JOINs refresh. Plus the data-path state: our flow labels (one per flow, unique at this gateway), the upstream's
/// labels from its TRANSLATION, and the native channels. The owner island's gateways are roots: no upstream, the
/// native session is their source.
/// </summary>
public sealed class SessionTree(SessionName name, bool isRoot, FlowLabel[] labels)
{
    public SessionName Name { get; } = name;

    public bool IsRoot { get; } = isRoot;

    /// <summary>Our labels, flow order: downstream peers tag data from us with these, and we recognise them.</summary>
    public FlowLabel[] Labels { get; } = labels;

    public GatewayId? Upstream { get; set; }

    /// <summary>The owner-island gateway this tree joins toward (SROUTE's choice; default = any).</summary>
    public GatewayId Target { get; set; }

    /// <summary>The upstream's labels, null until its TRANSLATION arrives.</summary>
    public FlowLabel[]? UpstreamLabels { get; set; }

    public TimeSpan LastJoinSent { get; set; }

    public Dictionary<GatewayId, TimeSpan> Downstream { get; } = [];

    /// <summary>Until when clients of our island want the session (null: none).</summary>
    public TimeSpan? LocalUntil { get; set; }

    /// <summary>Down channels (data into our island), when local clients asked.</summary>
    public NativeChannel[]? LocalChannels { get; set; }

    /// <summary>Up channels (the native session in the owner island), roots only.</summary>
    public NativeChannel[]? RootChannels { get; set; }

    /// <summary>Per tree neighbour, the data node that handles this session there (its DATA_ENDPOINT; absent or 0: the
    /// neighbour itself). Bounded by the neighbours.</summary>
    public Dictionary<GatewayId, uint> PeerEndpoints { get; } = [];

    /// <summary>Per-receiver delivery: our island's numbered receivers and until when (soft state, like <see cref="LocalUntil"/>).</summary>
    public Dictionary<uint, TimeSpan> LocalReceivers { get; } = [];

    /// <summary>Per-receiver delivery: the receivers each downstream peer reported (RECEIVERS).</summary>
    public Dictionary<GatewayId, HashSet<Peering.ReceiverId>> ReceiversBehind { get; } = [];

    /// <summary>The receiver list last reported upstream (null: not yet, or the upstream changed).</summary>
    public Peering.ReceiverId[]? ReceiversReported { get; set; }

    /// <summary>CoreCast: per flow, the payload last received (its hash and bytes): one per channel, never per receiver.</summary>
    public (byte[] Hash, byte[] Data)?[]? CoreCastPayloads { get; set; }

    /// <summary>CoreCast: per (downstream peer, flow), the hash of the payload last sent there (Algorithm 1's "served").</summary>
    public Dictionary<(GatewayId, int), byte[]> CoreCastServed { get; } = [];

    public bool HasInterest => Downstream.Count > 0 || LocalUntil is not null;
}
