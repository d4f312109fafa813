using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Routing;

/// <summary>Where the router's updates go: the gateway turns each into a ROUTE_UPDATE frame on the peering link.</summary>
public interface IRouterOutput
{
    void SendRouteUpdate(GatewayId peer, RouteUpdate update);
}

/// <summary>Router bounds.</summary>
public sealed record RouterOptions
{
    /// <summary>Destinations (gateways) kept per metric table; adverts for more are dropped and counted.</summary>
    public int MaxDestinations { get; init; } = 4096;

    /// <summary>Longest path vector accepted (the wire format also caps it).</summary>
    public int MaxPathLength { get; init; } = 32;

    /// <summary>Entries per ROUTE_UPDATE frame; a larger update is split.</summary>
    public int MaxEntriesPerUpdate { get; init; } = 256;
}

/// <summary>Router counters.</summary>
public sealed class RouterCounters
{
    public long AdvertsReceived;
    public long WithdrawalsReceived;
    public long LoopsRejected;
    public long PolicyRejected;
    public long InfiniteIgnored;
    public long TableFull;
    public long UpdatesSent;
    public long BestRouteChanges;
}

/// <summary>
/// BGP-like path-vector routing to individual gateways (seed §5.1, Figure 4), session-agnostic. A state machine without
/// I/O: events are <see cref="PeerUp"/>, <see cref="PeerDown"/> and <see cref="OnUpdate"/>; its only action is
/// <see cref="IRouterOutput.SendRouteUpdate"/>. Keep-alives and the hold timer live with the peering link
/// (<c>BroadcastGateway</c>), which calls <see cref="PeerDown"/> when a peer falls silent: every route through it is
/// then withdrawn from the other peers, or replaced by the next best.
///
/// State: for every peer its last advert per (metric, destination) (the Adj-RIB-In), the best route per
/// (metric, destination) (<see cref="Table"/>), and what each peer was last told (the Adj-RIB-Out), so updates are
/// incremental and a route a policy stops exporting is withdrawn. Selection: lowest cost (advert cost + our link's
/// cost in that metric), then shortest path, then lowest next hop. An advert whose path holds us is a loop and is
/// dropped; one at infinite cost is treated as a withdrawal.
/// </summary>
public sealed class PathVectorRouter
{
    private readonly Dictionary<GatewayId, PeerState> _peers = [];
    private readonly HashSet<(RouteMetric, GatewayId)> _dirty = [];
    private readonly RouterOptions _options;
    private readonly IRoutePolicy _policy;
    private readonly IRouterOutput _output;

    public PathVectorRouter(GatewayId self, IslandId island, IRouterOutput output, IRoutePolicy? policy = null, RouterOptions? options = null)
    {
        Self = self;
        Island = island;
        _output = output;
        _policy = policy ?? OpenPolicy.Instance;
        _options = options ?? new RouterOptions();
        for (int m = 0; m < RouteCost.MetricCount; m++)
        {
            Table.Set(new Route((RouteMetric)m, self, island, 0, self, []));
        }
    }

    public GatewayId Self { get; }

    public IslandId Island { get; }

    public RouteTable Table { get; } = new();

    public RouterCounters Counters { get; } = new();

    public IEnumerable<PeerInfo> Peers => _peers.Values.Select(p => p.Info);

    /// <summary>A peering link came up: remember it and send it the whole table through the export filter.</summary>
    public void PeerUp(PeerInfo peer, LinkCosts costs)
    {
        if (_peers.ContainsKey(peer.Gateway))
        {
            PeerDown(peer.Gateway);
        }

        var state = new PeerState(peer, costs);
        _peers[peer.Gateway] = state;
        var update = new RouteUpdate();
        for (int m = 0; m < RouteCost.MetricCount; m++)
        {
            foreach (var route in Table.Routes((RouteMetric)m))
            {
                if (Exportable(state, route))
                {
                    state.Out[(route.Metric, route.Destination)] = route;
                    update.Adverts.Add(ToAdvert(route));
                }
            }
        }

        Send(peer.Gateway, update);
    }

    /// <summary>A peering link went down (closed, or keep-alives lost): forget its routes and tell the other peers.</summary>
    public void PeerDown(GatewayId peer)
    {
        if (!_peers.Remove(peer, out var state))
        {
            return;
        }

        foreach (var key in state.In.Keys)
        {
            _dirty.Add(key);
        }

        // Routes whose best next hop was the dead peer are recomputed even if it never advertised them (it always did).
        for (int m = 0; m < RouteCost.MetricCount; m++)
        {
            foreach (var route in Table.Routes((RouteMetric)m))
            {
                if (route.NextHop == peer && route.Destination != Self)
                {
                    _dirty.Add((route.Metric, route.Destination));
                }
            }
        }

        Recompute();
    }

    /// <summary>A ROUTE_UPDATE from <paramref name="peer"/>. Returns false when the peer is unknown (update ignored).</summary>
    public bool OnUpdate(GatewayId peer, RouteUpdate update)
    {
        if (!_peers.TryGetValue(peer, out var state))
        {
            return false;
        }

        foreach (var w in update.Withdrawals)
        {
            Counters.WithdrawalsReceived++;
            if (state.In.Remove((w.Metric, w.Destination)))
            {
                _dirty.Add((w.Metric, w.Destination));
            }
        }

        Span<int> added = stackalloc int[RouteCost.MetricCount];
        foreach (var advert in update.Adverts)
        {
            Counters.AdvertsReceived++;
            var key = (advert.Metric, advert.Destination);
            bool drop = false;
            if (advert.Path.Length == 0 || advert.Path.Length > _options.MaxPathLength || advert.Path[0] != peer || advert.Path[^1] != advert.Destination)
            {
                Counters.LoopsRejected++;
                drop = true;
            }
            else if (Array.IndexOf(advert.Path, Self) >= 0 || advert.Destination == Self)
            {
                Counters.LoopsRejected++;
                drop = true;
            }
            else if (advert.Cost == RouteCost.Infinite)
            {
                Counters.InfiniteIgnored++;
                drop = true;
            }
            else if (!_policy.Import(state.Info, advert))
            {
                Counters.PolicyRejected++;
                drop = true;
            }
            else if (!state.In.ContainsKey(key) && Table.Best(advert.Metric, advert.Destination) is null && !_dirty.Contains(key))
            {
                // A destination new to the table: counted against the bound before the table is recomputed.
                if (Table.Count(advert.Metric) + added[(int)advert.Metric] >= _options.MaxDestinations)
                {
                    Counters.TableFull++;
                    drop = true;
                }
                else
                {
                    added[(int)advert.Metric]++;
                }
            }

            if (drop)
            {
                if (state.In.Remove(key))
                {
                    _dirty.Add(key);
                }

                continue;
            }

            state.In[key] = advert;
            _dirty.Add(key);
        }

        Recompute();
        return true;
    }

    /// <summary>The best route to <paramref name="destination"/> in <paramref name="metric"/>'s table, or null.</summary>
    public Route? Best(RouteMetric metric, GatewayId destination) => Table.Best(metric, destination);

    public bool IsPeer(GatewayId gateway) => _peers.ContainsKey(gateway);

    public PeerInfo? Peer(GatewayId gateway) => _peers.TryGetValue(gateway, out var s) ? s.Info : null;

    private void Recompute()
    {
        if (_dirty.Count == 0)
        {
            return;
        }

        var changed = new List<(RouteMetric Metric, GatewayId Destination)>();
        foreach (var (metric, destination) in _dirty)
        {
            if (destination == Self)
            {
                continue;
            }

            Route? best = null;
            foreach (var peer in _peers.Values)
            {
                if (!peer.In.TryGetValue((metric, destination), out var advert))
                {
                    continue;
                }

                uint cost = RouteCost.Add(advert.Cost, peer.Costs.Of(metric));
                if (cost == RouteCost.Infinite)
                {
                    continue;
                }

                var candidate = new Route(metric, destination, advert.DestinationIsland, cost, peer.Info.Gateway, advert.Path);
                if (best is null || candidate.IsBetterThan(best))
                {
                    best = candidate;
                }
            }

            bool didChange = best is null ? Table.Remove(metric, destination) : Table.Set(best);
            if (didChange)
            {
                Counters.BestRouteChanges++;
                changed.Add((metric, destination));
            }
        }

        _dirty.Clear();
        if (changed.Count == 0)
        {
            return;
        }

        foreach (var peer in _peers.Values)
        {
            var update = new RouteUpdate();
            foreach (var key in changed)
            {
                var route = Table.Best(key.Metric, key.Destination);
                bool export = route is not null && Exportable(peer, route);
                bool had = peer.Out.TryGetValue(key, out var told);
                if (export)
                {
                    if (!route!.SameAs(told))
                    {
                        peer.Out[key] = route;
                        update.Adverts.Add(ToAdvert(route));
                    }
                }
                else if (had)
                {
                    peer.Out.Remove(key);
                    update.Withdrawals.Add(new RouteWithdrawal(key.Metric, key.Destination));
                }
            }

            Send(peer.Info.Gateway, update);
        }
    }

    // Split horizon: a route is not advertised back to its next hop (that peer would drop it as a loop anyway).
    private bool Exportable(PeerState peer, Route route)
        => route.NextHop != peer.Info.Gateway && route.Destination != peer.Info.Gateway && _policy.Export(peer.Info, route);

    private RouteAdvert ToAdvert(Route route)
    {
        var path = new GatewayId[route.Path.Length + 1];
        path[0] = Self;
        route.Path.CopyTo(path, 1);
        return new RouteAdvert(route.Metric, route.Destination, route.DestinationIsland, route.Cost, path);
    }

    private void Send(GatewayId peer, RouteUpdate update)
    {
        if (update.IsEmpty)
        {
            return;
        }

        int max = _options.MaxEntriesPerUpdate;
        if (update.Count <= max)
        {
            Counters.UpdatesSent++;
            _output.SendRouteUpdate(peer, update);
            return;
        }

        var part = new RouteUpdate();
        foreach (var w in update.Withdrawals)
        {
            part.Withdrawals.Add(w);
            if (part.Count == max)
            {
                Counters.UpdatesSent++;
                _output.SendRouteUpdate(peer, part);
                part = new RouteUpdate();
            }
        }

        foreach (var a in update.Adverts)
        {
            part.Adverts.Add(a);
            if (part.Count == max)
            {
                Counters.UpdatesSent++;
                _output.SendRouteUpdate(peer, part);
                part = new RouteUpdate();
            }
        }

        if (!part.IsEmpty)
        {
            Counters.UpdatesSent++;
            _output.SendRouteUpdate(peer, part);
        }
    }

    private sealed class PeerState(PeerInfo info, LinkCosts costs)
    {
        public PeerInfo Info { get; } = info;

        public LinkCosts Costs { get; } = costs;

        public Dictionary<(RouteMetric, GatewayId), RouteAdvert> In { get; } = [];

        public Dictionary<(RouteMetric, GatewayId), Route> Out { get; } = [];
    }
}
