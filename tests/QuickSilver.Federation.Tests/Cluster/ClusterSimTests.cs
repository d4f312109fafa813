using System.Buffers.Binary;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>The clustered gateway (seed §4, §5.3) on virtual time, seeded: a control node and data nodes per gateway.</summary>
public class ClusterSimTests(ITestOutputHelper output)
{
    private static readonly TimeSpan Latency = TimeSpan.FromMilliseconds(5);

    internal static byte[] Packet(int i)
    {
        var p = new byte[100];
        BinaryPrimitives.WriteInt32LittleEndian(p, i);
        return p;
    }

    internal static List<int> Ids(FederationSim.SimClient client) => client.Received.Select(p => BinaryPrimitives.ReadInt32LittleEndian(p)).ToList();

    internal static SessionName Session(int i) => SessionName.Parse($"bfed://1/s{i}/d");

    /// <summary>Island 1 (owner) and island 2, one gateway each; g1 clustered with data nodes 101.. when
    /// <paramref name="rootNodes"/> &gt; 0, g2 clustered with data nodes 201.. (<paramref name="leafNodes"/>).</summary>
    private static (FederationSim Sim, FederationSim.SimIsland I1, FederationSim.SimIsland I2) Pair(int seed, int rootNodes, int leafNodes, Func<ClusterOptions, ClusterOptions>? cluster = null)
    {
        var sim = new FederationSim(seed);
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        if (rootNodes > 0)
        {
            sim.AddClusteredGateway(1, i1, [.. Enumerable.Range(101, rootNodes).Select(n => (uint)n)], cluster: cluster);
        }
        else
        {
            sim.AddGateway(1, i1);
        }

        sim.AddClusteredGateway(2, i2, [.. Enumerable.Range(201, leafNodes).Select(n => (uint)n)], cluster: cluster);
        sim.Connect(1, 2, Latency);
        sim.RunFor(TimeSpan.FromSeconds(2));
        return (sim, i1, i2);
    }

    private static FederationSim.SimClient[] JoinAll(FederationSim sim, FederationSim.SimIsland island, int sessions)
    {
        var clients = Enumerable.Range(0, sessions).Select(i => island.Join(Session(i))).ToArray();
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(clients, c => Assert.Equal(MediatorReplyKind.Translation, c.Reply!.Kind));
        return clients;
    }

    /// <summary>Publishes packets [from, from + count) on every session, one round every <paramref name="every"/>.</summary>
    internal static void Publish(FederationSim sim, FederationSim.SimIsland island, int sessions, int from, int count, TimeSpan every)
    {
        for (int p = from; p < from + count; p++)
        {
            for (int s = 0; s < sessions; s++)
            {
                island.Publish($"s{s}/d", Packet(p));
            }

            sim.RunFor(every);
        }

        sim.RunFor(TimeSpan.FromMilliseconds(200));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    public void SessionsSpreadOverDataNodesEveryClientGetsEveryPacketAndTheControlNodeForwardsNothing(int seed)
    {
        var (sim, i1, i2) = Pair(seed, rootNodes: 2, leafNodes: 2);
        var clients = JoinAll(sim, i2, 6);
        Publish(sim, i1, 6, 0, 50, TimeSpan.FromMilliseconds(10));

        Assert.All(clients, c => Assert.Equal(Enumerable.Range(0, 50), Ids(c)));
        foreach (uint node in new uint[] { 101, 102, 201, 202 })
        {
            Assert.Equal(3, sim.DataNode(node).SessionCount); // least loaded: 6 sessions, 3 per node
        }

        Assert.Equal(3, sim[2].Cluster!.Load[201]);
        foreach (var g in new[] { sim[1], sim[2] })
        {
            Assert.Equal(0, g.Counters.DataForwarded);
            Assert.Equal(0, g.Counters.DataFromIsland);
            Assert.Equal(0, g.Counters.DataDelivered);
            Assert.Equal(0, g.Counters.DataAtControl);
        }

        Assert.False(sim.DataSentByNode.ContainsKey(0)); // no DATA frame left a control node
        Assert.Equal(6 * 50, sim.DataSentByNode[101] + sim.DataSentByNode[102]);
        Assert.Equal(6 * 50, sim.DataNode(201).Counters.DataDelivered + sim.DataNode(202).Counters.DataDelivered);
        output.WriteLine($"data frames sent: node 101 {sim.DataSentByNode[101]}, node 102 {sim.DataSentByNode[102]}; cluster frames {sim.ClusterFramesSent}, {sim.ClusterBytesSent} B");
    }

    [Theory]
    [InlineData(3, false)]
    [InlineData(4, true)]
    public void ADataNodeCrashMovesItsSessionsAndDataResumes(int seed, bool crashAtRoot)
    {
        var (sim, i1, i2) = Pair(seed, rootNodes: 2, leafNodes: 2);
        var clients = JoinAll(sim, i2, 4);
        Publish(sim, i1, 4, 0, 50, TimeSpan.FromMilliseconds(10));

        var gateway = crashAtRoot ? sim[1] : sim[2];
        uint victim = crashAtRoot ? 101u : 201u;
        uint survivor = crashAtRoot ? 102u : 202u;
        var moved = Enumerable.Range(0, 4).Where(i => gateway.Cluster!.NodeOf(Session(i)) == victim).ToList();
        Assert.Equal(2, moved.Count);

        sim.CrashDataNode(victim);
        // During detection (heartbeat timeout 3 s) and re-pointing: one round every 100 ms for 5 s.
        Publish(sim, i1, 4, 50, 50, TimeSpan.FromMilliseconds(100));
        Assert.All(Enumerable.Range(0, 4), i => Assert.Equal(survivor, gateway.Cluster!.NodeOf(Session(i))));
        Assert.Equal(4, sim.DataNode(survivor).SessionCount);
        Assert.Equal(1, gateway.Cluster!.Counters.NodesDown);

        Publish(sim, i1, 4, 100, 50, TimeSpan.FromMilliseconds(10));
        for (int i = 0; i < 4; i++)
        {
            var got = Ids(clients[i]);
            Assert.Equal(got.Distinct().Order(), got); // once each, in order
            Assert.True(Enumerable.Range(0, 50).All(got.Contains), $"session {i} lost a packet before the crash");
            Assert.True(Enumerable.Range(100, 50).All(got.Contains), $"session {i} lost a packet after the failover");
            int lostInWindow = 50 - got.Count(p => p is >= 50 and < 100);
            if (!moved.Contains(i))
            {
                Assert.Equal(0, lostInWindow); // sessions on the surviving node never noticed
            }
            else
            {
                // Lost: what the dead node had or was sent between the crash and the neighbours learning the new node.
                Assert.InRange(lostInWindow, 1, 40);
            }

            output.WriteLine($"session {i}: on {(moved.Contains(i) ? "the crashed node" : "the survivor")}, lost {lostInWindow} of 50 during failover");
        }

        Assert.Equal(0, sim[1].Counters.DataForwarded + sim[2].Counters.DataForwarded);
    }

    [Fact]
    public void WithoutFailoverTheCrashedNodesSessionsStayDark()
    {
        // The same crash with a heartbeat timeout of an hour: the control node never moves the sessions.
        var (sim, i1, i2) = Pair(5, rootNodes: 0, leafNodes: 2, cluster: c => c with { HeartbeatTimeout = TimeSpan.FromHours(1), SessionHold = TimeSpan.FromHours(2) });
        var clients = JoinAll(sim, i2, 2);
        sim.CrashDataNode(201);
        sim.RunFor(TimeSpan.FromSeconds(5));
        Publish(sim, i1, 2, 0, 20, TimeSpan.FromMilliseconds(10));
        Assert.Equal(1, clients.Count(c => c.Received.Count == 0));
        Assert.Equal(1, clients.Count(c => c.Received.Count == 20));
    }

    [Fact]
    public void TwoDataNodesCarryTwiceTheSessionsOfOne()
    {
        // Each data node holds at most 8 sessions (a stand-in for a node's capacity; the seed hit ~500 per node).
        var carried = new int[3];
        foreach (int nodes in new[] { 1, 2 })
        {
            var (sim, i1, i2) = Pair(6, rootNodes: 0, leafNodes: nodes, cluster: c => c with { MaxSessionsPerNode = 8 });
            var clients = Enumerable.Range(0, 16).Select(i => i2.Join(Session(i))).ToArray();
            sim.RunFor(TimeSpan.FromSeconds(1));
            Publish(sim, i1, 16, 0, 20, TimeSpan.FromMilliseconds(10));
            carried[nodes] = clients.Count(c => c.Received.Count == 20);
            var perNode = Enumerable.Range(201, nodes).Select(n => sim.DataNode((uint)n)).ToList();
            output.WriteLine($"{nodes} data node(s): {carried[nodes]} of 16 sessions carried; sessions per node {string.Join(", ", perNode.Select(n => n.SessionCount))}; packets delivered per node {string.Join(", ", perNode.Select(n => n.Counters.DataDelivered))}");
            Assert.Equal(0, clients.Count(c => c.Received.Count is > 0 and < 20));
        }

        Assert.Equal(8, carried[1]);
        Assert.Equal(16, carried[2]);
    }

    [Theory]
    [InlineData(7)]
    public void MalformedControlFramesAreCountedAndDropped(int seed)
    {
        var (sim, i1, i2) = Pair(seed, rootNodes: 0, leafNodes: 1);
        var clients = JoinAll(sim, i2, 1);
        var node = sim.DataNode(201);
        var control = sim[2];
        var valid = ClusterCodec.Assign(new AssignMessage(201, 1, Session(9), false, [new FlowLabel(77)], new GatewayId(1), 0, [new FlowLabel(5)], [], ["x"], []));
        var random = new Random(seed);
        int n = 0;
        for (int cut = 0; cut < valid.Length; cut++, n++)
        {
            node.OnControlFrame(valid.AsSpan(0, cut), sim.Now);
            control.OnDataNodeFrame(valid.AsSpan(0, cut), sim.Now);
        }

        for (int i = 0; i < 5000; i++, n++)
        {
            var junk = valid.ToArray();
            junk[random.Next(junk.Length)] ^= (byte)random.Next(1, 256);
            if (random.Next(4) == 0)
            {
                junk = new byte[random.Next(0, 80)];
                random.NextBytes(junk);
            }

            if (junk.Length > 0 && random.Next(8) != 0)
            {
                junk[0] = ClusterCodec.Version;
            }
            node.OnControlFrame(junk, sim.Now);
            control.OnDataNodeFrame(junk, sim.Now);
        }

        Assert.True(node.Counters.MalformedTotal > n / 2, $"only {node.Counters.MalformedTotal} of {n} counted");
        Assert.True(control.Cluster!.Counters.MalformedTotal + control.Cluster.Counters.UnknownNode > n * 9 / 10);
        // A corrupted ASSIGN can still parse (a flipped letter in the session name): the data node trusts its control
        // node, but such sessions are soft state, bounded by MaxSessionsPerNode, and expire when nobody refreshes them.
        output.WriteLine($"{node.Counters.MalformedTotal} of {n} refused by the data node; {node.SessionCount} sessions right after");
        Assert.InRange(node.SessionCount, 1, new ClusterOptions().MaxSessionsPerNode);
        sim.RunFor(new ClusterOptions().SessionHold + TimeSpan.FromSeconds(2));
        Assert.Equal(1, node.SessionCount);

        // The real session still works (its ASSIGN is refreshed every 10 s).
        Publish(sim, i1, 1, 0, 10, TimeSpan.FromMilliseconds(10));
        Assert.Equal(Enumerable.Range(0, 10), Ids(clients[0]));
    }

    [Theory]
    [InlineData(11, 0)]
    [InlineData(12, 1)]
    [InlineData(13, 2)]
    public void UnderDatagramLossABulkSessionThroughDataNodesLosesNothingAndARealTimeOneLosesAsBefore(int seed, int rootNodes)
    {
        // rootNodes 0: g1 (unclustered) → g2's data node; 1 or 2: g1's data node → g2's data node.
        var (sim, i1, i2) = Pair(seed, rootNodes, leafNodes: 1);
        var bulk = i2.Join(SessionName.Parse("bfed://1/b/d"));
        var realTime = i2.Join(SessionName.Parse("bfed://1/r/d/?content=real-time"));
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(MediatorReplyKind.Translation, bulk.Reply!.Kind);
        Assert.Equal(MediatorReplyKind.Translation, realTime.Reply!.Kind);
        sim.DatagramLoss = 0.2;

        const int count = 300;
        for (int p = 0; p < count; p++)
        {
            i1.Publish("b/d", Packet(p));
            i1.Publish("r/d", Packet(p));
            sim.RunFor(TimeSpan.FromMilliseconds(10));
        }

        sim.RunFor(TimeSpan.FromMilliseconds(500));
        Assert.Equal(Enumerable.Range(0, count), Ids(bulk)); // every packet, once, in order
        var got = Ids(realTime);
        Assert.Equal(got.Distinct().Order(), got);
        Assert.InRange(got.Count, count / 2, count - 10); // about 20 % lost: UDP, no retransmission
        Assert.Equal(count - got.Count, sim.DatagramsLost);
        Assert.Equal(count, sim.DatagramDataFrames);
        Assert.Equal(count, sim.ReliableDataFrames);
        if (rootNodes > 0)
        {
            Assert.False(sim.DataSentByNode.ContainsKey(0)); // no DATA frame left a control node
        }
        output.WriteLine($"seed {seed}, root data nodes {rootNodes}: bulk {Ids(bulk).Count} of {count}, real-time {got.Count} of {count} ({sim.DatagramsLost} datagrams lost)");
    }
}
