using System.Diagnostics;
using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// The paper's Figure 1 on the whole stack (GMS, group layer, regions) in simulation: every node in every group, so
/// the groups map to one region; one sender publishes 100-byte messages into all of them round robin (one pull feed
/// per group, pumped in turn). Throughput is what every receiver delivered in the window, summed over the groups.
/// </summary>
internal static class GroupsRun
{
    public sealed record Result(int Groups, double MessagesPerSecond, long Packets, double WallSeconds, bool StoppedEarly, double SettleSeconds);

    public static Result Run(int nodes, int groups, RunLength length)
    {
        var wall = Stopwatch.StartNew();
        // Ethernet-sized data packets (the paper's 100 Mbit/s LAN), the GMS's default timing, the paper's 1 s token.
        var cluster = new NodeCluster(Testbed.Seed, Testbed.Link(0), new RegionOptions { MaxPacketBytes = Testbed.MaxDatagramBytes, FlowControl = Testbed.FlowControl, ReceiveWindowBytes = Testbed.ReceiveWindowBytes, CongestionControl = Testbed.CongestionControl, GapReportPackets = Testbed.GapReportPackets }, configureNode: sim =>
        {
            sim.ProcessingCostPerPacket = Testbed.ProcessingCostPerPacket;
            sim.ReceiveQueueLimit = Testbed.ReceiveQueueLimit;
        }, gms: new Membership.Service.GmsOptions());
        cluster.SettleLimit = TimeSpan.FromMinutes(10); // 25 × 1,024 joins, one GMS request each
        var all = cluster.AddNodes(nodes);
        var names = Enumerable.Range(0, groups).Select(g => $"topic/{g}").ToArray();
        cluster.Join(all, keepPayloads: false, names);
        cluster.SettleViews(names[^1], all);
        double settle = cluster.Network.Now.TotalSeconds;
        var sender = all[0];
        foreach (var name in names)
        {
            sender.PublishNumbered(name, int.MaxValue, Testbed.PayloadBytes);
        }

        var receivers = all.Skip(1).ToList();
        long Delivered() => names.Sum(g => receivers.Min(n => n.Groups[g].Count));
        cluster.Network.RunFor(length.Warmup);
        long before = Delivered();
        var start = cluster.Network.Now;
        bool complete = cluster.Network.RunUntil(() => wall.Elapsed > length.WallBudget, length.Window) is false;
        double seconds = (cluster.Network.Now - start).TotalSeconds;
        long packets = sender.Region!.Senders.Values.Sum(s => (long)s.LastSequence);
        return new Result(groups, (Delivered() - before) / Math.Max(seconds, 1e-9), packets, wall.Elapsed.TotalSeconds, !complete, settle);
    }
}
