using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Tests.Routing;

/// <summary>Routers wired to each other directly: each update is delivered at once (a synchronous network).</summary>
public class PathVectorRouterTests
{
    private sealed class Net : IRouterOutput
    {
        public Dictionary<GatewayId, PathVectorRouter> Routers { get; } = [];

        public int Updates { get; private set; }

        private readonly Queue<(GatewayId From, GatewayId To, RouteUpdate Update)> _queue = new();
        private GatewayId _sender;

        public PathVectorRouter Add(uint id, uint island, IRoutePolicy? policy = null)
        {
            var proxy = new Proxy(this, new GatewayId(id));
            var r = new PathVectorRouter(new GatewayId(id), new IslandId(island), proxy, policy);
            Routers[r.Self] = r;
            return r;
        }

        public void Link(uint a, uint b, uint cost = 1, uint latency = 1)
        {
            var ra = Routers[new GatewayId(a)];
            var rb = Routers[new GatewayId(b)];
            var costs = new LinkCosts(cost, latency, 1);
            ra.PeerUp(new PeerInfo(rb.Self, rb.Island, ra.Island == rb.Island ? PeerKind.Internal : PeerKind.External), costs);
            rb.PeerUp(new PeerInfo(ra.Self, ra.Island, ra.Island == rb.Island ? PeerKind.Internal : PeerKind.External), costs);
            Drain();
        }

        public void Unlink(uint a, uint b)
        {
            Routers[new GatewayId(a)].PeerDown(new GatewayId(b));
            Routers[new GatewayId(b)].PeerDown(new GatewayId(a));
            Drain();
        }

        public void Drain()
        {
            int guard = 0;
            while (_queue.TryDequeue(out var item))
            {
                Assert.True(++guard < 10_000, "routing did not converge");
                Updates++;
                Routers[item.To].OnUpdate(item.From, item.Update);
            }
        }

        public void SendRouteUpdate(GatewayId peer, RouteUpdate update) => _queue.Enqueue((_sender, peer, update));

        private sealed class Proxy(Net net, GatewayId self) : IRouterOutput
        {
            public void SendRouteUpdate(GatewayId peer, RouteUpdate update)
            {
                net._sender = self;
                net.SendRouteUpdate(peer, update);
            }
        }
    }

    [Fact]
    public void ThreeGatewaysLearnShortestPathsAsInFigureFour()
    {
        var net = new Net();
        net.Add(1, 10);
        net.Add(2, 20);
        net.Add(3, 30);
        net.Link(1, 2);
        net.Link(2, 3);
        var r1 = net.Routers[new GatewayId(1)];
        var to3 = r1.Best(RouteMetric.Hops, new GatewayId(3))!;
        Assert.Equal(2u, to3.Cost);
        Assert.Equal(new GatewayId(2), to3.NextHop);
        Assert.Equal([new GatewayId(2), new GatewayId(3)], to3.Path);
        Assert.Equal(new IslandId(30), to3.DestinationIsland);

        net.Link(1, 3);
        Assert.Equal(1u, r1.Best(RouteMetric.Hops, new GatewayId(3))!.Cost);
    }

    [Fact]
    public void EachMetricHasItsOwnTable()
    {
        var net = new Net();
        net.Add(1, 10);
        net.Add(2, 20);
        net.Add(3, 30);
        net.Link(1, 3, cost: 1, latency: 100); // one hop, slow
        net.Link(1, 2, cost: 1, latency: 5);
        net.Link(2, 3, cost: 1, latency: 5);  // two hops, fast
        var r1 = net.Routers[new GatewayId(1)];
        Assert.Equal(new GatewayId(3), r1.Best(RouteMetric.Hops, new GatewayId(3))!.NextHop);
        Assert.Equal(new GatewayId(2), r1.Best(RouteMetric.Latency, new GatewayId(3))!.NextHop);
        Assert.Equal(10u, r1.Best(RouteMetric.Latency, new GatewayId(3))!.Cost);
    }

    [Fact]
    public void APeerGoingDownWithdrawsItsRoutesAndTheNextBestTakesOver()
    {
        var net = new Net();
        for (uint i = 1; i <= 4; i++)
        {
            net.Add(i, i * 10);
        }

        // A square: 1-2-4 and 1-3-4, plus a tail 4-... none.
        net.Link(1, 2);
        net.Link(2, 4);
        net.Link(1, 3, cost: 5);
        net.Link(3, 4, cost: 5);
        var r1 = net.Routers[new GatewayId(1)];
        Assert.Equal(new GatewayId(2), r1.Best(RouteMetric.Hops, new GatewayId(4))!.NextHop);

        net.Unlink(2, 4);
        var after = r1.Best(RouteMetric.Hops, new GatewayId(4))!;
        Assert.Equal(new GatewayId(3), after.NextHop);
        Assert.Equal(10u, after.Cost);

        net.Unlink(3, 4);
        Assert.Null(r1.Best(RouteMetric.Hops, new GatewayId(4)));
        Assert.Null(net.Routers[new GatewayId(2)].Best(RouteMetric.Hops, new GatewayId(4)));
    }

    [Fact]
    public void AdvertsHoldingOurselvesAreLoopsAndAreDropped()
    {
        var net = new Net();
        net.Add(1, 10);
        net.Add(2, 20);
        net.Link(1, 2);
        var r1 = net.Routers[new GatewayId(1)];
        var update = new RouteUpdate();
        update.Adverts.Add(new RouteAdvert(RouteMetric.Hops, new GatewayId(9), new IslandId(90), 1, [new GatewayId(2), new GatewayId(1), new GatewayId(9)]));
        update.Adverts.Add(new RouteAdvert(RouteMetric.Hops, new GatewayId(8), new IslandId(80), 1, [new GatewayId(7), new GatewayId(8)])); // not from 2
        r1.OnUpdate(new GatewayId(2), update);
        Assert.Null(r1.Best(RouteMetric.Hops, new GatewayId(9)));
        Assert.Null(r1.Best(RouteMetric.Hops, new GatewayId(8)));
        Assert.Equal(2, r1.Counters.LoopsRejected);
    }

    [Fact]
    public void ANoTransitIslandDoesNotCarryOtherIslandsRoutes()
    {
        var net = new Net();
        net.Add(1, 10);
        net.Add(2, 20, new NoTransitPolicy(new IslandId(20)));
        net.Add(3, 30);
        net.Link(1, 2);
        net.Link(2, 3);
        var r1 = net.Routers[new GatewayId(1)];
        Assert.NotNull(r1.Best(RouteMetric.Hops, new GatewayId(2)));
        Assert.Null(r1.Best(RouteMetric.Hops, new GatewayId(3)));
        Assert.Null(net.Routers[new GatewayId(3)].Best(RouteMetric.Hops, new GatewayId(1)));
    }

    [Fact]
    public void TheTableIsBoundedAndCountsWhatItRefuses()
    {
        var self = new GatewayId(1);
        var sink = new Net();
        var r = new PathVectorRouter(self, new IslandId(1), sink, options: new RouterOptions { MaxDestinations = 10 });
        r.PeerUp(new PeerInfo(new GatewayId(2), new IslandId(2), PeerKind.External), LinkCosts.Default);
        var update = new RouteUpdate();
        for (uint d = 100; d < 200; d++)
        {
            update.Adverts.Add(new RouteAdvert(RouteMetric.Hops, new GatewayId(d), new IslandId(3), 1, [new GatewayId(2), new GatewayId(d)]));
        }

        r.OnUpdate(new GatewayId(2), update);
        Assert.Equal(10, r.Table.Count(RouteMetric.Hops));
        Assert.Equal(91, r.Counters.TableFull);
    }
}
