using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Routing;

/// <summary>
/// One route to one gateway in one metric's table: the seed's [Destination, Cost, Next-hop] plus the path vector.
/// <see cref="Path"/> lists the gateways from the next hop to the destination (empty for the route to ourselves), so a
/// route advertised to a peer carries [self, ..Path] and a peer finding itself in a path drops the route (no loops).
/// </summary>
public sealed record Route(RouteMetric Metric, GatewayId Destination, IslandId DestinationIsland, uint Cost, GatewayId NextHop, GatewayId[] Path)
{
    /// <summary>Better-than order: lower cost, then shorter path, then lower next-hop number (deterministic ties).</summary>
    public bool IsBetterThan(Route other)
        => Cost != other.Cost ? Cost < other.Cost
            : Path.Length != other.Path.Length ? Path.Length < other.Path.Length
            : NextHop.Value < other.NextHop.Value;

    public bool SameAs(Route? other)
        => other is not null && other.Cost == Cost && other.NextHop == NextHop && other.DestinationIsland == DestinationIsland && other.Path.AsSpan().SequenceEqual(Path);

    public override string ToString() => $"{Metric} {Destination}@{DestinationIsland} cost {Cost} via {NextHop} [{string.Join(' ', Path)}]";
}

/// <summary>A route as a peer advertises it: (destination, cost, path), the path starting with the advertiser.</summary>
public readonly record struct RouteAdvert(RouteMetric Metric, GatewayId Destination, IslandId DestinationIsland, uint Cost, GatewayId[] Path);

/// <summary>A withdrawal: the advertiser no longer has a route to <see cref="Destination"/> in <see cref="Metric"/>'s table.</summary>
public readonly record struct RouteWithdrawal(RouteMetric Metric, GatewayId Destination);

/// <summary>One ROUTE_UPDATE frame's content: withdrawals, then announcements (the first update after a link comes up
/// is the whole filtered table; later ones are incremental, seed §5.1).</summary>
public sealed class RouteUpdate
{
    public List<RouteWithdrawal> Withdrawals { get; } = [];

    public List<RouteAdvert> Adverts { get; } = [];

    public bool IsEmpty => Withdrawals.Count == 0 && Adverts.Count == 0;

    public int Count => Withdrawals.Count + Adverts.Count;
}
