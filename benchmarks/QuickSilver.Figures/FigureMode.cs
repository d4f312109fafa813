namespace QuickSilver.Figures;

/// <summary>What a mode runs: the parameter sweeps and how long each run lasts.</summary>
internal sealed record FigureMode(
    string Name,
    RunLength Length,
    int[] NodeCounts,
    int[] ReplicationFactors,
    int[] ReplicationNodeCounts,
    double[] TokenIntervals,
    int[] SenderCounts,
    int[] RecoveryNodeCounts,
    int[] GroupCounts)
{
    /// <summary>Loss per link traversal in the recovery experiment: uplink then downlink, about 1 % end to end.</summary>
    public const double RecoveryLossPerLink = 0.005;

    /// <summary>The same sweeps, keeping only the region sizes in <paramref name="sizes"/> (the replication and
    /// recovery sweeps' included), so one point of a sweep reruns alone.</summary>
    public FigureMode OnlySizes(IReadOnlySet<int> sizes) => this with
    {
        NodeCounts = [.. NodeCounts.Where(sizes.Contains)],
        ReplicationNodeCounts = [.. ReplicationNodeCounts.Where(sizes.Contains)],
        RecoveryNodeCounts = [.. RecoveryNodeCounts.Where(sizes.Contains)],
    };

    /// <summary>About two minutes of wall time: short windows, a subset of each sweep (1,000 nodes only if asked).</summary>
    public static FigureMode Quick(int maxNodes = 250) => new("quick",
        new RunLength(TimeSpan.FromSeconds(20), TimeSpan.FromSeconds(10), TimeSpan.FromSeconds(60)),
        [.. new[] { 1, 25, 71, 250, 1000 }.Where(n => n <= maxNodes)], [1, 2, 5, 10], [25, 71], [0.25, 0.5, 1, 2], [1, 2, 5, 10], [25, 71], [1, 16, 256]);

    /// <summary>Longer windows and the full sweeps (1,213 s of wall time on the shared 2-core machine, 2026-11-23).</summary>
    public static FigureMode Full(int maxNodes) => new("full",
        new RunLength(TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(60), TimeSpan.FromSeconds(240)),
        [.. new[] { 1, 25, 71, 250, 1000 }.Where(n => n <= maxNodes)], [.. Enumerable.Range(1, 10)], [25, 71],
        [0.25, 0.5, 1, 2], [.. Enumerable.Range(1, 10)], [.. new[] { 25, 71, 250 }.Where(n => n <= maxNodes)],
        [1, 4, 16, 64, 256, 1024]);
}
