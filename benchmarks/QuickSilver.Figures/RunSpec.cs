namespace QuickSilver.Figures;

/// <summary>One simulated run: a region of <paramref name="Members"/> nodes, <paramref name="Senders"/> senders outside
/// it sending without end, warmed up, then measured over a window of virtual time.</summary>
internal sealed record RunSpec(int Members, int Senders = 1, int ReplicationFactor = 5, double TokenIntervalSeconds = 1.0,
    double LossRate = 0, int SenderWindow = RunSpec.DefaultWindow)
{
    /// <summary>Sender window for the figures: larger than the default 4,096 so that it never binds at ~10,000
    /// messages/s with ACKs one to a few 1 s token rounds apart (see docs/simulation.md).</summary>
    public const int DefaultWindow = 65_536;
}

/// <summary>How long each run lasts: virtual warm-up and window, and the wall-clock budget after which a run stops early
/// (reporting the window it did measure).</summary>
internal sealed record RunLength(TimeSpan Warmup, TimeSpan Window, TimeSpan WallBudget);
