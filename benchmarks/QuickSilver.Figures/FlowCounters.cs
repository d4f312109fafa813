using System.Globalization;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// Where a run's rate went, from the counters the simulation exposes: the senders' packets (new and resent, and why),
/// their window stalls, status reports and congestion-window cuts, and every member's receive CPU (datagrams taken
/// times the cost model's per-datagram cost, over the window). One line per run in the console output.
/// </summary>
internal sealed record FlowCounters(
    long NewPackets, long OnStatus, long OnNak, long OnTimeout, long WindowBlocked, long StatusReports, long CongestionCuts,
    long ReportsRequested, long[] Processed, long[] QueueDrops, long SenderProcessed, TimeSpan[] Held, long LeaderRepairs, long LeaderResent, long LeaderLeftOnOverflow, long RedundantRepairs)
{
    public static FlowCounters Of(RegionCluster cluster)
    {
        var senders = cluster.Senders.Select(s => s.Sender!).ToArray();
        var members = cluster.LiveMembers.ToArray();
        return new FlowCounters(
            senders.Sum(s => (long)s.LastSequence), senders.Sum(s => s.RetransmittedOnStatus), senders.Sum(s => s.RetransmittedOnNak),
            senders.Sum(s => s.RetransmittedOnTimeout), senders.Sum(s => s.WindowBlocked), senders.Sum(s => s.StatusReports),
            senders.Sum(s => s.CongestionDecreases), senders.Sum(s => s.ReportsRequested),
            [.. members.Select(n => n.Sim.ProcessedDatagrams)], [.. members.Select(n => n.Sim.ReceiveQueueDrops)],
            cluster.Senders.Where(s => !s.IsMember).Sum(s => s.Sim.ProcessedDatagrams),
            [.. Enum.GetValues<WindowHold>().Select(c => TimeSpan.FromTicks(senders.Sum(s => s.HeldBy(c).Ticks)))],
            members.Sum(n => n.Member!.FlowStatus?.Repair?.Sent ?? 0), members.Sum(n => n.Member!.FlowStatus?.Repair?.Resent ?? 0),
            members.Sum(n => n.Member!.FlowStatus?.Repair?.LeftOnOverflow ?? 0), members.Sum(n => n.Member!.RedundantRepairs));
    }

    /// <summary>The counters' change since <paramref name="start"/> over <paramref name="seconds"/> of virtual time, as
    /// one line: per-second rates, and the members' receive CPU use (mean, and the busiest member's, with its datagrams
    /// a second).</summary>
    public string Since(FlowCounters start, double seconds)
    {
        if (seconds <= 0 || Processed.Length != start.Processed.Length)
        {
            return "";
        }

        double cost = Testbed.ProcessingCostPerPacket.TotalSeconds;
        double[] perSecond = [.. Processed.Select((p, i) => (p - start.Processed[i]) / seconds)];
        int busiest = Array.IndexOf(perSecond, perSecond.Max());
        long drops = QueueDrops.Sum() - start.QueueDrops.Sum();
        double Rate(long now, long before) => (now - before) / seconds;
        var c = CultureInfo.InvariantCulture;
        var held = Held;
        string holds = string.Join(", ", Enum.GetValues<WindowHold>().Skip(1)
            .Select(h => string.Create(c, $"{h} {100 * (held[(int)h] - start.Held[(int)h]).TotalSeconds / seconds:F1} %")));
        return string.Create(c,
            $"new {Rate(NewPackets, start.NewPackets):F0}/s, resent on status {Rate(OnStatus, start.OnStatus):F0}/s, on NAK {Rate(OnNak, start.OnNak):F0}/s, on timeout {Rate(OnTimeout, start.OnTimeout):F0}/s; "
            + $"leader repairs {Rate(LeaderRepairs, start.LeaderRepairs):F0}/s (of them sent again after the hold-off {Rate(LeaderResent, start.LeaderResent):F0}/s; reports left to the sender on overflow {Rate(LeaderLeftOnOverflow, start.LeaderLeftOnOverflow):F0}/s; peers' repairs a member already had {Rate(RedundantRepairs, start.RedundantRepairs):F0}/s); "
            + $"window-blocked {Rate(WindowBlocked, start.WindowBlocked):F0}/s; status reports at the sender {Rate(StatusReports, start.StatusReports):F0}/s; "
            + $"congestion cuts {CongestionCuts - start.CongestionCuts}, reports requested {ReportsRequested - start.ReportsRequested}; "
            + $"member receive CPU mean {100 * perSecond.Average() * cost:F1} %, busiest (slot {busiest}) {100 * perSecond[busiest] * cost:F1} % = {perSecond[busiest]:F0} datagrams/s, "
            + $"least {100 * perSecond.Min() * cost:F1} %; receive-queue drops {drops}; "
            + $"senders outside the region: receive CPU {100 * Rate(SenderProcessed, start.SenderProcessed) * cost:F1} %; "
            + $"held at the byte limit (share of the window's time, by what set it): {holds}");
    }
}
