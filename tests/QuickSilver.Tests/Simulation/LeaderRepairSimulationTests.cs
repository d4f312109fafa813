using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// Leader repair (<see cref="RegionOptions.LeaderRepair"/>, docs/qsm.md "Leader repair") in the whole stack on virtual
/// time, where it gains least: 10 Gbit/s links that cost the receivers nothing per datagram, so the multicast resends it
/// saves cost only bandwidth, while a repair the leader lost waits out its hold-off (the sender finds a lost resend at
/// once). 500,000 messages of 1,000 B at 1 % loss on every link: with a hold-off of the mean plus four deviations, 25
/// members took 0.653 s instead of 0.503 s; with one deviation 0.528 s; and with the sender (a member here, and its
/// partition's leader) left to resend its own stream, whose unicast repairs had taken its uplink from new data, 0.520 s
/// (10 members: 0.580 s before that, 0.480 s after, against 0.488 s without leader repair).
/// </summary>
public sealed class LeaderRepairSimulationTests(ITestOutputHelper output)
{
    private const string Group = "fast";

    [Theory]
    [InlineData(10, 1273)]
    [InlineData(25, 1271)]
    public void On_fast_links_without_receive_cost_leader_repair_costs_at_most_a_tenth(int members, int seed)
    {
        const int Messages = 500_000;
        var took = new List<double>();
        foreach (bool leaderRepair in new[] { false, true })
        {
            var cluster = new NodeCluster(seed, new LinkOptions { BandwidthBitsPerSecond = 10_000_000_000, LossRate = 0.01, Latency = TimeSpan.FromMilliseconds(0.1) },
                new RegionOptions { TokenInterval = TimeSpan.FromSeconds(1), LeaderRepair = leaderRepair });
            var all = cluster.AddNodes(members);
            cluster.Join(all, Group);
            cluster.SettleViews(Group, all);
            var start = cluster.Network.Now;
            all[0].PublishNumbered(Group, Messages, size: 1_000);
            bool done = cluster.Network.RunUntil(() => all.All(n => n.Groups[Group].CountFrom(all[0].Id) == Messages), TimeSpan.FromSeconds(30));
            Assert.True(done, $"seed {seed}, leader repair {leaderRepair}: not every message arrived");
            Assert.All(all, n => Assert.Equal(Enumerable.Range(1, Messages), n.Groups[Group].Received[all[0].Id]));
            long repairs = all.Sum(n => n.Region!.Member!.FlowStatus?.Repair?.Sent ?? 0);
            Assert.Equal(leaderRepair, repairs > 0);
            took.Add((cluster.Network.Now - start).TotalSeconds);
            output.WriteLine($"{members} members, seed {seed}, leader repair {leaderRepair}: {took[^1]:F3} s, sender resent {all[0].Region!.Senders.Values.Single().RetransmittedOnStatus}, leader repairs {repairs}, held {string.Join(", ", Enum.GetValues<WindowHold>().Select(h => $"{h} {all[0].Region!.Senders.Values.Single().HeldBy(h).TotalMilliseconds:F0}"))}, again {all.Sum(n => n.Region!.Member!.FlowStatus?.Repair?.Resent ?? 0)}, pulls {all.Sum(n => n.Region!.Member!.Recovery.GapPullsSent)}, toolate {all[0].Region!.Senders.Values.Single().RepairsTooLate}, cwnd {all[0].Region!.Senders.Values.Single().CongestionWindowBytes} cuts {all[0].Region!.Senders.Values.Single().CongestionDecreases}");
        }

        Assert.True(took[1] < 1.1 * took[0], $"{members} members, seed {seed}: {took[1]:F3} s with leader repair against {took[0]:F3} s without");
    }
}
