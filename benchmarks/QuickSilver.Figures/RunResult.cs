namespace QuickSilver.Figures;

/// <summary>What one run measured. Latencies are in virtual milliseconds; rounds = latency / token interval.</summary>
internal sealed record RunResult(
    RunSpec Spec,
    double WindowSeconds,
    double MessagesPerSecond,
    double SenderTargetRate,
    double RecoveryMeanMs,
    double RecoveryMedianMs,
    double RepairedPercent,
    double AckMeanMs,
    double AckMaxMs,
    long RetransmittedOnNak,
    long RetransmittedOnTimeout,
    long ReceiveQueueDrops,
    long LinkLosses,
    double WallSeconds,
    bool StoppedEarly,
    double HeldPeakPackets,
    double HeldPeakBytes,
    IReadOnlyList<RateSample> Trace)
{
    /// <summary>Payload megabytes per second delivered to every member.</summary>
    public double MegabytesPerSecond => MessagesPerSecond * Testbed.PayloadBytes / 1e6;

    public double RecoveryRounds => RecoveryMeanMs / 1000 / Spec.TokenIntervalSeconds;

    public double AckRounds => AckMeanMs / 1000 / Spec.TokenIntervalSeconds;
}
