using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Routing;

/// <summary>
/// The best route to every known gateway, one table per <see cref="RouteMetric"/> (seed §5.1). Written only by
/// <see cref="PathVectorRouter"/>; read by tree building (which owner gateways are reachable, through whom) and by
/// <c>qs sessions</c>.
/// </summary>
public sealed class RouteTable
{
    private readonly Dictionary<GatewayId, Route>[] _best = [new(), new(), new()];

    public int Count(RouteMetric metric) => _best[(int)metric].Count;

    public Route? Best(RouteMetric metric, GatewayId destination)
        => _best[(int)metric].TryGetValue(destination, out var route) ? route : null;

    public IEnumerable<Route> Routes(RouteMetric metric) => _best[(int)metric].Values;

    /// <summary>The best routes to every gateway of <paramref name="island"/>, best first.</summary>
    public List<Route> ToIsland(RouteMetric metric, IslandId island)
    {
        var list = _best[(int)metric].Values.Where(r => r.DestinationIsland == island).ToList();
        list.Sort((a, b) => a.IsBetterThan(b) ? -1 : b.IsBetterThan(a) ? 1 : 0);
        return list;
    }

    internal bool Set(Route route)
    {
        var table = _best[(int)route.Metric];
        if (table.TryGetValue(route.Destination, out var old) && old.SameAs(route))
        {
            return false;
        }

        table[route.Destination] = route;
        return true;
    }

    internal bool Remove(RouteMetric metric, GatewayId destination) => _best[(int)metric].Remove(destination);
}
