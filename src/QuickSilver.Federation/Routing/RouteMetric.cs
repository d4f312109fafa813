namespace QuickSilver.Federation.Routing;

/// <summary>
/// The routing metrics, one routing table each (seed §5.1: "instead of fixing one routing metric for the entire
/// federation … it constructs a collection of routing tables, one for each metric of interest"). Every metric is an
/// additive cost; <see cref="RouteCost.Infinite"/> means "do not route this kind of session through me".
/// A session picks its table with the <c>metric=</c> parameter of its name.
/// </summary>
public enum RouteMetric : byte
{
    Hops = 0,
    Latency = 1,
    Bandwidth = 2,
}

/// <summary>Route-cost helpers.</summary>
public static class RouteCost
{
    /// <summary>Unreachable: a route at or above this cost is never installed (a peer may advertise it to opt out of transit).</summary>
    public const uint Infinite = uint.MaxValue;

    public const int MetricCount = 3;

    /// <summary>Adds without overflowing past <see cref="Infinite"/>.</summary>
    public static uint Add(uint a, uint b) => (ulong)a + b >= Infinite ? Infinite : a + b;
}

/// <summary>The per-metric cost of one peering link, configured by the administrator (hops is 1 by default).</summary>
public readonly record struct LinkCosts(uint Hops, uint Latency, uint Bandwidth)
{
    public static LinkCosts Default => new(1, 1, 1);

    public uint Of(RouteMetric metric) => metric switch
    {
        RouteMetric.Hops => Hops,
        RouteMetric.Latency => Latency,
        _ => Bandwidth,
    };
}
