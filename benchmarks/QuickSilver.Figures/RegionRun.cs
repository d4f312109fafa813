using System.Diagnostics;
using System.Globalization;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// Runs one <see cref="RunSpec"/> on the <see cref="Testbed"/> cost model. Throughput is counted, never estimated:
/// messages every member delivered by the end of the window minus those delivered by its start, over the window's
/// virtual length. Latencies are sampled for packets first sent in the window's first part (so that late packets have
/// had time to be acknowledged or repaired).
/// </summary>
internal static class RegionRun
{
    private static readonly TimeSpan Step = TimeSpan.FromSeconds(1);

    public static RunResult Execute(RunSpec spec, RunLength length)
    {
        var wall = Stopwatch.StartNew();
        var tokenInterval = TimeSpan.FromSeconds(spec.TokenIntervalSeconds);
        var cluster = new RegionCluster(Testbed.Seed, spec.Members, spec.Senders, new RegionClusterOptions
        {
            Link = Testbed.Link(spec.LossRate),
            Region = new RegionOptions
            {
                ReplicationFactor = spec.ReplicationFactor,
                FlowControl = Testbed.FlowControl,
                ReceiveWindowBytes = Testbed.ReceiveWindowBytes, CongestionControl = Testbed.CongestionControl, GapReportPackets = Testbed.GapReportPackets,
                PartitionShare = Testbed.PartitionShare,
                LeaderRepair = Testbed.LeaderRepair,
                TokenInterval = tokenInterval,
                SenderWindow = spec.SenderWindow,
                MaxHeldPackets = Math.Max(new RegionOptions().MaxHeldPackets, 4 * spec.SenderWindow), // the window plus the purge lag
            },
            Rate = Testbed.Rate,
            ProcessingCostPerPacket = Testbed.ProcessingCostPerPacket,
            ReceiveQueueLimit = Testbed.ReceiveQueueLimit,
            PayloadBytes = Testbed.PayloadBytes,
            TrackRecovery = true,
        });
        cluster.SendFromAll();

        var trace = new RateTrace(cluster);
        bool early = !RunBounded(cluster, length.Warmup, wall, length.WallBudget, trace);
        var start = cluster.Network.Now;
        long deliveredAtStart = cluster.DeliveredToAll();
        long[] perSenderAtStart = [.. cluster.Senders.Select(s => cluster.DeliveredToAll(s))];
        var tail = TimeSpan.FromTicks(Math.Min(length.Window.Ticks / 2, tokenInterval.Ticks * 5));
        cluster.Timeline.MeasureFrom = start;
        cluster.Timeline.MeasureUntil = start + length.Window - tail;
        var drops = Snapshot(cluster);
        foreach (var node in cluster.LiveMembers)
        {
            node.Member!.ResetHeldPeaks(); // the window's peak, not the warm-up's
        }

        long nakAtStart = cluster.Senders.Sum(s => s.Sender!.RetransmittedOnNak);
        long timeoutAtStart = cluster.Senders.Sum(s => s.Sender!.RetransmittedOnTimeout);
        var flowAtStart = FlowCounters.Of(cluster);
        var aggregationAtStart = AggregationCounters.Of(cluster);
        long deferredAtStart = cluster.Senders.Sum(s => s.Sender!.RepairsDeferred);
        var holdoffAtStart = TimeSpan.FromTicks(cluster.Senders.Sum(s => s.Sender!.DeferredHoldoffTotal.Ticks));

        early |= !early && !RunBounded(cluster, length.Window, wall, length.WallBudget, trace);
        double window = (cluster.Network.Now - start).TotalSeconds;
        var timeline = cluster.Timeline;
        var after = Snapshot(cluster);
        return new RunResult(
            spec,
            window,
            window > 0 ? (cluster.DeliveredToAll() - deliveredAtStart) / window : double.NaN,
            cluster.Senders.Average(s => s.Sender!.RateController.TargetRate),
            timeline.Recovery.Mean,
            timeline.Recovery.Quantile(0.5),
            timeline.RecoveryAtArrival.Mean,
            timeline.RecoveryAtArrival.Quantile(0.5),
            (timeline.ArrivalFromSender.Count, timeline.ArrivalFromSender.Mean),
            (timeline.ArrivalFromRing.Count, timeline.ArrivalFromRing.Mean),
            (timeline.ArrivalFromOtherPartition.Count, timeline.ArrivalFromOtherPartition.Mean),
            timeline.SampledDeliveries == 0 ? double.NaN : 100.0 * timeline.Recovery.Count / timeline.SampledDeliveries,
            timeline.Ack.Mean,
            timeline.Ack.Max,
            cluster.Senders.Sum(s => s.Sender!.RetransmittedOnNak) - nakAtStart,
            cluster.Senders.Sum(s => s.Sender!.RetransmittedOnTimeout) - timeoutAtStart,
            after.ReceiveQueue - drops.ReceiveQueue,
            after.Link - drops.Link,
            wall.Elapsed.TotalSeconds,
            early,
            cluster.LiveMembers.Average(n => (double)n.Member!.PeakHeldPackets),
            cluster.LiveMembers.Average(n => (double)n.Member!.PeakHeldBytes),
            trace.Samples,
            [.. cluster.Senders.Select((s, i) => window > 0 ? (cluster.DeliveredToAll(s) - perSenderAtStart[i]) / window : double.NaN)],
            FlowCounters.Of(cluster).Since(flowAtStart, window),
            AggregationCounters.Of(cluster).Since(aggregationAtStart, window),
            RepairDiagnosis(cluster, window, deferredAtStart, holdoffAtStart));
    }

    /// <summary>Recovery at arrival's median, p90, p99 and maximum, the resends the senders' hold-off deferred (a second,
    /// and the mean hold-off they met), and where the repairs' time went (<see cref="RegionTimeline.RepairBreakdown"/>).</summary>
    private static string RepairDiagnosis(RegionCluster cluster, double window, long deferredAtStart, TimeSpan holdoffAtStart)
    {
        var arrival = cluster.Timeline.RecoveryAtArrival;
        long deferred = cluster.Senders.Sum(s => s.Sender!.RepairsDeferred) - deferredAtStart;
        var holdoff = TimeSpan.FromTicks(cluster.Senders.Sum(s => s.Sender!.DeferredHoldoffTotal.Ticks)) - holdoffAtStart;
        return string.Create(CultureInfo.InvariantCulture,
            $"recovery at arrival median {arrival.Quantile(0.5):F1} ms, mean {arrival.Mean:F1}, p90 {arrival.Quantile(0.9):F1}, p99 {arrival.Quantile(0.99):F1}, max {arrival.Max:F1} ms; "
            + $"resends deferred by the hold-off {(window > 0 ? deferred / window : double.NaN):F0}/s (mean hold-off {(deferred > 0 ? holdoff.TotalMilliseconds / deferred : double.NaN):F1} ms); {cluster.Timeline.RepairBreakdown()}");
    }

    /// <summary>Runs <paramref name="duration"/> of virtual time in steps; false if the wall budget ran out first.</summary>
    private static bool RunBounded(RegionCluster cluster, TimeSpan duration, Stopwatch wall, TimeSpan budget, RateTrace trace)
    {
        var end = cluster.Network.Now + duration;
        while (cluster.Network.Now < end)
        {
            if (wall.Elapsed > budget)
            {
                return false;
            }

            var step = end - cluster.Network.Now < Step ? end - cluster.Network.Now : Step;
            cluster.Network.RunFor(step);
            trace.Sample();
        }

        return true;
    }

    private static (long ReceiveQueue, long Link) Snapshot(RegionCluster cluster)
        => (cluster.Network.Drops[DropReason.ReceiveBufferFull], cluster.Network.Drops[DropReason.LinkLoss]);
}
