using System.Globalization;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// The QSM paper's evaluation figures (§3), each as a table of measured values next to what the paper reports where
/// its text gives a number. Runs are memoised by spec, so a configuration shared by two figures runs once.
/// </summary>
internal sealed class Experiments(FigureMode mode, Action<string> log)
{
    private readonly Dictionary<RunSpec, RunResult> _runs = new();

    /// <summary>Every experiment, or only those whose CSV file name starts with one of the comma-separated prefixes of
    /// <paramref name="only"/>, in the order given (runs shared between them run once). Each table is built only when
    /// enumerated, so a filter skips the others' runs.</summary>
    public IEnumerable<(string File, ResultTable Table)> All(string? only = null)
    {
        var experiments = new (string File, Func<ResultTable> Build)[]
        {
            ("throughput.csv", Throughput),
            ("partition_size.csv", PartitionSize),
            ("token_interval.csv", TokenInterval),
            ("senders.csv", Senders),
            ("recovery_latency.csv", RecoveryLatency),
            ("ack_latency.csv", AckLatency),
            ("rate_over_time.csv", RateOverTime),
            ("groups.csv", Groups),
        };
        foreach (string file in Selected(only, [.. experiments.Select(e => e.File)]))
        {
            yield return (file, experiments.First(e => e.File == file).Build());
        }
    }

    /// <summary>The files of <paramref name="files"/> that <paramref name="only"/> selects (see <see cref="All"/>), each
    /// once, in the order of its prefixes; all of them, in order, without a filter.</summary>
    internal static IEnumerable<string> Selected(string? only, IReadOnlyList<string> files)
    {
        string[] prefixes = only is null ? [""] : only.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries);
        var done = new HashSet<string>();
        foreach (string prefix in prefixes)
        {
            foreach (string file in files)
            {
                if (file.StartsWith(prefix, StringComparison.Ordinal) && done.Add(file))
                {
                    yield return file;
                }
            }
        }
    }

    /// <summary>Fig. 1: throughput against the number of groups, 25 nodes in every group, the sender round robin.</summary>
    private ResultTable Groups()
    {
        var table = new ResultTable("(h) Throughput against the number of groups, whole stack (Fig. 1)",
            "groups", "msgs/s", "MB/s", "vs 1 group %", "packets sent", "joins settled at s", "window s", "wall s");
        double reference = 0;
        foreach (int g in mode.GroupCounts)
        {
            GroupsRun.Result r;
            try
            {
                r = GroupsRun.Run(25, g, mode.Length);
            }
            catch (InvalidOperationException e)
            {
                log($"  groups {g}: {e.Message}");
                table.Add(g, "did not settle", "", "", "", "", "", "");
                continue;
            }

            log(string.Create(CultureInfo.InvariantCulture, $"  groups {g} -> {r.MessagesPerSecond:F0} msgs/s in {r.WallSeconds:F1} s wall"));
            reference = reference == 0 ? r.MessagesPerSecond : reference;
            table.Add(g, R0(r.MessagesPerSecond), R2(r.MessagesPerSecond * Testbed.PayloadBytes / 1e6), R0(100 * r.MessagesPerSecond / reference),
                r.Packets, R1(r.SettleSeconds), r.StoppedEarly ? "(cut)" : R1(mode.Length.Window.TotalSeconds), R1(r.WallSeconds));
        }

        return table;
    }

    /// <summary>Fig. 9: one sender, one group spanning every node.</summary>
    private ResultTable Throughput()
    {
        var table = new ResultTable("(a) Throughput against receivers (Fig. 9)",
            "nodes", "msgs/s", "MB/s", "paper pkt/s", "sender target/s", "recv-queue drops", "NAK resends", "held peak/member", "held peak KB/member", "window s", "wall s");
        foreach (int n in mode.NodeCounts)
        {
            var r = Run(new RunSpec(n));
            table.Add(n, R0(r.MessagesPerSecond), R2(r.MegabytesPerSecond), n switch { 1 => "9850", 71 => "6500", _ => "" },
                R0(r.SenderTargetRate), r.ReceiveQueueDrops, r.RetransmittedOnNak, R0(r.HeldPeakPackets), R1(r.HeldPeakBytes / 1000), Window(r), R1(r.WallSeconds));
        }

        return table;
    }

    /// <summary>Fig. 12–13: replication factor R (partition size) at two region sizes.</summary>
    private ResultTable PartitionSize()
    {
        var table = new ResultTable("(b) Throughput against replication factor R (Fig. 12-13)",
            "nodes", "R", "partitions", "msgs/s", "vs R=5 %", "recv-queue drops", "window s", "wall s");
        foreach (int n in mode.ReplicationNodeCounts)
        {
            double reference = Run(new RunSpec(n)).MessagesPerSecond;
            // At 25 nodes also R = 25 (one partition): the paper's comparison point for R = 5 (§3.4).
            foreach (int rf in n == 25 ? [.. mode.ReplicationFactors, 25] : mode.ReplicationFactors)
            {
                var r = Run(new RunSpec(n, ReplicationFactor: rf));
                table.Add(n, rf, Math.Max(1, n / rf), R0(r.MessagesPerSecond), R0(100 * r.MessagesPerSecond / reference),
                    r.ReceiveQueueDrops, Window(r), R1(r.WallSeconds));
            }
        }

        return table;
    }

    /// <summary>Fig. 15: token interval at 25 nodes.</summary>
    private ResultTable TokenInterval()
    {
        var table = new ResultTable("(c) Token interval at 25 nodes (Fig. 15)",
            "token interval s", "msgs/s", "recovery ms", "recovery rounds", "repaired %", "ACK ms", "arrival ms", "arrival rounds", "ACK rounds", "window s", "wall s");
        foreach (double interval in mode.TokenIntervals)
        {
            var r = Run(new RunSpec(25, TokenIntervalSeconds: interval));
            table.Add(interval, R0(r.MessagesPerSecond), R0(r.RecoveryMeanMs), R2(r.RecoveryRounds), R2(r.RepairedPercent),
                R0(r.AckMeanMs), R0(r.ArrivalMeanMs), R2(r.ArrivalRounds), R2(r.AckRounds), Window(r), R1(r.WallSeconds));
        }

        return table;
    }

    /// <summary>Fig. 16: senders outside a 25-node region, total throughput.</summary>
    private ResultTable Senders()
    {
        var table = new ResultTable("(d) Senders into a 25-node region (Fig. 16)",
            "senders", "total msgs/s", "vs 1 sender %", "paper %", "recv-queue drops", "window s", "wall s", "Jain's index", "slowest sender msgs/s", "fastest sender msgs/s");
        double reference = Run(new RunSpec(25)).MessagesPerSecond;
        foreach (int s in mode.SenderCounts)
        {
            var r = Run(new RunSpec(25, Senders: s));
            table.Add(s, R0(r.MessagesPerSecond), R0(100 * r.MessagesPerSecond / reference), s == 10 ? "80" : "",
                r.ReceiveQueueDrops, Window(r), R1(r.WallSeconds), R3(r.JainIndex), R0(r.PerSenderMessagesPerSecond.Min()), R0(r.PerSenderMessagesPerSecond.Max()));
        }

        return table;
    }

    /// <summary>Fig. 19: repair time for packets a member missed on the first multicast, under random link loss.</summary>
    private ResultTable RecoveryLatency()
    {
        var table = new ResultTable("(e) Recovery latency under ~1 % loss (Fig. 19)",
            "nodes", "loss per link", "recovery ms", "recovery rounds", "paper rounds", "median ms", "repaired %", "msgs/s",
            "NAK resends", "timeout resends", "window s", "wall s", "arrival ms", "arrival rounds", "arrival median ms", "ACK ms", "ACK rounds",
            "from sender n", "from sender rounds", "from ring n", "from ring rounds", "from other partition n", "from other partition rounds");
        foreach (int n in mode.RecoveryNodeCounts)
        {
            var r = Run(new RunSpec(n, LossRate: FigureMode.RecoveryLossPerLink));
            table.Add(n, FigureMode.RecoveryLossPerLink, R0(r.RecoveryMeanMs), R2(r.RecoveryRounds), "2.5", R0(r.RecoveryMedianMs),
                R2(r.RepairedPercent), R0(r.MessagesPerSecond), r.RetransmittedOnNak, r.RetransmittedOnTimeout, Window(r), R1(r.WallSeconds),
                R0(r.ArrivalMeanMs), R2(r.ArrivalRounds), R0(r.ArrivalMedianMs), R0(r.AckMeanMs), R2(r.AckRounds),
                r.ArrivalFromSender.Count, Rounds(r, r.ArrivalFromSender.MeanMs), r.ArrivalFromRing.Count, Rounds(r, r.ArrivalFromRing.MeanMs),
                r.ArrivalFromOtherPartition.Count, Rounds(r, r.ArrivalFromOtherPartition.MeanMs));
        }

        return table;
    }

    /// <summary>Fig. 20: time from first transmission to the sender's collective ACK (the throughput runs of (a)).</summary>
    private ResultTable AckLatency()
    {
        var table = new ResultTable("(f) ACK latency against receivers (Fig. 20)",
            "nodes", "ACK ms", "ACK rounds", "paper rounds", "max ms", "window s");
        foreach (int n in mode.NodeCounts)
        {
            var r = Run(new RunSpec(n));
            table.Add(n, R0(r.AckMeanMs), R2(r.AckRounds), n <= 25 ? "~1" : "up to 3.5", R0(r.AckMaxMs), Window(r));
        }

        return table;
    }

    /// <summary>Fig. 17: the sending rate and what every member delivered, second by second, in the runs of (a).</summary>
    private ResultTable RateOverTime()
    {
        var table = new ResultTable("(g) Rate over time, 1 sender (Fig. 17; the runs of (a))",
            "nodes", "virtual s", "delivered to all/s", "sender target/s", "min receiver rate/s", "sender actual/s", "recv-queue drops/s");
        foreach (int n in mode.NodeCounts.Where(n => n is 25 or 71))
        {
            foreach (var s in Run(new RunSpec(n)).Trace)
            {
                table.Add(n, R0(s.Second), R0(s.DeliveredPerSecond), R0(s.TargetRate), R0(s.ReceiverRate), R0(s.ActualRate), R0(s.ReceiveDropsPerSecond));
            }
        }

        return table;
    }

    private RunResult Run(RunSpec spec)
    {
        if (!_runs.TryGetValue(spec, out var result))
        {
            result = RegionRun.Execute(spec, mode.Length);
            _runs[spec] = result;
            log(string.Create(CultureInfo.InvariantCulture, $"  {spec} -> {result.MessagesPerSecond:F0} msgs/s in {result.WallSeconds:F1} s wall{(result.StoppedEarly ? " (stopped early: wall budget)" : "")}"));
            log($"    flow: {result.FlowDiagnosis}");
            log($"    aggregation: {result.AggregationDiagnosis}");
            log($"    repairs: {result.RepairDiagnosis}");
        }

        return result;
    }

    private static string Window(RunResult r) => string.Create(CultureInfo.InvariantCulture, $"{R1(r.WindowSeconds)}{(r.StoppedEarly ? " (cut)" : "")}");

    private static double Rounds(RunResult r, double ms) => R2(ms / 1000 / r.Spec.TokenIntervalSeconds);

    private static double R0(double v) => Math.Round(v);

    private static double R1(double v) => Math.Round(v, 1);

    private static double R2(double v) => Math.Round(v, 2);

    private static double R3(double v) => Math.Round(v, 3);
}
