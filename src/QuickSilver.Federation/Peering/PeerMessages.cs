using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Peering;

/// <summary>A decoded control frame. Data frames are not decoded into objects (see <see cref="Forwarding.DataHeader"/>).</summary>
public abstract record PeerMessage;

/// <summary>First frame on a link, both ways: who I am, which island I belong to, and the UDP port (on the link's
/// address) that takes my real-time DATA datagrams (0: none, send them on the link).</summary>
public sealed record HelloMessage(GatewayId Gateway, IslandId Island, ushort UdpPort = 0) : PeerMessage;

public sealed record KeepAliveMessage : PeerMessage
{
    public static readonly KeepAliveMessage Instance = new();
}

public sealed record RouteUpdateMessage(RouteUpdate Update) : PeerMessage;

/// <summary>SROUTE_REQUEST (seed §5.2.2): sent toward <see cref="Target"/>, an owner-island gateway, listing every
/// owner-island gateway the requester knows. <see cref="Trail"/> starts with the requester and grows by one per hop;
/// the response walks it back.</summary>
public sealed record SrouteRequestMessage(uint RequestId, SessionName Session, GatewayId Target, GatewayId[] OwnerGateways, GatewayId[] Trail) : PeerMessage;

/// <summary>One SROUTE cost: how far the root of the owner island's native tree is from <see cref="Gateway"/>.</summary>
public readonly record struct SrouteCost(GatewayId Gateway, uint Cost);

/// <summary>SROUTE_RESPONSE: the owner gateway's costs (empty = the island exposes nothing, the seed's "null response"),
/// sent back along <see cref="Trail"/>.</summary>
public sealed record SrouteResponseMessage(uint RequestId, SessionName Session, SrouteCost[] Costs, GatewayId[] Trail) : PeerMessage;

/// <summary>JOIN (seed §5.2.3): subscribe the sender to the session's tree. <see cref="TargetOwner"/> is the owner-island
/// gateway SROUTE chose (0: any). <see cref="Trail"/> lists the gateways the JOIN has crossed; a gateway finding itself
/// there answers NO_ROUTE instead of forwarding (a JOIN never loops). Periodic JOINs refresh the soft state.</summary>
public sealed record JoinMessage(SessionName Session, GatewayId TargetOwner, GatewayId[] Trail) : PeerMessage;

/// <summary>TRANSLATION across a peering link: the upstream's flow label for each flow of the session, in flow order.</summary>
public sealed record TranslationMessage(SessionName Session, FlowLabel[] Labels) : PeerMessage;

public sealed record LeaveMessage(SessionName Session) : PeerMessage;

/// <summary>NO_ROUTE: the upstream cannot reach the owner island (or the JOIN would loop); the tree state is dropped.</summary>
public sealed record NoRouteMessage(SessionName Session) : PeerMessage;

/// <summary>DATA_ENDPOINT (ours, for the clustered gateway): the sender's data node that handles
/// <see cref="Session"/>; the receiver sends that session's DATA toward it instead of toward the sender's control node.
/// <see cref="Node"/> 0 means the sender itself (an unclustered gateway). <see cref="Address"/>: where that data node
/// takes DATA (UDP datagrams and TCP bulk data channels), when the sender knows it; null: resolve the number by
/// configuration.</summary>
public sealed record DataEndpointMessage(SessionName Session, uint Node, System.Net.IPEndPoint? Address = null) : PeerMessage;

/// <summary>CAPABILITIES (ours): sent once after HELLO. Bit 0 of <see cref="Flags"/>: the sender takes CoreCast frames
/// (payload once, then headers). A peer that never sends it gets per-receiver sessions as plain unicast.</summary>
public sealed record CapabilitiesMessage(uint Flags) : PeerMessage
{
    public const uint CoreCast = 1;
}

/// <summary>One receiver of a per-receiver session: the egress gateway that delivers to it and its number there.</summary>
public readonly record struct ReceiverId(GatewayId Egress, uint Receiver);

/// <summary>RECEIVERS (ours, for per-receiver delivery): downstream → upstream, every receiver of the session behind the
/// sender (its own island's and those its downstream peers reported), replacing the previous list.</summary>
public sealed record ReceiversMessage(SessionName Session, ReceiverId[] Receivers) : PeerMessage;

/// <summary>DATA_CHANNEL: the first frame of a bulk data channel, naming its sender: a gateway (<see cref="Node"/> 0)
/// or one of its data nodes. Every later frame on the channel must be DATA.</summary>
public sealed record DataChannelMessage(GatewayId Gateway, uint Node) : PeerMessage;

/// <summary>PEER_AUTH: the first frame both ways between gateways that share a peering secret: who sends, and its fresh
/// nonce for this connection (<see cref="PeeringHandshake"/>).</summary>
public sealed record PeerAuthMessage(GatewayId Gateway, byte[] Nonce) : PeerMessage;
