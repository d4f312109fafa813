using QuickSilver.Aer;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// AER groups beside QSM groups on the same nodes, in the whole-stack simulation (the node's stack with its AER layer,
/// the GMS, virtual time, seeded loss): an application chooses the transport per group and both deliver every message
/// once, in order (docs/aer.md, "Per group in QuickSilverNode").
/// </summary>
public sealed class AerGroupSimulationTests(ITestOutputHelper output)
{
    private const uint Session = 15;
    private static readonly NetAddress Wan = new(0xEFFF0F01u, 47100);

    /// <summary><paramref name="count"/> nodes in the QSM group "lan" (settled) and the AER group "wan": node 0 the source,
    /// node 1 a repair server for the rest (<see cref="JoinWideArea"/>).</summary>
    private static (List<NodeCluster.Node> All, NodeCluster.Node Source, NodeCluster.Node RepairServer, List<NodeCluster.Node> Receivers) BothGroups(NodeCluster cluster, int count)
    {
        var all = cluster.AddNodes(count);
        var receivers = all.Skip(2).ToList();
        cluster.Join(all, "lan");
        cluster.SettleViews("lan", all);
        JoinWideArea(cluster, all[0], all[1], receivers);
        return (all, all[0], all[1], receivers);
    }

    /// <summary>Every one of <paramref name="messages"/> in order: in "lan" at <paramref name="members"/>, in "wan" at
    /// <paramref name="receivers"/>.</summary>
    private static void AssertEveryMessageInOrder(IEnumerable<NodeCluster.Node> members, IEnumerable<NodeCluster.Node> receivers, NodeCluster.Node source, int messages)
    {
        var expected = Enumerable.Range(1, messages).ToList();
        foreach (var node in members)
        {
            Assert.Equal(expected, node.Groups["lan"].Received[source.Id]);
        }

        foreach (var r in receivers)
        {
            Assert.Equal(expected, r.Groups["wan"].Received[AerGroupSession.SourceSender]);
        }
    }

    /// <summary>The AER group "wan": <paramref name="repairServer"/> runs a repair server in its own stack (the builder
    /// option's path: AerGroups.AddRepairServers) for <paramref name="receivers"/>, the source sends to it; then 300 ms
    /// for the first SPMs to reach the repair server and the receivers.</summary>
    private static void JoinWideArea(NodeCluster cluster, NodeCluster.Node source, NodeCluster.Node repairServer, IReadOnlyList<NodeCluster.Node> receivers)
    {
        repairServer.AddRepairServer(new AerRepairServerOptions { Session = Session, Group = Wan, Source = source.Address, Children = [.. receivers.Select(r => r.Address)] });
        foreach (var r in receivers)
        {
            r.JoinAer("wan", new AerGroupOptions { Session = Session, Group = Wan, Source = source.Address });
        }

        source.JoinAer("wan", new AerGroupOptions { Session = Session, Group = Wan, Source = source.Address, Children = [repairServer.Address] });
        cluster.Network.RunFor(TimeSpan.FromMilliseconds(300));
    }

    [Theory]
    [InlineData(1501, false)]
    [InlineData(1502, false)]
    [InlineData(1503, false)]
    [InlineData(1504, true)]
    public void An_AER_group_and_a_QSM_group_on_the_same_nodes_both_deliver_everything_in_order_under_loss(int seed, bool encrypted)
    {
        const int Messages = 2_000;
        // Encrypted: the node's datagram security sits under every layer, the AER layer's included.
        var security = encrypted ? new DatagramSecurityOptions { Mode = DatagramSecurity.Encrypt, ClusterSecret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)] } : null;
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan, security: security);
        // The QSM group spans all five nodes; the AER group is the source, and three receivers under a repair server that
        // node 1 runs in its own stack (the builder option's path: AerGroups.AddRepairServers).
        var (all, source, repairServer, receivers) = BothGroups(cluster, 5);
        source.PublishNumbered("lan", Messages, perSecond: 2_000);
        source.PublishNumbered("wan", Messages);

        bool done = cluster.Network.RunUntil(
            () => all.All(n => n.Groups["lan"].CountFrom(source.Id) >= Messages) && receivers.All(r => r.Groups["wan"].Count >= Messages),
            TimeSpan.FromMinutes(3));
        var layers = all.Select(n => n.AerGroups!.Layer).ToList();
        foreach (var node in all)
        {
            output.WriteLine($"{node.Label} {node.Address}: {node.Stack!.Describe()}");
        }

        Assert.True(done, $"seed {seed}: lan {string.Join(",", all.Select(n => n.Groups["lan"].CountFrom(source.Id)))}, wan {string.Join(",", receivers.Select(r => r.Groups["wan"].Count))}");
        AssertEveryMessageInOrder(all, receivers, source, Messages);

        Assert.True(cluster.Network.Drops[DropReason.LinkLoss] > 50, $"seed {seed}: too little loss to test recovery");
        Assert.True(receivers.Sum(r => r.AerGroups!.Layer.Counters.RepairsReceived) > 0, $"seed {seed}: no AER repair: the loss did not touch the AER group");
        Assert.True(layers[1].Counters.NaksReceived > 0, $"seed {seed}: the receivers never NAKed the in-node repair server");
        if (encrypted)
        {
            Assert.All(all.Skip(1), n => Assert.True(n.Stack!.Security!.Counters.Opened > Messages, $"{n.Label}: the AER datagrams did not go through datagram security"));
        }
    }

    [Fact]
    public void When_the_node_running_the_repair_server_crashes_both_groups_still_deliver_everything_to_the_live_members()
    {
        const int Seed = 1521;
        const int Messages = 3_000;
        var cluster = new NodeCluster(Seed, LinkOptions.LossyLan);
        var (all, source, repairServer, receivers) = BothGroups(cluster, 4);
        source.PublishNumbered("lan", Messages, perSecond: 1_000);
        source.PublishNumbered("wan", Messages);
        Assert.True(cluster.Network.RunUntil(() => receivers.All(r => r.Groups["wan"].Count >= 300), TimeSpan.FromMinutes(1)), $"seed {Seed}: the stream did not start");
        Assert.True(receivers.All(r => r.Groups["wan"].Count < Messages), $"seed {Seed}: the stream ended before the crash; the test proves nothing");
        repairServer.Sim.Crash();
        long naksBefore = source.AerGroups!.Layer.Counters.NaksReceived;

        var live = all.Where(n => n != repairServer).ToList();
        bool done = cluster.Network.RunUntil(
            () => live.All(n => n.Groups["lan"].CountFrom(source.Id) >= Messages) && receivers.All(r => r.Groups["wan"].Count >= Messages),
            TimeSpan.FromMinutes(3));
        Assert.True(done, $"seed {Seed}: lan {string.Join(",", live.Select(n => n.Groups["lan"].CountFrom(source.Id)))}, wan {string.Join(",", receivers.Select(r => r.Groups["wan"].Count))}");
        AssertEveryMessageInOrder(live, receivers, source, Messages);
        foreach (var r in receivers)
        {
            Assert.Equal(source.Address, r.Groups["wan"].Aer!.Receiver!.CurrentUpstream);
        }

        Assert.True(source.AerGroups.Layer.Counters.NaksReceived > naksBefore, $"seed {Seed}: the receivers never fell back to NAKing the source");
    }

    [Fact]
    public void A_slow_reader_of_an_AER_group_holds_delivery_at_its_bound_and_loses_nothing()
    {
        const int Seed = 1511;
        const int Messages = 3_000;
        const int Bound = 64;
        var cluster = new NodeCluster(Seed, LinkOptions.LossyLan);
        var all = cluster.AddNodes(3);
        var source = all[0];
        var slow = all[1];
        var fast = all[2];
        foreach (var r in new[] { slow, fast })
        {
            r.JoinAer("wan", new AerGroupOptions { Session = Session, Group = Wan, Source = source.Address });
        }

        source.JoinAer("wan", new AerGroupOptions { Session = Session, Group = Wan, Source = source.Address });
        var reader = slow.Groups["wan"];
        reader.ReceiveBuffer = Bound;

        // The slow reader takes 10 messages every 5 ms (2,000/s), on its node's core thread.
        var drain = new Alarm(self =>
        {
            reader.Drain(10, slow.GroupLayer!);
            if (reader.Count < Messages || reader.Queued > 0)
            {
                slow.Sim.ScheduleAfter(self, TimeSpan.FromMilliseconds(5));
            }
        });
        slow.Sim.TryPost(_ => slow.Sim.ScheduleAfter(drain, TimeSpan.FromMilliseconds(5)), null);
        cluster.Network.RunFor(TimeSpan.FromMilliseconds(300));
        source.PublishNumbered("wan", Messages);

        bool done = cluster.Network.RunUntil(
            () => fast.Groups["wan"].Count >= Messages && reader.Received.GetValueOrDefault(AerGroupSession.SourceSender)?.Count >= Messages,
            TimeSpan.FromMinutes(3));
        output.WriteLine(slow.Stack!.Describe());
        Assert.True(done, $"seed {Seed}: fast {fast.Groups["wan"].Count}, slow {reader.Count} (queued {reader.Queued})");
        var expected = Enumerable.Range(1, Messages).ToList();
        Assert.Equal(expected, reader.Received[AerGroupSession.SourceSender]);
        Assert.Equal(expected, fast.Groups["wan"].Received[AerGroupSession.SourceSender]);
        Assert.True(reader.Pauses > 0, "the reader never fell behind: the test proves nothing");
        Assert.True(reader.MaxQueued <= Bound, $"the queue grew to {reader.MaxQueued}, beyond its bound {Bound}");
    }
}
