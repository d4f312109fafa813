using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// Nodes that move region while a sender still uses its older view of the regions (docs/qsm.md, "Leaving, crashes and
/// region changes"). Nine nodes join three overlapping groups one after another, so the regions of overlap split while
/// the joins settle; two senders start as soon as every node's views cover the groups, some of them before their own
/// views are current. Under 1 % loss every member of each group must get every message of each sender once, in order.
/// Seeds 3017 and 3084 lost the first 57 messages at the members that had moved (the sender numbered them into its
/// older view of the region those members had left) before the group layer sent them again into the new regions.
/// </summary>
public sealed class RegionMoveSimulationTests
{
    public const int Messages = 15_000;

    [Theory]
    [InlineData(3000)]
    [InlineData(3017)]
    [InlineData(3084)]
    public void Members_that_move_region_under_a_senders_older_view_still_get_every_message(int seed)
    {
        var (cluster, all) = OverlappingGroups(seed, waitForCurrentViews: false);
        Publish(cluster, all);
        AssertEverythingArrives(cluster, all, seed);
    }

    /// <summary>Nine nodes in groups a (all), b (the first five) and c (the last six): three regions of overlap.</summary>
    internal static (NodeCluster Cluster, List<NodeCluster.Node> All) OverlappingGroups(int seed, bool waitForCurrentViews)
    {
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan);
        var all = cluster.AddNodes(9);
        cluster.Join(all, "a");
        cluster.Join(all.Take(5), "b");
        cluster.Join(all.Skip(3), "c");
        cluster.SettleViews("a", all);
        cluster.SettleViews("b", [.. all.Take(5)]);
        cluster.SettleViews("c", [.. all.Skip(3)]);
        if (waitForCurrentViews)
        {
            cluster.Require(() => all.All(n => n.Groups.All(g => g.Value.View?.ViewNumber == cluster.Gms!.State.FindGroup(g.Key)!.ViewNumber)),
                TimeSpan.FromSeconds(10), "every node's views current");
        }

        return (cluster, all);
    }

    /// <summary>The first node publishes in a, the sixth in c, each <see cref="Messages"/> at 3,000 a second.</summary>
    internal static void Publish(NodeCluster cluster, List<NodeCluster.Node> all)
    {
        all[0].PublishNumbered("a", Messages, perSecond: 3_000);
        all[5].PublishNumbered("c", Messages, perSecond: 3_000);
    }

    internal static void AssertEverythingArrives(NodeCluster cluster, List<NodeCluster.Node> all, int seed)
    {
        var c = all.Skip(3).ToList();
        bool done = cluster.Network.RunUntil(() => all.All(n => Numbers(n, "a", all[0]).Count >= Messages) && c.All(n => Numbers(n, "c", all[5]).Count >= Messages),
            TimeSpan.FromMinutes(2));
        string? bad = Check(all, "a", all[0]) ?? Check(c, "c", all[5]);
        Assert.True(done && bad is null, $"seed {seed}: {bad ?? "not finished"}");
    }

    /// <summary>What <paramref name="node"/> received in <paramref name="group"/> from <paramref name="sender"/> under each
    /// id the sender had, in the order of its ids.</summary>
    private static List<int> Numbers(NodeCluster.Node node, string group, NodeCluster.Node sender)
        => [.. sender.Ids.SelectMany(id => node.Groups[group].Received.GetValueOrDefault(id) ?? [])];

    private static string? Check(IEnumerable<NodeCluster.Node> nodes, string group, NodeCluster.Node sender)
    {
        foreach (var node in nodes)
        {
            var got = Numbers(node, group, sender);
            if (!got.SequenceEqual(Enumerable.Range(1, Messages)))
            {
                int firstWrong = Enumerable.Range(0, Math.Min(got.Count, Messages)).FirstOrDefault(i => got[i] != i + 1, -1);
                return $"{group}: {node.Label} has {got.Count} of {Messages} from [{string.Join(", ", sender.Ids)}], distinct {got.Distinct().Count()}"
                    + (firstWrong >= 0 ? $", first out of order at {firstWrong}: {got[firstWrong]}" : "");
            }
        }

        return null;
    }
}
