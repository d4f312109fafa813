using System.Globalization;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// Where the flow reports' aggregation spends the members' CPU (issue 11, the block aggregator's load): every member's
/// received datagrams by packet type, the member reports and partition leaders' aggregates it took, and the aggregates
/// sent by hop and by trigger (<see cref="ReceiverStatus.Forwards"/>). One line per run in the console output: the
/// busiest member's datagrams a second by kind, and the aggregates a second over the region by hop and trigger.
/// </summary>
internal sealed record AggregationCounters(long[][] ByType, long[] Partial, long[] Received, long[] Forwards)
{
    public static AggregationCounters Of(RegionCluster cluster)
    {
        var members = cluster.LiveMembers.ToArray();
        var forwards = new long[3 * (int)ForwardTrigger.Count];
        foreach (var node in members)
        {
            if (node.Member!.FlowStatus is { } status)
            {
                for (int i = 0; i < forwards.Length; i++)
                {
                    forwards[i] += status.Forwards[i];
                }
            }
        }

        return new AggregationCounters(
            [.. members.Select(n => (long[])n.Sim.ProcessedByType.Clone())],
            [.. members.Select(n => n.Member!.FlowStatus?.PartialReportsReceived ?? 0)],
            [.. members.Select(n => n.Member!.FlowStatus?.ReportsReceived ?? 0)],
            forwards);
    }

    public string Since(AggregationCounters start, double seconds)
    {
        if (seconds <= 0 || ByType.Length != start.ByType.Length)
        {
            return "";
        }

        var c = CultureInfo.InvariantCulture;
        double[] total = [.. ByType.Select((t, i) => (t.Sum() - start.ByType[i].Sum()) / seconds)];
        int busiest = Array.IndexOf(total, total.Max());
        double Rate(long now, long before) => (now - before) / seconds;
        long Kind(int member, int type) => ByType[member][type] - start.ByType[member][type];
        var kinds = Enumerable.Range(0, 256).Where(t => Kind(busiest, t) > 0)
            .Select(t => string.Create(c, $"{TypeName(t)} {Kind(busiest, t) / seconds:F0}"));
        double partial = Rate(Partial[busiest], start.Partial[busiest]);
        double memberReports = Rate(Received[busiest], start.Received[busiest]) - partial;
        var hops = Enum.GetValues<AggregateHop>().Select(hop =>
        {
            var byTrigger = Enumerable.Range(0, (int)ForwardTrigger.Count)
                .Select(t => (Trigger: (ForwardTrigger)t, Count: Forwards[((int)hop * (int)ForwardTrigger.Count) + t] - start.Forwards[((int)hop * (int)ForwardTrigger.Count) + t]))
                .Where(x => x.Count > 0).ToArray();
            return string.Create(c, $"{hop} {byTrigger.Sum(x => x.Count) / seconds:F0}/s ({string.Join(", ", byTrigger.Select(x => string.Create(c, $"{x.Trigger} {x.Count / seconds:F0}")))})");
        });
        return string.Create(c,
            $"busiest member (slot {busiest}) takes {total[busiest]:F0} datagrams/s: {string.Join(", ", kinds)}; of its reports, member {memberReports:F0}/s, partial aggregates {partial:F0}/s; "
            + $"aggregates sent in the region by hop (and trigger): {string.Join("; ", hops)}");
    }

    private static string TypeName(int type) => type switch
    {
        5 => "region data (new and resent)",
        34 => "flow status",
        3 => "reliable data (token, NAK, pull)",
        4 => "reliable ack",
        6 => "reliable fragment",
        _ => $"type {type}",
    };
}
