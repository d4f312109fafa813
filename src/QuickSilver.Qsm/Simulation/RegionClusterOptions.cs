using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Qsm.Simulation;

/// <summary>How a <see cref="RegionCluster"/> is built: links, protocol options, the receive cost model and what to record.</summary>
internal sealed record RegionClusterOptions
{
    /// <summary>Every node's access link (bandwidth, latency, loss).</summary>
    public LinkOptions Link { get; init; } = new();

    public RegionOptions Region { get; init; } = new();

    public RateControlOptions Rate { get; init; } = new() { MinRate = 2000 };

    /// <summary>True: the first members are also the senders. False: senders are extra nodes outside the region.</summary>
    public bool SendersAreMembers { get; init; }

    /// <summary>Virtual CPU time each node spends on each datagram it receives (see docs/simulation.md).</summary>
    public TimeSpan ProcessingCostPerPacket { get; init; }

    /// <summary>Datagrams a node's receive queue holds while its CPU is busy; more are dropped.</summary>
    public int ReceiveQueueLimit { get; init; } = 1000;

    /// <summary>Size of each message the senders send; the first four bytes carry its number.</summary>
    public int PayloadBytes { get; init; } = 64;

    /// <summary>Each node's endpoint datagram limit; larger control messages (tokens) travel as several segments.</summary>
    public int MaxDatagramBytes { get; init; } = 16 * 1024;

    /// <summary>Largest control message (a token); a token that would be larger has its NAK sets coarsened.</summary>
    public int MaxControlMessageBytes { get; init; } = new ReliableUnicastOptions().MaxMessageBytes;

    /// <summary>Record, per member, which packets arrived with the first multicast (needed for recovery latency).</summary>
    public bool TrackRecovery { get; init; }
}
