namespace QuickSilver.Figures;

/// <summary>What one run measured. Latencies are in virtual milliseconds; rounds = latency / token interval.</summary>
internal sealed record RunResult(
    RunSpec Spec,
    double WindowSeconds,
    double MessagesPerSecond,
    double SenderTargetRate,
    double RecoveryMeanMs,
    double RecoveryMedianMs,
    double ArrivalMeanMs,
    double ArrivalMedianMs,
    (int Count, double MeanMs) ArrivalFromSender,
    (int Count, double MeanMs) ArrivalFromRing,
    (int Count, double MeanMs) ArrivalFromOtherPartition,
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
    IReadOnlyList<RateSample> Trace,
    IReadOnlyList<double> PerSenderMessagesPerSecond,
    string FlowDiagnosis,
    string AggregationDiagnosis,
    string RepairDiagnosis)
{
    /// <summary>Payload megabytes per second delivered to every member.</summary>
    public double MegabytesPerSecond => MessagesPerSecond * Testbed.PayloadBytes / 1e6;

    public double RecoveryRounds => RecoveryMeanMs / 1000 / Spec.TokenIntervalSeconds;

    /// <summary>Recovery latency measured at the arrival of the repaired copy, in token rounds.</summary>
    public double ArrivalRounds => ArrivalMeanMs / 1000 / Spec.TokenIntervalSeconds;

    /// <summary>Jain's fairness index over the senders' delivered-to-all rates in the window: (Σx)² / (n·Σx²), 1 when
    /// every sender got the same share, 1/n when one got everything.</summary>
    public double JainIndex => JainFairness.Index(PerSenderMessagesPerSecond);

    public double AckRounds => AckMeanMs / 1000 / Spec.TokenIntervalSeconds;
}
