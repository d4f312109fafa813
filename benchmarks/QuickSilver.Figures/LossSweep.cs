using System.Globalization;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Figures;

/// <summary>
/// The <c>sweep</c> command: one lossy region in the paper's cost model (100-byte packets, 100 µs of receive CPU per
/// datagram, a 1,000-datagram receive queue, 100 Mbit/s links losing <c>--loss</c> each, the receivers' windows), or
/// with <c>--model fast</c> on 10 Gbit/s links with no receive CPU cost and 16,000-byte packets, run
/// once per seed with leader repair off and on (<see cref="RegionOptions.LeaderRepair"/>), side by side: the rate
/// delivered to every member over a window after a warm-up, the sender's resends, the leaders' repairs, and the requests
/// the sender could no longer serve (a gap found after a token's ACK released the packet: the member then waits a token
/// round). Short windows, many seeds: the spread over seeds is the point, one seed is one sample (docs/qsm.md, "Leader
/// repair").
/// </summary>
internal static class LossSweep
{
    public static void Run(int members, IReadOnlyList<int> seeds, double loss, TimeSpan warmup, TimeSpan window, bool fast, TextWriter output)
    {
        var c = CultureInfo.InvariantCulture;
        string model = fast
            ? "fast links: 10 Gbit/s, 0.1 ms, no receive CPU cost, 16,000-byte payloads (a packed packet), 2 MiB receive windows"
            : "paper's cost model: 100 Mbit/s, 100-byte payloads, 100 µs of receive CPU per datagram, 1,000-datagram receive queues";
        output.WriteLine(string.Create(c, $"# Leader repair, {members} members, {loss:P1} loss on every link, {warmup.TotalSeconds:F1} s warm-up + {window.TotalSeconds:F1} s measured (virtual), {model}"));
        output.WriteLine();
        output.WriteLine("| seed | off: msgs/s | on: msgs/s | on / off | off: sender resends/s | on: sender resends/s | on: leader repairs/s (sent again) | asked after release off / on | token ACKs held at a gap off / on | gap pulls off / on |");
        output.WriteLine("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        var ratios = new List<double>();
        foreach (int seed in seeds)
        {
            var off = Measure(seed, members, loss, leaderRepair: false, warmup, window, fast);
            var on = Measure(seed, members, loss, leaderRepair: true, warmup, window, fast);
            double ratio = on.Rate / off.Rate;
            ratios.Add(ratio);
            output.WriteLine(string.Create(c,
                $"| {seed} | {off.Rate:N0} | {on.Rate:N0} | {ratio:F2} | {off.SenderResends:N0} | {on.SenderResends:N0} | {on.LeaderRepairs:N0} ({on.LeaderResent:N0}) | {off.TooLate} / {on.TooLate} | {off.HeldAgainstToken} / {on.HeldAgainstToken} | {off.GapPulls} / {on.GapPulls} |"));
        }

        ratios.Sort();
        output.WriteLine();
        output.WriteLine(string.Create(c, $"on / off over {ratios.Count} seeds: min {ratios[0]:F2}, median {ratios[ratios.Count / 2]:F2}, max {ratios[^1]:F2}"));
    }

    private static Sample Measure(int seed, int members, double loss, bool leaderRepair, TimeSpan warmup, TimeSpan window, bool fast)
    {
        var cluster = new RegionCluster(seed, members, 1, fast
            ? new RegionClusterOptions
            {
                Link = new LinkOptions { BandwidthBitsPerSecond = 10_000_000_000, Latency = TimeSpan.FromMilliseconds(0.1), LossRate = loss },
                Region = new RegionOptions { LeaderRepair = leaderRepair },
                PayloadBytes = 16_000,
            }
            : new RegionClusterOptions
            {
                Link = new LinkOptions { BandwidthBitsPerSecond = 100_000_000, Latency = TimeSpan.FromMilliseconds(0.05), LossRate = loss },
                Region = new RegionOptions
                {
                    SenderWindow = 65_536, MaxHeldPackets = 4 * 65_536, ReceiveWindowBytes = Testbed.ReceiveWindowBytes, LeaderRepair = leaderRepair,
                },
                ProcessingCostPerPacket = Testbed.ProcessingCostPerPacket,
                ReceiveQueueLimit = Testbed.ReceiveQueueLimit,
                PayloadBytes = Testbed.PayloadBytes,
            });
        cluster.SendFromAll();
        cluster.Network.RunFor(warmup);
        var sender = cluster.Senders[0].Sender!;
        long LeaderRepairs() => cluster.LiveMembers.Sum(n => n.Member!.FlowStatus?.Repair?.Sent ?? 0);
        long LeaderResent() => cluster.LiveMembers.Sum(n => n.Member!.FlowStatus?.Repair?.Resent ?? 0);
        long delivered = cluster.DeliveredToAll(), resends = sender.RetransmittedOnStatus, repairs = LeaderRepairs(), again = LeaderResent();
        long tooLate = sender.RepairsTooLate, held = sender.HeldAgainstToken;
        long GapPulls() => cluster.LiveMembers.Sum(n => n.Member!.Recovery.GapPullsSent);
        long pulls = GapPulls();
        cluster.Network.RunFor(window);
        double seconds = window.TotalSeconds;
        return new Sample(
            (cluster.DeliveredToAll() - delivered) / seconds,
            (sender.RetransmittedOnStatus - resends) / seconds,
            (LeaderRepairs() - repairs) / seconds,
            (LeaderResent() - again) / seconds,
            sender.RepairsTooLate - tooLate,
            sender.HeldAgainstToken - held,
            GapPulls() - pulls);
    }

    private readonly record struct Sample(double Rate, double SenderResends, double LeaderRepairs, double LeaderResent, long TooLate, long HeldAgainstToken, long GapPulls);
}
