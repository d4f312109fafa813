namespace QuickSilver.Compare;

/// <summary>What one system did at one point. Throughput is messages over the time from the sender's first send to the
/// last arrival at the slowest receiver (clocks of one machine, so comparable between processes).</summary>
internal sealed record PassResult(string System, ExperimentPoint Point, double Seconds, long MinReceived, long MaxReceived, string Note)
{
    public bool AllArrived => MinReceived == Point.Messages;

    public double MessagesPerSecond => Seconds > 0 ? MinReceived / Seconds : 0;

    public double MegabytesPerSecond => MessagesPerSecond * Point.Size / 1e6;

    /// <summary>Summarizes a pass from the sender's <c>start_us</c> and each receiver's <c>received</c> and <c>last_us</c>.</summary>
    public static PassResult From(string system, ExperimentPoint point, long startMicros, IReadOnlyList<IReadOnlyDictionary<string, string>> receivers, string note)
    {
        long min = receivers.Count < point.Receivers ? 0 : receivers.Min(r => r.Long("received"));
        long max = receivers.Count == 0 ? 0 : receivers.Max(r => r.Long("received"));
        long last = receivers.Count == 0 ? startMicros : receivers.Max(r => r.Long("last_us"));
        if (receivers.Count < point.Receivers)
        {
            note = Join(note, $"{point.Receivers - receivers.Count} receiver(s) printed no result");
        }
        else if (min < point.Messages)
        {
            note = Join(note, $"lost {point.Messages - min} of {point.Messages} at the worst receiver ({100.0 * (point.Messages - min) / point.Messages:0.###} %)");
        }

        return new PassResult(system, point, Math.Max(0, last - startMicros) / 1e6, min, max, note);
    }

    public static PassResult Failed(string system, ExperimentPoint point, string note) => new(system, point, 0, 0, 0, note);

    private static string Join(string a, string b) => a.Length == 0 ? b : a + "; " + b;
}
