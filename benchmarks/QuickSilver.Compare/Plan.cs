namespace QuickSilver.Compare;

/// <summary>The experiments of a run. Quick: 1000 B (receivers, groups 1 to 256, loss) plus one 100 B point, 20,000 warm-up
/// then 20,000 measured messages a point; full: every experiment at 100 B and 1000 B (groups up to 1,024), 100,000
/// warm-up then 200,000 measured messages a point.</summary>
internal static class Plan
{
    public const long QuickMessages = 20_000;
    public const long QuickWarmup = 20_000;
    public const long FullMessages = 200_000;
    public const long FullWarmup = 100_000;

    public static IReadOnlyList<Experiment> Create(bool quick, long? messages = null, long? warmup = null)
    {
        long m = messages ?? (quick ? QuickMessages : FullMessages);
        long w = warmup ?? (quick ? QuickWarmup : FullWarmup);
        int[] sizes = quick ? [1000] : [100, 1000];
        var list = new List<Experiment>();
        foreach (int s in sizes)
        {
            list.Add(new($"receivers-{s}B", "receivers", p => p.Receivers, [.. new[] { 1, 2, 4 }.Select(r => new ExperimentPoint(r, 1, s, 0, m, w))]));
        }

        list.Add(new("size", "message size (bytes)", p => p.Size, [.. new[] { 100, 1000 }.Select(s => new ExperimentPoint(2, 1, s, 0, m, w))]));
        foreach (int s in sizes)
        {
            list.Add(new($"groups-{s}B", "groups (every member in every group)", p => p.Groups,
                [.. (quick ? new[] { 1, 4, 16, 64, 256 } : [1, 4, 16, 64, 256, 1024]).Select(g => new ExperimentPoint(2, g, s, 0, m, w))]));
            list.Add(new($"loss-{s}B", "injected loss at QuickSilver receivers (%)", p => p.Loss * 100,
                [.. new[] { 0, 0.01, 0.05 }.Select(l => new ExperimentPoint(2, 1, s, l, m, w))]));
        }

        return list;
    }

    /// <summary>The order of an experiment's passes with <c>--repeat</c>: round after round, each round going once over
    /// every pass, so the runs a paired ratio compares (<see cref="Output.Ratios.Paired"/>) were measured minutes apart,
    /// not a whole point's repeats apart. One round is the passes in their given order.</summary>
    public static IEnumerable<(int Round, T Pass)> Rounds<T>(IReadOnlyList<T> passes, int repeat)
    {
        for (int round = 0; round < repeat; round++)
        {
            foreach (var pass in passes)
            {
                yield return (round, pass);
            }
        }
    }

    /// <summary>JGroups and raw UDP run only without loss (injected loss is a QuickSilver transport option) and with at
    /// most 256 groups (the raw sender's address plan; a JVM with 1,024 channels is past what this machine holds);
    /// sockperf only with one group (it sends to one multicast address).</summary>
    public static bool Runs(string system, ExperimentPoint point)
        => Systems.IsQuickSilver(system)
           || (point.Loss == 0 && point.Groups <= 256 && (system != Systems.Sockperf || point.Groups == 1));
}
