namespace QuickSilver.Aer;

/// <summary>
/// Every timer and bound of AER and NCA. The seed (Kasera et al.) gives none of these values; each default below is
/// QuickSilver's choice, argued in docs/aer.md "Options". <see cref="Validate"/> runs when a layer attaches and names
/// the offending option.
/// </summary>
public sealed record AerOptions
{
    /// <summary>How often the source multicasts an SPM (§4.1.1 "periodically").</summary>
    public TimeSpan SpmInterval { get; init; } = TimeSpan.FromMilliseconds(100);

    /// <summary>A repair server whose SPMs have not been heard for this long is no longer an upstream (its children fall
    /// back to the next one up, in the end the source): the seed's "revoke after waiting a specified amount of time".</summary>
    public TimeSpan SpmTimeout { get; init; } = TimeSpan.FromMilliseconds(350);

    /// <summary>A receiver waits uniformly in [0, this] after detecting a loss before it NAKs (§4.1 "random amount of time").</summary>
    public TimeSpan ReceiverNakDelayMax { get; init; } = TimeSpan.FromMilliseconds(20);

    /// <summary>The same wait at a repair server: short, so its NAK subcast reaches its children before their timers fire.</summary>
    public TimeSpan RepairServerNakDelayMax { get; init; } = TimeSpan.FromMilliseconds(4);

    /// <summary>A NAK subcast from upstream suppresses a receiver's (or repair server's) own (§4.1). Off only to measure
    /// what suppression saves.</summary>
    public bool NakSuppression { get; init; } = true;

    /// <summary>The shortest NAK retransmission timer; the timer is max(this, <see cref="NakRetryRttFactor"/> × the round
    /// trip to the upstream). Its expiry counts as a new loss (§4.1).</summary>
    public TimeSpan NakRetryMin { get; init; } = TimeSpan.FromMilliseconds(40);

    public double NakRetryRttFactor { get; init; } = 2.0;

    /// <summary>After this many NAK timers in a row expire with no repair from the upstream repair server, it is treated as
    /// failed for <see cref="UpstreamBlacklist"/> and NAKs go one level up (in the end to the source).</summary>
    public int UpstreamFailureNaks { get; init; } = 4;

    public TimeSpan UpstreamBlacklist { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>A repair (or NAK subcast) for a packet is not repeated within this interval: the NAKs that crossed it are answered by it.</summary>
    public TimeSpan RepairHoldoff { get; init; } = TimeSpan.FromMilliseconds(10);

    /// <summary>Bytes of packets a repair server caches for repairs (whole datagrams; oldest evicted first).</summary>
    public long RepairCacheBytes { get; init; } = 4 << 20;

    /// <summary>Bytes of packets the source keeps for repairs; older packets are gone (SPMs say so, receivers skip them, counted).</summary>
    public long SourceCacheBytes { get; init; } = 64 << 20;

    /// <summary>Packets a receiver holds out of order, and so the span of sequence numbers it NAKs at once.</summary>
    public int ReceiveWindowPackets { get; init; } = 4096;

    /// <summary>NAKs a repair server tracks at once (its own losses plus its children's requests).</summary>
    public int MaxPendingNaks { get; init; } = 4096;

    /// <summary>Repairs the source has queued to send (NAKs beyond it are dropped and counted; their retries come back).</summary>
    public int RepairQueueLimit { get; init; } = 4096;

    /// <summary>How often receivers send CSMs, repair servers forward their worst one up, and the source reconsiders its nominee.</summary>
    public TimeSpan CsmInterval { get; init; } = TimeSpan.FromMilliseconds(500);

    /// <summary>A CSM not refreshed for this long is forgotten (its receiver left or crashed, or its repair server did).</summary>
    public TimeSpan CsmTimeout { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>The fixed-size sliding window, in packets, over which a receiver estimates its loss rate p (§4.2.1).</summary>
    public int LossWindowPackets { get; init; } = 1000;

    /// <summary>CSM entries the source keeps (one per sender of CSMs to it).</summary>
    public int MaxCsmEntries { get; init; } = 1024;

    /// <summary>Children a repair server or the source may be configured with.</summary>
    public int MaxChildren { get; init; } = 4096;

    /// <summary>NCA on: the source's window paces its feed. Off: the source sends as fast as the transport pulls.</summary>
    public bool CongestionControl { get; init; } = true;

    /// <summary>The slow-start threshold a new nominee's window starts with (packets).</summary>
    public double InitialThreshold { get; init; } = 64;

    /// <summary>The largest window (packets).</summary>
    public int MaxWindow { get; init; } = 1024;

    public TimeSpan InitialRto { get; init; } = TimeSpan.FromSeconds(1);
    public TimeSpan RtoMin { get; init; } = TimeSpan.FromMilliseconds(200);
    public TimeSpan RtoMax { get; init; } = TimeSpan.FromSeconds(4);

    /// <summary>Timeouts in a row after which the nominee is taken for gone and replaced.</summary>
    public int NomineeFailureTimeouts { get; init; } = 3;

    /// <summary>A nominee stops ACKing when the source has not renewed its nomination for this long.</summary>
    public TimeSpan NominationLifetime { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>The source moves to a new worst receiver only when its g exceeds the nominee's by this factor (no flapping).</summary>
    public double NomineeSwitchRatio { get; init; } = 1.5;

    /// <summary>Packets per second the source sends while it has no nominee (before the first CSM, between nominees).</summary>
    public double UnnominatedRate { get; init; } = 200;

    public void Validate()
    {
        Positive(SpmInterval, nameof(SpmInterval));
        Positive(SpmTimeout, nameof(SpmTimeout));
        if (SpmTimeout <= SpmInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(SpmTimeout), SpmTimeout, $"AerOptions.SpmTimeout ({SpmTimeout}) must exceed AerOptions.SpmInterval ({SpmInterval}).");
        }

        Positive(ReceiverNakDelayMax, nameof(ReceiverNakDelayMax), allowZero: true);
        Positive(RepairServerNakDelayMax, nameof(RepairServerNakDelayMax), allowZero: true);
        Positive(NakRetryMin, nameof(NakRetryMin));
        InRange(NakRetryRttFactor, 0, 100, nameof(NakRetryRttFactor));
        InRange(UpstreamFailureNaks, 1, 1000, nameof(UpstreamFailureNaks));
        Positive(UpstreamBlacklist, nameof(UpstreamBlacklist));
        Positive(RepairHoldoff, nameof(RepairHoldoff), allowZero: true);
        InRange(RepairCacheBytes, 1 << 12, 1L << 40, nameof(RepairCacheBytes));
        InRange(SourceCacheBytes, 1 << 12, 1L << 40, nameof(SourceCacheBytes));
        InRange(ReceiveWindowPackets, 16, 1 << 20, nameof(ReceiveWindowPackets));
        InRange(MaxPendingNaks, 16, 1 << 20, nameof(MaxPendingNaks));
        InRange(RepairQueueLimit, 16, 1 << 20, nameof(RepairQueueLimit));
        Positive(CsmInterval, nameof(CsmInterval));
        if (CsmTimeout <= CsmInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(CsmTimeout), CsmTimeout, $"AerOptions.CsmTimeout ({CsmTimeout}) must exceed AerOptions.CsmInterval ({CsmInterval}).");
        }

        InRange(LossWindowPackets, 10, 1 << 20, nameof(LossWindowPackets));
        InRange(MaxCsmEntries, 1, 1 << 20, nameof(MaxCsmEntries));
        InRange(MaxChildren, 1, 1 << 16, nameof(MaxChildren));
        InRange(InitialThreshold, 2, 1 << 20, nameof(InitialThreshold));
        InRange(MaxWindow, 2, 1 << 16, nameof(MaxWindow));
        Positive(InitialRto, nameof(InitialRto));
        Positive(RtoMin, nameof(RtoMin));
        if (RtoMax < RtoMin)
        {
            throw new ArgumentOutOfRangeException(nameof(RtoMax), RtoMax, $"AerOptions.RtoMax ({RtoMax}) must not be below AerOptions.RtoMin ({RtoMin}).");
        }

        InRange(NomineeFailureTimeouts, 1, 100, nameof(NomineeFailureTimeouts));
        Positive(NominationLifetime, nameof(NominationLifetime));
        InRange(NomineeSwitchRatio, 1, 1000, nameof(NomineeSwitchRatio));
        InRange(UnnominatedRate, 0.1, 1e7, nameof(UnnominatedRate));
    }

    private static void Positive(TimeSpan value, string name, bool allowZero = false)
    {
        if (value < TimeSpan.Zero || (!allowZero && value == TimeSpan.Zero))
        {
            throw new ArgumentOutOfRangeException(name, value, $"AerOptions.{name} must be {(allowZero ? "zero or positive" : "positive")}, got {value}.");
        }
    }

    private static void InRange(double value, double min, double max, string name)
    {
        if (double.IsNaN(value) || value < min || value > max)
        {
            throw new ArgumentOutOfRangeException(name, value, $"AerOptions.{name} must be between {min} and {max}, got {value}.");
        }
    }
}
