using QuickSilver.Core;

namespace QuickSilver.Transport.Simulation;

/// <summary>Gilbert–Elliott bursty loss: a good and a bad state, with per-packet transition probabilities.</summary>
public sealed record BurstLoss(double GoodToBad, double BadToGood, double LossInBad = 1.0);

/// <summary>
/// A node's access link to the simulated switch (see docs/simulation.md). A datagram from A to B crosses A's link
/// (uplink) and B's link (downlink): latency adds, each link serializes at its bandwidth behind a bounded queue, and
/// each link may lose, reorder or duplicate it.
/// </summary>
public sealed record LinkOptions
{
    /// <summary>A 100 Mbit/s access link losing 1 % of datagrams at random plus Gilbert–Elliott bursts (0.1 % chance to
    /// enter a burst, 30 % to leave it): the loss the QSM simulation tests run under.</summary>
    public static LinkOptions LossyLan => new()
    {
        BandwidthBitsPerSecond = 100_000_000,
        LossRate = 0.01,
        Burst = new BurstLoss(0.001, 0.3),
    };

    /// <summary>One-way propagation delay of this link.</summary>
    public TimeSpan Latency { get; init; } = TimeSpan.FromMilliseconds(0.05);

    /// <summary>Serialization rate; a datagram of n bytes occupies the link for n·8/bandwidth.</summary>
    public long BandwidthBitsPerSecond { get; init; } = 1_000_000_000;

    /// <summary>Datagrams that may wait to be serialized; beyond it the link drops (LinkQueueFull).</summary>
    public int QueueLimitPackets { get; init; } = 1000;

    /// <summary>Independent per-datagram loss probability.</summary>
    public double LossRate { get; init; }

    /// <summary>Bursty loss on top of <see cref="LossRate"/>, or null.</summary>
    public BurstLoss? Burst { get; init; }

    /// <summary>Probability that a datagram is held back by <see cref="ReorderDelay"/>, letting later ones overtake it.</summary>
    public double ReorderRate { get; init; }

    public TimeSpan ReorderDelay { get; init; } = TimeSpan.FromMilliseconds(1);

    /// <summary>Probability that a datagram arrives twice.</summary>
    public double DuplicateRate { get; init; }

    public void Validate()
    {
        if (Latency < TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(nameof(Latency), Latency, "LinkOptions.Latency must not be negative.");
        }

        OptionChecks.InRange(BandwidthBitsPerSecond, 1000, long.MaxValue / 1000, $"LinkOptions.{nameof(BandwidthBitsPerSecond)}");
        OptionChecks.InRange(QueueLimitPackets, 1, 1 << 24, $"LinkOptions.{nameof(QueueLimitPackets)}");
        OptionChecks.InRange(LossRate, 0, 1, $"LinkOptions.{nameof(LossRate)}");
        OptionChecks.InRange(ReorderRate, 0, 1, $"LinkOptions.{nameof(ReorderRate)}");
        OptionChecks.InRange(DuplicateRate, 0, 1, $"LinkOptions.{nameof(DuplicateRate)}");
        if (Burst is { } b)
        {
            OptionChecks.InRange(b.GoodToBad, 0, 1, "LinkOptions.Burst.GoodToBad");
            OptionChecks.InRange(b.BadToGood, 0, 1, "LinkOptions.Burst.BadToGood");
            OptionChecks.InRange(b.LossInBad, 0, 1, "LinkOptions.Burst.LossInBad");
        }
    }
}
