using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Routing;

/// <summary>What a peering link is: to a gateway of another island (external) or of our own (internal, full mesh).</summary>
public enum PeerKind : byte
{
    External = 0,
    Internal = 1,
}

/// <summary>The peer a policy decides about.</summary>
public readonly record struct PeerInfo(GatewayId Gateway, IslandId Island, PeerKind Kind);

/// <summary>
/// Policy filters on routing information (seed §5.1: "hooks for implementing policies based upon peering agreements"):
/// <see cref="Import"/> runs on every advert received before it enters the table, <see cref="Export"/> on every best
/// route before it is advertised to a peer. A route refused on export is withdrawn from that peer if it had it.
/// </summary>
public interface IRoutePolicy
{
    bool Import(PeerInfo from, in RouteAdvert advert);

    bool Export(PeerInfo to, Route route);
}

/// <summary>Accepts and advertises everything.</summary>
public sealed class OpenPolicy : IRoutePolicy
{
    public static readonly OpenPolicy Instance = new();

    public bool Import(PeerInfo from, in RouteAdvert advert) => true;

    public bool Export(PeerInfo to, Route route) => true;
}

/// <summary>
/// "A BN may not wish to act as a transit network for other BNs" (seed §5.1): to external peers, advertise only routes
/// to gateways of our own island; internal peers get everything. Optionally refuse adverts from listed islands.
/// </summary>
public sealed class NoTransitPolicy(IslandId home, IReadOnlySet<IslandId>? refuseFrom = null) : IRoutePolicy
{
    public bool Import(PeerInfo from, in RouteAdvert advert) => refuseFrom is null || !refuseFrom.Contains(from.Island);

    public bool Export(PeerInfo to, Route route) => to.Kind == PeerKind.Internal || route.DestinationIsland == home;
}
