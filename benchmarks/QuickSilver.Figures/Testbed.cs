using System.Globalization;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// The cost model standing in for the QSM paper's testbed (§3.1: Pentium III 1–1.3 GHz nodes on switched 100 Mbit/s
/// Ethernet, ~90-byte packets, 9,850 packets/s at one receiver). Why these values: docs/simulation.md, "The QSM figures".
/// </summary>
internal static class Testbed
{
    /// <summary>Access link bandwidth: the paper's switched 100 Mbit/s.</summary>
    public const long BandwidthBitsPerSecond = 100_000_000;

    /// <summary>One-way latency of an access link (node to switch).</summary>
    public static readonly TimeSpan Latency = TimeSpan.FromMilliseconds(0.05);

    /// <summary>Receive CPU time per datagram: 100 µs caps a node at 10,000 datagrams/s, near the paper's 9,850.</summary>
    public static readonly TimeSpan ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.1);

    /// <summary>Datagrams a busy node's receive queue holds (a socket buffer of ~100 KB of small packets).</summary>
    public const int ReceiveQueueLimit = 1000;

    /// <summary>Application message size (the paper's packets were 90 bytes including headers).</summary>
    public const int PayloadBytes = 100;

    /// <summary>With <c>--flow receivers</c>: the packets a flow report's gap map covers (<c>RegionOptions.GapReportPackets</c>;
    /// <c>--gap-report-packets 64</c> is the map before issue 11's tail fix).</summary>
    public static int GapReportPackets { get; set; } = new QuickSilver.Qsm.Region.RegionOptions().GapReportPackets;

    /// <summary>The simulated network's seed (its losses and jitter): 2006, or <c>--seed</c>.</summary>
    public static int Seed { get; set; } = 2006;

    /// <summary>With <c>--flow receivers</c>: each receiver's window, what its receive queue holds
    /// (<see cref="ReceiveQueueLimit"/> datagrams of a 100-byte message and its headers, 144 bytes), as
    /// <c>RegionOptions.ReceiveWindowBytes</c> asks (keep it within the receive buffer). The 2 MiB default, sized for a
    /// 4 MiB socket buffer, is 14 times this queue: it overflowed at once. <c>--receive-window</c> sets another (to study
    /// what a window larger than the queue does). Set once, at start.</summary>
    public static int ReceiveWindowBytes { get; set; } = ReceiveQueueLimit * 144;

    /// <summary><c>RegionOptions.PartitionShare</c> (<c>--partition-share</c>): members keep only their partition's share
    /// after delivery. Set once, at start.</summary>
    public static bool PartitionShare { get; set; } = new QuickSilver.Qsm.Region.RegionOptions().PartitionShare;

    /// <summary>With <c>--flow receivers</c>: <c>RegionOptions.LeaderRepair</c> (<c>--leader-repair</c>): partition
    /// leaders repair their members' gaps first. Set once, at start.</summary>
    public static bool LeaderRepair { get; set; } = new QuickSilver.Qsm.Region.RegionOptions().LeaderRepair;

    /// <summary>With <c>--flow receivers</c>: <c>RegionOptions.CongestionControl</c> (<c>--congestion-control</c>). Set once, at start.</summary>
    public static bool CongestionControl { get; set; } = true;

    /// <summary>What paces the senders: the paper's rate controller by default (these are the paper's figures), or the
    /// receivers' windows (<c>--flow receivers</c>). Set once, at start.</summary>
    public static QuickSilver.Qsm.Region.RegionFlowControl FlowControl { get; set; } = QuickSilver.Qsm.Region.RegionFlowControl.PaperRate;

    /// <summary>With <c>--flow paper</c>: a fixed sending rate in packets/s (<c>--fixed-rate</c>: μ_min at that rate and
    /// λ = 0, so the sender neither grows nor falls below it), to measure recovery without overload; null (the default)
    /// leaves the controller free from μ_min = 2,000/s. Set once, at start.</summary>
    public static double? FixedRate { get; set; }

    /// <summary>The paper's rate controller's options for the region runs.</summary>
    public static QuickSilver.Qsm.RateControl.RateControlOptions Rate => FixedRate is { } rate
        ? new() { MinRate = rate, Growth = 0 }
        : new() { MinRate = 2000 };

    /// <summary>Datagram limit of the whole-stack runs, which pack messages: an Ethernet frame's UDP payload.</summary>
    public const int MaxDatagramBytes = 1472;

    public static LinkOptions Link(double lossRate) => new()
    {
        BandwidthBitsPerSecond = BandwidthBitsPerSecond,
        Latency = Latency,
        LossRate = lossRate,
    };

    public static IEnumerable<string> Describe()
    {
        var c = CultureInfo.InvariantCulture;
        yield return string.Create(c, $"links: {BandwidthBitsPerSecond / 1e6:F0} Mbit/s, {Latency.TotalMicroseconds:F0} µs one-way to the switch, 1,000-datagram link queues");
        yield return string.Create(c, $"receive CPU: {ProcessingCostPerPacket.TotalMicroseconds:F0} µs per datagram (≤ {1 / ProcessingCostPerPacket.TotalSeconds:N0} datagrams/s per node), receive queue {ReceiveQueueLimit} datagrams; sending costs no CPU");
        yield return string.Create(c, $"messages: {PayloadBytes} B payload, one per datagram (no packing); seed {Seed}; virtual time");
        yield return FlowControl == QuickSilver.Qsm.Region.RegionFlowControl.ReceiverWindow
            ? string.Create(c, $"flow control: {FlowControl}, receive window {ReceiveWindowBytes:N0} bytes, congestion control {(CongestionControl ? "on" : "off")}, leader repair {(LeaderRepair ? "on" : "off")}, gap map {GapReportPackets} packets")
            : FixedRate is { } rate ? string.Create(c, $"flow control: {FlowControl}, fixed at {rate:N0} packets/s (μ_min = {rate:N0}, λ = 0)") : $"flow control: {FlowControl}";
        yield return $"partition share: {(PartitionShare ? "on" : "off")}";
    }
}
