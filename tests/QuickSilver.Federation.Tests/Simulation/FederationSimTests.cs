using System.Buffers.Binary;
using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Federation.Tests.Simulation;

/// <summary>Whole federations on virtual time (seeded): the real gateway state machines, simulated links and islands.</summary>
public class FederationSimTests(ITestOutputHelper output)
{
    private static readonly TimeSpan Ms10 = TimeSpan.FromMilliseconds(10);
    private static readonly TimeSpan Latency = TimeSpan.FromMilliseconds(5);

    private static byte[] Packet(int i)
    {
        var p = new byte[100];
        BinaryPrimitives.WriteInt32LittleEndian(p, i);
        return p;
    }

    private static List<int> Ids(FederationSim.SimClient client) => client.Received.Select(p => BinaryPrimitives.ReadInt32LittleEndian(p)).ToList();

    private static void Publish(FederationSim sim, FederationSim.SimIsland island, string address, int from, int count)
    {
        for (int i = from; i < from + count; i++)
        {
            island.Publish(address, Packet(i));
            sim.RunFor(Ms10);
        }

        sim.RunFor(TimeSpan.FromMilliseconds(200));
    }

    /// <summary>Islands 1 - 2 - 3 in a line, one gateway each (g1, g2, g3).</summary>
    private static (FederationSim Sim, FederationSim.SimIsland[] Islands) Line(int seed)
    {
        var sim = new FederationSim(seed);
        var islands = new[] { sim.AddIsland(1), sim.AddIsland(2), sim.AddIsland(3) };
        for (uint i = 1; i <= 3; i++)
        {
            sim.AddGateway(i, islands[i - 1]);
        }

        sim.Connect(1, 2, Latency);
        sim.Connect(2, 3, Latency);
        sim.RunFor(TimeSpan.FromSeconds(1));
        return (sim, islands);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    public void ThreeIslandsAClientTwoIslandsAwayGetsEveryPacketOnceInOrder(int seed)
    {
        var (sim, islands) = Line(seed);
        var session = SessionName.Parse("bfed://1/news/data");
        var client = islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(MediatorReplyKind.Translation, client.Reply!.Kind);

        Publish(sim, islands[0], "news/data", 0, 200);
        Assert.Equal(Enumerable.Range(0, 200), Ids(client));

        // The tree: g3 -> g2 -> g1 (root, subscribed to the native session); g2 is transit only.
        var t3 = sim[3].Sessions[session];
        var t2 = sim[2].Sessions[session];
        var t1 = sim[1].Sessions[session];
        Assert.Equal(new GatewayId(2), t3.Upstream);
        Assert.Equal(new GatewayId(1), t2.Upstream);
        Assert.True(t1.IsRoot);
        Assert.Equal([new GatewayId(2)], t1.Downstream.Keys);
        Assert.Null(t2.LocalChannels);
        Assert.Equal(200, sim[3].Counters.DataDelivered);
        Assert.Equal(0, sim[2].Counters.DataDelivered);
    }

    [Fact]
    public void AClientOfAnUnreachableIslandGetsNoRoute()
    {
        var (sim, islands) = Line(3);
        var client = islands[2].Join(SessionName.Parse("bfed://9/x/y"));
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(MediatorReplyKind.NoRoute, client.Reply!.Kind);
        Assert.Contains("island 9", client.Reply.Reason, StringComparison.Ordinal);
        Assert.Empty(sim[3].Sessions);
    }

    [Theory]
    [InlineData(5)]
    [InlineData(6)]
    public void AGatewayCrashWithdrawsItsRoutesAndTheTreeMovesToTheOtherPath(int seed)
    {
        // g1 (island 1) reaches g3 (island 3) through g2 (island 2, cheap) or g4 (island 4, dearer).
        var sim = new FederationSim(seed);
        var islands = Enumerable.Range(1, 4).Select(i => sim.AddIsland((uint)i)).ToArray();
        for (uint i = 1; i <= 4; i++)
        {
            sim.AddGateway(i, islands[i - 1]);
        }

        sim.Connect(1, 2, Latency);
        sim.Connect(2, 3, Latency);
        sim.Connect(1, 4, Latency, new LinkCosts(5, 5, 5));
        sim.Connect(4, 3, Latency);
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse("bfed://1/tv/video");
        var client = islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Publish(sim, islands[0], "tv/video", 0, 50);
        Assert.Equal(new GatewayId(2), sim[3].Sessions[session].Upstream);

        sim.Crash(2);
        // Nobody is told: keep-alives stop, and after the 30 s hold time g1 and g3 drop g2 and its routes.
        sim.RunFor(TimeSpan.FromSeconds(35));
        Assert.Null(sim[3].Router.Best(RouteMetric.Hops, new GatewayId(2)));
        Assert.Equal(new GatewayId(4), sim[3].Router.Best(RouteMetric.Hops, new GatewayId(1))!.NextHop);
        Assert.Equal(new GatewayId(4), sim[3].Sessions[session].Upstream);
        Assert.True(sim[1].Sessions[session].Downstream.ContainsKey(new GatewayId(4)));
        Assert.True(sim[1].Counters.PeersTimedOut >= 1);
        islands[2].Refresh(session);

        Publish(sim, islands[0], "tv/video", 50, 50);
        Assert.Equal(Enumerable.Range(0, 100), Ids(client));
    }

    [Fact]
    public void ACutLinkReroutesAtOnceAndTheOldUpstreamForgetsTheBranch()
    {
        var sim = new FederationSim(7);
        var islands = Enumerable.Range(1, 4).Select(i => sim.AddIsland((uint)i)).ToArray();
        for (uint i = 1; i <= 4; i++)
        {
            sim.AddGateway(i, islands[i - 1]);
        }

        sim.Connect(1, 2, Latency);
        sim.Connect(2, 3, Latency);
        sim.Connect(1, 4, Latency, new LinkCosts(5, 5, 5));
        sim.Connect(4, 3, Latency);
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse("bfed://1/tv/video");
        var client = islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        sim.Cut(2, 3);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(new GatewayId(4), sim[3].Sessions[session].Upstream);
        // g2 lost its only downstream: it pruned the tree and sent LEAVE to g1.
        Assert.False(sim[2].Sessions.ContainsKey(session));
        Assert.False(sim[1].Sessions[session].Downstream.ContainsKey(new GatewayId(2)));
        Publish(sim, islands[0], "tv/video", 0, 20);
        Assert.Equal(Enumerable.Range(0, 20), Ids(client));
    }

    [Theory]
    [InlineData(11)]
    [InlineData(12)]
    public void InAMultiSourceSessionOverALoopNoPacketCrossesALinkTwice(int seed)
    {
        // A triangle of islands, a bi-directional session owned by island 1, clients (and sources) in all three.
        var sim = new FederationSim(seed);
        var islands = Enumerable.Range(1, 3).Select(i => sim.AddIsland((uint)i)).ToArray();
        for (uint i = 1; i <= 3; i++)
        {
            sim.AddGateway(i, islands[i - 1]);
        }

        sim.Connect(1, 2, Latency);
        sim.Connect(2, 3, Latency);
        sim.Connect(3, 1, Latency);
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse("bfed://1/chat/msgs/?multi-source=true");
        var c2 = islands[1].Join(session);
        var c3 = islands[2].Join(session);
        var owner = new List<byte[]>();
        islands[0].Listen("chat/msgs", owner.Add);
        sim.RunFor(TimeSpan.FromSeconds(1));

        // Force a loop the tree protocol would never build by itself: g2 and g3 each join through the other too.
        sim.Inject(3, 2, PeerCodec.Join(new JoinMessage(session, default, [new GatewayId(3)])));
        sim.Inject(2, 3, PeerCodec.Join(new JoinMessage(session, default, [new GatewayId(2)])));
        sim.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.True(sim[2].Sessions[session].Downstream.ContainsKey(new GatewayId(3)));
        Assert.True(sim[3].Sessions[session].Downstream.ContainsKey(new GatewayId(2)));

        sim.DataSent.Clear();
        for (int i = 0; i < 30; i++)
        {
            islands[0].Publish("chat/msgs", Packet(i));
            islands[1].Publish(c2.Address!, Packet(1000 + i));
            islands[2].Publish(c3.Address!, Packet(2000 + i));
            sim.RunFor(Ms10);
        }

        sim.RunFor(TimeSpan.FromMilliseconds(500));
        var repeats = sim.DataSent.GroupBy(x => x).Where(g => g.Count() > 1).ToList();
        Assert.Empty(repeats);
        Assert.True(sim.Gateways.Sum(g => g.Counters.DuplicatesDropped) > 0, "the loop was never exercised");
        // Every island sees every packet of the other islands exactly once (plus its own sources' packets, natively).
        var expected2 = Enumerable.Range(0, 30).Concat(Enumerable.Range(1000, 30)).Concat(Enumerable.Range(2000, 30)).Order();
        Assert.Equal(expected2, Ids(c2).Order());
        Assert.Equal(expected2, Ids(c3).Order());
        Assert.Equal(expected2, owner.Select(p => BinaryPrimitives.ReadInt32LittleEndian(p)).Order());
    }

    [Fact]
    public void AReplayedDataFrameIsDroppedNotForwarded()
    {
        var (sim, islands) = Line(13);
        var session = SessionName.Parse("bfed://1/news/data");
        var client = islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Publish(sim, islands[0], "news/data", 0, 1);
        var labels = sim[2].Sessions[session].UpstreamLabels!;
        var frame = new byte[DataHeader.Size + 100];
        // The same (origin g1, sequence 1) again from g1: g2 has forwarded it once already.
        new DataHeader(0, 32, labels[0], new GatewayId(1), 1).Write(frame);
        long before = sim[2].Counters.DataForwarded;
        sim.Inject(1, 2, frame);
        sim.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal(before, sim[2].Counters.DataForwarded);
        Assert.Equal(1, sim[2].Counters.DuplicatesDropped);
        Assert.Single(client.Received);
        // From the wrong neighbour (g3 is downstream, the tree is one-way): dropped by the reverse-path check.
        new DataHeader(0, 32, sim[2].Sessions[session].Labels[0], new GatewayId(3), 1).Write(frame);
        sim.Inject(3, 2, frame);
        Assert.Equal(1, sim[2].Counters.RpfDropped);
    }

    [Fact]
    public void LeavePrunesTheTreeEverywhereAndReturnsTheChannel()
    {
        var (sim, islands) = Line(21);
        var session = SessionName.Parse("bfed://1/news/data");
        int free = islands[2].FreeChannels;
        islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(free - 1, islands[2].FreeChannels);
        Assert.All(sim.Gateways, g => Assert.True(g.Sessions.ContainsKey(session)));

        islands[2].Mediator.Leave(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(sim.Gateways, g => Assert.Empty(g.Sessions));
        Assert.Equal(free, islands[2].FreeChannels);
        Assert.Equal(1, sim[2].Counters.LeavesReceived);
        Assert.Equal(1, sim[1].Counters.LeavesReceived);
    }

    [Fact]
    public void SoftStateLivesWhileRefreshedAndExpiresWhenNot()
    {
        var (sim, islands) = Line(22);
        var kept = SessionName.Parse("bfed://1/kept/data");
        var dropped = SessionName.Parse("bfed://1/dropped/data");
        islands[2].Join(kept);
        islands[2].Join(dropped);
        for (int i = 0; i < 10; i++)
        {
            sim.RunFor(TimeSpan.FromSeconds(30));
            islands[2].Refresh(kept);
        }

        // 300 s later: the refreshed session is still joined end to end (refresh JOINs kept g2 and g1 alive), the other expired
        // at g3 after 95 s without a client JOIN, and g3's LEAVE (or its missing refresh JOINs) removed it upstream.
        Assert.All(sim.Gateways, g => Assert.True(g.Sessions.ContainsKey(kept)));
        Assert.All(sim.Gateways, g => Assert.False(g.Sessions.ContainsKey(dropped)));
        Assert.Equal(1, sim[3].Counters.ExpiredLocal);
    }

    [Fact]
    public void ADownstreamThatFallsSilentIsExpiredAfterTheJoinHoldTime()
    {
        var (sim, islands) = Line(23);
        var session = SessionName.Parse("bfed://1/news/data");
        islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        // g3 stops sending anything but its link stays "up" for g2 (keep-alives are what it would miss: hold time 30 s
        // is shorter than the join hold time, so make g2's hold time long to see the soft-state expiry alone).
        var sim2 = new FederationSim(24);
        var i1 = sim2.AddIsland(1);
        var i2 = sim2.AddIsland(2);
        sim2.AddGateway(1, i1, o => o with { HoldTime = TimeSpan.FromSeconds(1000) });
        sim2.AddGateway(2, i2, o => o with { HoldTime = TimeSpan.FromSeconds(1000) });
        sim2.Connect(1, 2, Latency);
        sim2.RunFor(TimeSpan.FromSeconds(1));
        i2.Join(session);
        sim2.RunFor(TimeSpan.FromSeconds(1));
        Assert.True(sim2[1].Sessions.ContainsKey(session));
        sim2.Crash(2);
        sim2.RunFor(TimeSpan.FromSeconds(100));
        Assert.False(sim2[1].Sessions.ContainsKey(session));
        Assert.Equal(1, sim2[1].Counters.ExpiredDownstream);
        Assert.True(sim.Gateways.All(g => g.Sessions.ContainsKey(session)));
    }

    [Fact]
    public void SrouteDiscoveryPicksTheOwnerGatewayNearerTheSourceAndRedirectsToTheLocalGatewayThatReachesIt()
    {
        // The seed's Figure 5: owner island 1 = {A=1, B=2}; transit island 2 = {C=3, D=4}; island 4 = {G=7};
        // client island 3 = {E=5, F=6}. E reaches A by E-D-C-A and B by E-F-G-B, both three hops, through different
        // next hops: E asks A for SROUTE costs, learns B is nearer the source, and redirects the mediator to F.
        var sim = new FederationSim(31);
        var bn1 = sim.AddIsland(1);
        var bn2 = sim.AddIsland(2);
        var bn3 = sim.AddIsland(3);
        var bn4 = sim.AddIsland(4);
        sim.AddGateway(5, bn3); // E, first in the mediator's list
        sim.AddGateway(6, bn3); // F
        sim.AddGateway(1, bn1); // A
        sim.AddGateway(2, bn1); // B
        sim.AddGateway(3, bn2); // C
        sim.AddGateway(4, bn2); // D
        sim.AddGateway(7, bn4); // G
        sim.Connect(1, 2, Latency);
        sim.Connect(3, 4, Latency);
        sim.Connect(5, 6, Latency);
        sim.Connect(5, 4, Latency);
        sim.Connect(4, 3, Latency);
        sim.Connect(3, 1, Latency);
        sim.Connect(6, 7, Latency);
        sim.Connect(7, 2, Latency);
        sim.RunFor(TimeSpan.FromSeconds(1));
        bn1.SrouteCosts[new GatewayId(1)] = 10;
        bn1.SrouteCosts[new GatewayId(2)] = 1;

        var session = SessionName.Parse("bfed://1/tv/video");
        var client = bn3.Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(MediatorReplyKind.Translation, client.Reply!.Kind);
        Assert.Equal(1, sim[5].Counters.SrouteRequestsSent);
        Assert.Equal(1, sim[5].Counters.ClientRedirects);
        Assert.Equal(1, bn3.Mediator.Redirects);
        Assert.False(sim[5].Sessions.ContainsKey(session));
        Assert.Equal(new GatewayId(7), sim[6].Sessions[session].Upstream);
        Assert.Equal(new GatewayId(2), sim[6].Sessions[session].Target);
        Assert.True(sim[2].Sessions[session].IsRoot);
        Assert.False(sim[1].Sessions.ContainsKey(session));

        Publish(sim, bn1, "tv/video", 0, 10);
        Assert.Equal(Enumerable.Range(0, 10), Ids(client));
    }

    [Theory]
    [InlineData(3, 0)]
    [InlineData(1, 1)]
    public void SrouteRunsOnlyWhenOwnerGatewaysLieBehindDifferentNextHopsAndANullAnswerFallsBackToRoutingCost(uint directCost, int srouteRequests)
    {
        var sim = new FederationSim(32);
        var bn1 = sim.AddIsland(1);
        var bn3 = sim.AddIsland(3);
        sim.AddGateway(5, bn3);
        sim.AddGateway(1, bn1);
        sim.AddGateway(2, bn1);
        sim.Connect(1, 2, Latency);
        sim.Connect(5, 1, Latency);
        sim.Connect(5, 2, Latency, new LinkCosts(directCost, directCost, directCost));
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse("bfed://1/tv/video");
        var client = bn3.Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(MediatorReplyKind.Translation, client.Reply!.Kind);
        // Cost 3: g2 is best reached through g1 too, one next hop, no SROUTE. Cost 1: two next hops, SROUTE, and island 1
        // answers with no costs (the seed's null response): the tie goes to the lower gateway number.
        Assert.Equal(srouteRequests, sim[5].Counters.SrouteRequestsSent);
        Assert.Equal(new GatewayId(1), sim[5].Sessions[session].Upstream);
    }

    [Theory]
    [InlineData(41)]
    [InlineData(42)]
    public void MalformedPeeringFramesAreCountedAndNeitherCrashNorGrowTheGateway(int seed)
    {
        var (sim, islands) = Line(seed);
        var session = SessionName.Parse("bfed://1/news/data");
        var client = islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(1));
        var g2 = sim[2];
        int routes = g2.Router.Table.Count(RouteMetric.Hops);
        var random = new Random(seed);
        int n = 20_000;
        for (int i = 0; i < n; i++)
        {
            var frame = new byte[random.Next(0, 48)];
            random.NextBytes(frame);
            if (frame.Length > 1 && i % 4 != 0)
            {
                frame[0] = PeerCodec.Version;
                frame[1] = (byte)random.Next(1, 10); // control types: Data has its own line below
            }

            sim.Inject(i % 2 == 0 ? 1u : 3u, 2, frame);
        }

        for (int i = 0; i < 1000; i++)
        {
            var frame = new byte[random.Next(16, 64)];
            random.NextBytes(frame);
            frame[0] = PeerCodec.Version;
            frame[1] = (byte)FrameType.Data;
            sim.Inject(1, 2, frame);
        }

        sim.Inject(99, 2, PeerCodec.KeepAlive());
        Assert.True(g2.Counters.MalformedTotal > n * 9 / 10, $"only {g2.Counters.MalformedTotal} counted malformed");
        Assert.Equal(1, g2.Counters.FramesFromUnknownPeer);
        Assert.Single(g2.Sessions);
        Assert.Equal(routes, g2.Router.Table.Count(RouteMetric.Hops));
        Assert.True(g2.DuplicateOrigins <= 2, "random data frames with unknown labels must not reach the duplicate filter");

        Publish(sim, islands[0], "news/data", 0, 20);
        Assert.Equal(Enumerable.Range(0, 20), Ids(client));
    }

    [Fact]
    public void ControlTrafficStaysBelowThreeTenthsOfAPercentOfA100KbitStream()
    {
        // The seed's §6.1 figure: with 30 s refreshes, control traffic is under 0.3 % of a 100 kbit/s stream.
        var (sim, islands) = Line(51);
        var session = SessionName.Parse("bfed://1/news/data");
        islands[2].Join(session);
        sim.RunFor(TimeSpan.FromSeconds(5));
        long before = sim.ControlBytesSent;
        long framesBefore = sim.ControlFramesSent;
        var span = TimeSpan.FromMinutes(10);
        for (int i = 0; i < 20; i++)
        {
            sim.RunFor(span / 20);
            islands[2].Refresh(session);
        }

        // Bytes on the two links in both directions over ten minutes, against one 100 kbit/s stream on one link; each
        // frame also pays its 4-byte length prefix and 40 bytes of TCP/IPv4 headers (no options, one frame a segment).
        long frames = sim.ControlFramesSent - framesBefore;
        double bytes = sim.ControlBytesSent - before + frames * 44.0;
        double perLinkBitsPerSecond = bytes * 8.0 / span.TotalSeconds / 2;
        double share = perLinkBitsPerSecond / 100_000;
        output.WriteLine($"control traffic: {frames} frames, {sim.ControlBytesSent - before} B of frames in {span.TotalSeconds} s on 2 links; with headers {perLinkBitsPerSecond:F2} bit/s per link = {share:P4} of a 100 kbit/s stream");
        Assert.True(share < 0.003, $"control traffic is {share:P3} of a 100 kbit/s stream");
        Assert.True(share > 0, "no control traffic measured");
    }

    [Fact]
    public void OptionsAreValidatedNamingTheOption()
    {
        var bad = new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1), HoldTime = TimeSpan.FromSeconds(5) };
        var e = Assert.Throws<ArgumentOutOfRangeException>(bad.Validate);
        Assert.Equal(nameof(GatewayOptions.HoldTime), e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(new GatewayOptions { Gateway = default, Island = new IslandId(1) }.Validate);
        Assert.Equal(nameof(GatewayOptions.Gateway), e.ParamName);
        e = Assert.Throws<ArgumentOutOfRangeException>(new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1), PeerQueueBytes = 1000 }.Validate);
        Assert.Equal(nameof(GatewayOptions.PeerQueueBytes), e.ParamName);
    }
}
