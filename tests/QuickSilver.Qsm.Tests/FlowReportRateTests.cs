using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// How often receivers report, in the paper's cost model (virtual time): a member reports each time an eighth of its
/// window has been taken, counted in the packets the sender really sends. Counted in the largest packets a datagram can
/// hold, a stream of 100-byte packets was reported every 4 packets: the sender spent all its simulated CPU on reports
/// and a 250-member region carried 645 messages a second (docs/qsm.md, "Flow control").
/// </summary>
public sealed class FlowReportRateTests(ITestOutputHelper output)
{
    private static RegionCluster PaperModel(int seed, int members, int fanIn = 16, LinkOptions? link = null) => new(seed, members, 1, new RegionClusterOptions
    {
        Link = link ?? new LinkOptions { BandwidthBitsPerSecond = 100_000_000, Latency = TimeSpan.FromMilliseconds(0.05) },
        Region = new RegionOptions { SenderWindow = 65_536, MaxHeldPackets = 4 * 65_536, ReceiveWindowBytes = 131_072, ReportFanIn = fanIn },
        ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.1), // at most 10,000 datagrams a second per node
        ReceiveQueueLimit = 1000,
        PayloadBytes = 100,
    });

    [Fact]
    public void Reports_of_small_packets_come_every_eighth_of_a_window_not_every_few_packets()
    {
        const int Seed = 2006;
        var cluster = PaperModel(Seed, 25);
        cluster.SendFromAll();
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        var sender = cluster.Senders[0].Sender!;
        long delivered = cluster.DeliveredToAll(), reports = sender.StatusReports;
        cluster.Network.RunFor(TimeSpan.FromSeconds(3));
        double rate = (cluster.DeliveredToAll() - delivered) / 3.0;
        double reportsPerSecond = (sender.StatusReports - reports) / 3.0;
        output.WriteLine($"seed {Seed}: {rate:F0} messages/s to all 25 members; the sender took {reportsPerSecond:F0} reports/s");

        // A 128 KiB window is about 900 of these packets: an eighth is about 110, so at up to 10,000 packets a second each
        // of the five partitions reports about 90 times a second. Before the fix: 7,598 reports/s and 3,170 messages/s.
        Assert.True(reportsPerSecond < 1_000, $"seed {Seed}: the sender took {reportsPerSecond:F0} reports a second");
        Assert.True(rate > 8_000, $"seed {Seed}: {rate:F0} messages a second (a receiver takes at most 10,000 datagrams a second)");
    }

    [Fact]
    public void With_more_partitions_than_the_fan_in_the_sender_hears_one_report_per_block()
    {
        // 25 members, 5 partitions, fan-in 2: blocks {0, 1}, {2, 3}, {4}; the leaders of partitions 0, 2 and 4 combine
        // their blocks' reports, so the sender hears from three nodes, not five.
        const int Seed = 2007;
        var flat = PaperModel(Seed, 25);
        var blocked = PaperModel(Seed, 25, fanIn: 2);
        var results = new List<(double Rate, double Reports)>();
        foreach (var cluster in new[] { flat, blocked })
        {
            cluster.SendFromAll();
            cluster.Network.RunFor(TimeSpan.FromSeconds(2));
            var sender = cluster.Senders[0].Sender!;
            long delivered = cluster.DeliveredToAll(), reports = sender.StatusReports;
            cluster.Network.RunFor(TimeSpan.FromSeconds(3));
            results.Add(((cluster.DeliveredToAll() - delivered) / 3.0, (sender.StatusReports - reports) / 3.0));
        }

        output.WriteLine($"seed {Seed}: one report per partition {results[0].Rate:F0} msgs/s, {results[0].Reports:F0} reports/s; per block of 2: {results[1].Rate:F0} msgs/s, {results[1].Reports:F0} reports/s");
        Assert.True(results[1].Rate > 8_000, $"seed {Seed}: {results[1].Rate:F0} messages a second through blocks");
        Assert.True(results[1].Reports < 0.75 * results[0].Reports, $"seed {Seed}: {results[1].Reports:F0} reports/s through blocks against {results[0].Reports:F0}");
    }

    [Theory]
    [InlineData(2008)]
    [InlineData(2009)]
    public void Through_blocks_every_member_gets_every_message_under_loss(int seed)
    {
        // 60 members, 12 partitions, fan-in 3: four blocks, gaps named in partition aggregates reach the sender through
        // their block's aggregator.
        const int Messages = 3_000;
        var cluster = new RegionCluster(seed, 60, 1, LinkOptions.LossyLan, new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(50), ReportFanIn = 3 });
        cluster.SendFromAll(Messages);
        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(2));
        var sender = cluster.Senders[0].Sender!;
        output.WriteLine($"seed {seed}: virtual {cluster.Network.Now}, status reports at the sender {sender.StatusReports}, resent on status {sender.RetransmittedOnStatus}, acked {sender.Acknowledged}");
        Assert.True(done, $"seed {seed}: {cluster.CheckDelivery(Messages)}");
        Assert.Null(cluster.CheckDelivery(Messages));
        Assert.True(sender.RetransmittedOnStatus > 0, $"seed {seed}: no gap reached the sender through the blocks");
        Assert.True(cluster.Network.Drops[QuickSilver.Core.Diagnostics.DropReason.LinkLoss] > 100);
    }
}
