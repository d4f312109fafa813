namespace QuickSilver.Compare;

/// <summary>What one system did at one point. <see cref="MinReceived"/>/<see cref="MaxReceived"/> count every message
/// (warm-up and measured: the delivery check); throughput is the measured messages the worst receiver got
/// (<see cref="MinMeasured"/>) over <see cref="Seconds"/>: from the sender's first measured send (after the warm-up) to
/// the last arrival at any receiver (clocks of one machine, so comparable between processes). The start is the
/// sender's, not a receiver's first measured arrival: a receiver that is handed a backlog at once (JGroups' batches,
/// QuickSilver releasing messages held behind a repaired gap) would otherwise time only the burst.</summary>
internal sealed record PassResult(string System, ExperimentPoint Point, double Seconds, long MinReceived, long MaxReceived, long MinMeasured, string Note)
{
    public bool AllArrived => MinReceived == Point.Total;

    /// <summary>QuickSilver: when the sender sent its first message, warm-up or measured (µs since the epoch); 0 if not known.</summary>
    public long FirstSendMicros { get; init; }

    public double MessagesPerSecond => Seconds > 0 ? MinMeasured / Seconds : 0;

    /// <summary>QuickSilver: the sender's process CPU time (user + system, every thread) from its first measured send until
    /// every receiver printed its result, in µs; 0 if not measured.</summary>
    public long SenderCpuMicros { get; init; }

    /// <summary>QuickSilver: the receivers' process CPU time from their first measured arrival until they had every message (looked at every 5 ms), summed over
    /// the receivers that reported it, in µs; 0 if not measured.</summary>
    public long ReceiverCpuMicros { get; init; }

    /// <summary>QuickSilver: the largest receiver working set (resident memory) when it had every message, in MiB; 0 if not
    /// measured.</summary>
    public long ReceiverWorkingSetMb { get; init; }

    /// <summary>CPU per measured message: the sender's, and the receivers' mean (µs), or 0. On a shared machine these vary
    /// far less than the rate, which also counts the time a process waited for a core.</summary>
    public (double Sender, double Receiver) CpuMicrosPerMessage => MinMeasured <= 0
        ? (0, 0)
        : ((double)SenderCpuMicros / MinMeasured, (double)ReceiverCpuMicros / Point.Receivers / MinMeasured);

    /// <summary>With <c>--repeat</c>: the rate of every run of this point (msgs/s), this one (the median) among them.</summary>
    public IReadOnlyList<double> Runs { get; init; } = [];

    public double MegabytesPerSecond => MessagesPerSecond * Point.Size / 1e6;

    /// <summary>Summarizes a pass from the time of the sender's first measured send and each receiver's
    /// <c>received</c>, <c>measured</c> and <c>last_us</c>.</summary>
    public static PassResult From(string system, ExperimentPoint point, long measuredStartMicros, IReadOnlyList<IReadOnlyDictionary<string, string>> receivers, string note)
    {
        bool everyone = receivers.Count >= point.Receivers;
        long min = everyone ? receivers.Min(r => r.Long("received")) : 0;
        long max = receivers.Count == 0 ? 0 : receivers.Max(r => r.Long("received"));
        long minMeasured = everyone ? receivers.Min(r => r.Long("measured")) : 0;
        long last = receivers.Count == 0 ? 0 : receivers.Max(r => r.Long("last_us"));
        if (!everyone)
        {
            note = Join(note, $"{point.Receivers - receivers.Count} receiver(s) printed no result");
        }
        else if (min < point.Total)
        {
            note = Join(note, $"lost {point.Total - min} of {point.Total} (warm-up + measured) at the worst receiver ({100.0 * (point.Total - min) / point.Total:0.###} %)");
        }

        return new PassResult(system, point, measuredStartMicros > 0 && last > 0 ? Math.Max(0, last - measuredStartMicros) / 1e6 : 0, min, max, minMeasured, note)
        {
            ReceiverCpuMicros = receivers.Sum(r => r.Long("cpu_us")),
            ReceiverWorkingSetMb = receivers.Count == 0 ? 0 : receivers.Max(r => r.Long("working_set_mb")),
        };
    }

    /// <summary>Of several runs of one point, the one with the median rate (the lower middle of an even count), carrying
    /// every run's rate; a run that did not deliver everything is taken first, so a failure is never hidden.</summary>
    public static PassResult Median(IReadOnlyList<PassResult> runs)
    {
        ArgumentOutOfRangeException.ThrowIfZero(runs.Count);
        var chosen = runs.FirstOrDefault(r => !r.AllArrived && r.System is not (Systems.RawUdp or Systems.Sockperf))
            ?? runs.OrderBy(r => r.MessagesPerSecond).ElementAt((runs.Count - 1) / 2);
        return chosen with { Runs = [.. runs.Select(r => r.MessagesPerSecond)] };
    }

    public static PassResult Failed(string system, ExperimentPoint point, string note) => new(system, point, 0, 0, 0, 0, note);

    private static string Join(string a, string b) => a.Length == 0 ? b : a + "; " + b;
}
