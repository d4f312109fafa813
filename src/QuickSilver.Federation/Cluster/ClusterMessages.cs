using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Cluster;

/// <summary>The control↔data-node frame types (docs/federation.md, "Clustered gateway"). Byte 1 of every frame.</summary>
public enum ClusterFrameType : byte
{
    Heartbeat = 1,
    Assign = 2,
    Release = 3,
    Reset = 4,

    /// <summary>Active control node → data nodes and the other control node, every heartbeat interval: "I lead term T".</summary>
    Lead = 5,

    /// <summary>Data node → control nodes, when it starts following a newer term: the sessions it holds (placement
    /// adoption by a control node that took over).</summary>
    Report = 6,
}

/// <summary>A decoded control↔data-node frame. <see cref="Term"/>: the control term (docs/federation.md, "Standby
/// control node"): a control node stamps the term it leads, a data node the highest term it follows; 0 = none yet.</summary>
public abstract record ClusterMessage(uint Node)
{
    public uint Term { get; init; }
}

/// <summary>Data node → control node: alive, how many sessions it holds, packets it forwarded (mod 2^32).</summary>
public sealed record HeartbeatMessage(uint Node, uint Sessions, uint Forwarded) : ClusterMessage(Node)
{
    /// <summary>The data node heard a frame from the leader of <see cref="ClusterMessage.Term"/> within two heartbeat
    /// intervals (the standby's second witness that the primary lives).</summary>
    public bool LeaderHeard { get; init; }
}

/// <summary>A downstream tree neighbour of a session: its gateway number and the data node that receives the session
/// there (0: the gateway itself).</summary>
public readonly record struct DownstreamPeer(GatewayId Gateway, uint Endpoint);

/// <summary>Where data node <see cref="Node"/> of the peer gateway <see cref="Gateway"/> takes DATA, as that peer
/// announced in DATA_ENDPOINT (so data nodes need no <c>--peer-data-node</c> configuration for it).</summary>
public readonly record struct PeerDataNodeAddress(GatewayId Gateway, uint Node, System.Net.IPEndPoint Address);

/// <summary>
/// Control node → data node (the seed's subscribe_down / allocate / subscribe_up folded into one idempotent message):
/// the whole data-path state of one session, re-sent whenever it changes and every
/// <see cref="ClusterOptions.AssignRefresh"/>. <see cref="Labels"/> are the gateway's own flow labels; the upstream
/// and its labels (empty until its TRANSLATION arrived); the downstream peers; the native addresses of the Down
/// channels (local clients; empty when none) and of the Up channels (roots only); the addresses of the peers' data nodes
/// named above, where the control node learnt them (<see cref="PeerNodes"/>, at most one per named data node).
/// </summary>
public sealed record AssignMessage(
    uint Node,
    uint SequenceBase,
    SessionName Session,
    bool Root,
    FlowLabel[] Labels,
    GatewayId Upstream,
    uint UpstreamEndpoint,
    FlowLabel[] UpstreamLabels,
    DownstreamPeer[] Downstream,
    string[] LocalAddresses,
    string[] RootAddresses,
    PeerDataNodeAddress[]? PeerNodes = null) : ClusterMessage(Node)
{
    public PeerDataNodeAddress[] PeerNodes { get; init; } = PeerNodes ?? [];
}

/// <summary>Control node → data node: stop forwarding <see cref="Session"/> and release its native channels.</summary>
public sealed record ReleaseMessage(uint Node, SessionName Session) : ClusterMessage(Node);

/// <summary>Control node → data node: drop every session (sent to a node the control node had declared dead).</summary>
public sealed record ResetMessage(uint Node) : ClusterMessage(Node);

/// <summary>Active control node → a data node (<see cref="ClusterMessage.Node"/> = its number) or the other control node
/// (<see cref="ClusterMessage.Node"/> = the gateway's number): the sender leads <see cref="ClusterMessage.Term"/>.</summary>
public sealed record LeadMessage(uint Node) : ClusterMessage(Node);

/// <summary>One session a data node holds, as it reports it: the name, the gateway's flow labels for it, and the
/// native addresses of its Down channels (local clients; empty when none).</summary>
public sealed record ReportedSession(SessionName Session, FlowLabel[] Labels, string[]? LocalAddresses = null)
{
    public string[] LocalAddresses { get; init; } = LocalAddresses ?? [];
}

/// <summary>Data node → control nodes, when it starts following a newer term: the sessions it holds and the next
/// sequence number it stamps (a control node that took over keeps sessions where they are, with their labels, and gives
/// a restarted node a sequence base above it). A node with many sessions sends several, each complete in itself.</summary>
public sealed record ReportMessage(uint Node, uint NextSequence, ReportedSession[] Sessions) : ClusterMessage(Node);
