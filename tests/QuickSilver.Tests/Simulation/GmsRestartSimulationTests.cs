using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// The single (unreplicated) GMS crashes in the middle of a stream and starts again empty, with a new epoch, at the
/// same address, on virtual time under 1 % loss (docs/membership.md: every node registers again under a new id and
/// re-joins its groups). Seeded; a failing seed is in the message.
/// </summary>
public sealed class GmsRestartSimulationTests
{
    /// <summary>While the GMS is down the region goes on under its last view (the stream does not wait for it); once it
    /// is back every node registers again (ids are drawn anew, so a node may now hold another node's old id), re-joins
    /// "prices", and the views of the new epoch replace the old ones. Messages published on either side of the switch
    /// all arrive, once and in order: the messages of packets the publisher had not had acknowledged at its switch are sent
    /// again in the new epoch, and each member drops those it had (docs/membership.md, "A restarted GMS").</summary>
    [Theory]
    [InlineData(931)]
    [InlineData(932)]
    [InlineData(2080)] // a member that switched late: its old region's flow reports were taken as the new region's
    public void The_single_GMS_restarts_mid_stream_and_every_member_still_gets_every_message_once_in_order(int seed)
    {
        const int Messages = 20_000; // 6.7 s at 3,000 a second: still streaming when the new epoch's views come
        var (cluster, all, sender) = Streaming(seed, Messages);
        Assert.True(all.Any(n => Numbers(n, sender).Count is > 0 and < Messages), $"seed {seed}: the crash is not mid-stream");

        cluster.CrashGms();
        cluster.Network.RunFor(TimeSpan.FromSeconds(2)); // down for two failure timeouts: nodes keep their views meanwhile
        cluster.RestartGms();

        // Every node registers again with the new GMS (its epoch is new; ids are drawn again from 1, in arrival order)
        // and, after the restart grace, gets the new epoch's views.
        ulong epoch = cluster.Gms!.Epoch;
        cluster.Require(() => all.All(n => n.Registered && n.Gms!.ViewsEpoch == epoch), TimeSpan.FromSeconds(30), "views of the restarted GMS");
        Assert.True(sender.Groups["prices"].Published!.Next < Messages, $"seed {seed}: the stream ended before the switch");
        cluster.SettleViews("prices", all);
        bool done = cluster.Network.RunUntil(() => all.All(n => Numbers(n, sender).Count >= Messages), TimeSpan.FromMinutes(2));
        Assert.True(done, $"seed {seed}: not everything was delivered: {Check(all, sender, Messages)}");
        Assert.Null(Check(all, sender, Messages));
        Assert.Equal(all.Count, cluster.Gms.State.NodeCount);
        Assert.All(all, n => Assert.Equal(1, n.Region!.NewEpochs)); // each node started afresh once
    }

    /// <summary>A member crashes while the GMS is down: nobody can declare it dead then, so the region's token and purge
    /// wait for it; the restarted GMS never hears from it, and the views of the new epoch leave it out. The survivors
    /// still get every message once and in order.</summary>
    [Theory]
    [InlineData(933)]
    [InlineData(934)]
    public void A_member_that_crashes_while_the_GMS_is_down_is_left_out_and_the_others_lose_nothing(int seed)
    {
        const int Messages = 6_000;
        var (cluster, all, sender) = Streaming(seed, Messages);

        cluster.CrashGms();
        cluster.Network.RunFor(TimeSpan.FromMilliseconds(300));
        all[^1].Sim.Crash();
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        cluster.RestartGms();

        var survivors = all.Take(all.Count - 1).ToList();
        ulong epoch = cluster.Gms!.Epoch;
        cluster.Require(() => survivors.All(n => n.Registered && n.Gms!.ViewsEpoch == epoch), TimeSpan.FromSeconds(30), "views of the restarted GMS");
        cluster.SettleViews("prices", survivors);
        bool done = cluster.Network.RunUntil(() => survivors.All(n => Numbers(n, sender).Count >= Messages), TimeSpan.FromMinutes(2));
        Assert.True(done, $"seed {seed}: not everything was delivered: {Check(survivors, sender, Messages)}");
        Assert.Null(Check(survivors, sender, Messages));
        Assert.Equal(survivors.Count, cluster.Gms.State.NodeCount);
    }

    /// <summary>The restart grace (<see cref="Membership.Service.GmsOptions.RestartGrace"/>): a restarted GMS hears a
    /// Hello naming its earlier epoch and holds joins back while the old members register again, so the first view of
    /// the new epoch holds them all (view 1). Without the grace, the nodes join in as many batches as their
    /// registrations straddle, and the group's view is past 1 before everyone is in it: a sender would send its backlog
    /// to a view some old members are not in, and they would miss it (seen before the grace existed).</summary>
    [Theory]
    [InlineData(935, true)]
    [InlineData(935, false)]
    [InlineData(936, true)]
    [InlineData(936, false)]
    public void After_a_restart_the_first_view_holds_every_old_member_only_with_the_grace(int seed, bool grace)
    {
        var options = new Membership.Service.GmsOptions
        {
            BatchInterval = TimeSpan.FromMilliseconds(50),
            HeartbeatInterval = TimeSpan.FromMilliseconds(200),
            FailureTimeout = TimeSpan.FromSeconds(1),
            RestartGrace = grace ? TimeSpan.FromSeconds(2) : TimeSpan.Zero,
        };
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan, gms: options);
        var all = cluster.AddNodes(6);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        cluster.CrashGms();
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        cluster.RestartGms();
        ulong epoch = cluster.Gms!.Epoch;
        cluster.Require(() => all.All(n => n.Registered && n.Gms!.ViewsEpoch == epoch), TimeSpan.FromSeconds(30), "views of the restarted GMS");
        cluster.SettleViews("prices", all);
        Assert.Equal(grace ? 1 : 0, cluster.Gms.RestartGraces);
        var first = all.Select(n => n.Groups["prices"].View!.ViewNumber).Max();
        if (grace)
        {
            Assert.Equal(1u, first);
        }
        else
        {
            Assert.True(first > 1, $"seed {seed}: without the grace every node still made the first view");
        }
    }

    /// <summary>Overlapping groups (three regions of overlap) and two senders: the GMS restarts mid-stream, every node
    /// starts afresh at the new epoch, and every member of each group still gets every message of each sender once, in
    /// order (the regions of the new epoch have new ids, and each sender's unacknowledged messages go again into them).</summary>
    [Theory]
    [InlineData(3000)]
    [InlineData(3001)]
    public void With_overlapping_groups_and_two_senders_a_restart_loses_nothing(int seed)
    {
        var (cluster, all) = RegionMoveSimulationTests.OverlappingGroups(seed, waitForCurrentViews: true);
        RegionMoveSimulationTests.Publish(cluster, all);
        cluster.Network.RunFor(TimeSpan.FromSeconds(1));
        cluster.CrashGms();
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        cluster.RestartGms();
        ulong epoch = cluster.Gms!.Epoch;
        cluster.Require(() => all.All(n => n.Registered && n.Gms!.ViewsEpoch == epoch), TimeSpan.FromSeconds(30), "views of the restarted GMS");
        RegionMoveSimulationTests.AssertEverythingArrives(cluster, all, seed);
    }

    /// <summary>Six nodes in "prices" under 1 % loss, the first publishing <paramref name="messages"/> at 3,000 a
    /// second, one second into the stream.</summary>
    private static (NodeCluster Cluster, List<NodeCluster.Node> All, NodeCluster.Node Sender) Streaming(int seed, int messages)
    {
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan);
        var all = cluster.AddNodes(6);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        var sender = all[0];
        sender.PublishNumbered("prices", messages, perSecond: 3_000);
        cluster.Network.RunFor(TimeSpan.FromSeconds(1));
        return (cluster, all, sender);
    }

    /// <summary>What <paramref name="node"/> received from <paramref name="sender"/> under each id the sender had, in
    /// the order of its ids.</summary>
    private static List<int> Numbers(NodeCluster.Node node, NodeCluster.Node sender)
        => [.. sender.Ids.SelectMany(id => node.Groups["prices"].Received.GetValueOrDefault(id) ?? [])];

    private static string? Check(IEnumerable<NodeCluster.Node> nodes, NodeCluster.Node sender, int count)
    {
        foreach (var node in nodes)
        {
            var got = Numbers(node, sender);
            if (!got.SequenceEqual(Enumerable.Range(1, count)))
            {
                int firstWrong = Enumerable.Range(0, Math.Min(got.Count, count)).FirstOrDefault(i => got[i] != i + 1, -1);
                return $"node {node.Label} has {got.Count} of {count} from the sender's ids [{string.Join(", ", sender.Ids)}]"
                    + (firstWrong >= 0 ? $", first out of order at {firstWrong}: {got[firstWrong]}" : "")
                    + $", distinct {got.Distinct().Count()}";
            }
        }

        return null;
    }
}
