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

        return new PassResult(system, point, measuredStartMicros > 0 && last > 0 ? Math.Max(0, last - measuredStartMicros) / 1e6 : 0, min, max, minMeasured, note);
    }

    public static PassResult Failed(string system, ExperimentPoint point, string note) => new(system, point, 0, 0, 0, 0, note);

    private static string Join(string a, string b) => a.Length == 0 ? b : a + "; " + b;
}
