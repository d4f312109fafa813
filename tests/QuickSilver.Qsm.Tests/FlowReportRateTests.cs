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
    private static RegionCluster PaperModel(int seed, int members, int fanIn = 16, LinkOptions? link = null, bool trackRecovery = false) => new(seed, members, 1, new RegionClusterOptions
    {
        TrackRecovery = trackRecovery,
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

    /// <summary>
    /// 110 members in the paper's cost model, 22 partitions reporting in six blocks of up to four (fan-in 4: the
    /// aggregators take 3 partition leaders' aggregates each, plus their own partition's), 0.5 % loss on every link.
    /// A partition leader used to forward its aggregate to its block's aggregator on every change of its gap map (a gap
    /// that closed too), and the aggregator its block's on every change of theirs: at 250 members under 1 % loss
    /// (docs/benchmarks.md, "The block aggregator's load") the aggregator was the bottleneck. In a region with blocks a
    /// changed map now goes on only with a new gap, at most once per gap interval per stream (the gap timer sends what
    /// accumulated), and a partition leader leaves the gap timer's repeats to its aggregator. Measured on seeds 2006 / 7,
    /// 3 s after 3 s of warm-up: before, 5,067 / 3,382 messages/s, 1.39 / 1.56 partition aggregates at the aggregators
    /// and 0.99 / 1.10 reports at the sender per packet delivered to all, recovery at arrival p99 150 / 140 ms; after,
    /// 5,695 / 5,776, 0.54 / 0.54, 0.52 / 0.52 and 130 / 132 ms.
    /// </summary>
    [Theory]
    [InlineData(2006)]
    [InlineData(7)]
    public void In_a_region_with_blocks_a_changed_gap_map_is_forwarded_only_with_a_new_gap(int seed)
    {
        var cluster = PaperModel(seed, 110, fanIn: 4, trackRecovery: true,
            link: new LinkOptions { BandwidthBitsPerSecond = 100_000_000, Latency = TimeSpan.FromMilliseconds(0.05), LossRate = 0.005 });
        cluster.SendFromAll();
        cluster.Network.RunFor(TimeSpan.FromSeconds(3)); // past the start
        cluster.Timeline.MeasureFrom = cluster.Network.Now;
        cluster.Timeline.MeasureUntil = cluster.Network.Now + TimeSpan.FromSeconds(2);
        var members = cluster.LiveMembers.ToArray();
        long Partial() => members.Sum(n => n.Member!.FlowStatus!.PartialReportsReceived);
        long delivered = cluster.DeliveredToAll(), partial = Partial(), reports = cluster.Senders[0].Sender!.StatusReports;
        cluster.Network.RunFor(TimeSpan.FromSeconds(3));
        double packets = cluster.DeliveredToAll() - delivered;
        double partialPerPacket = (Partial() - partial) / packets;
        double senderPerPacket = (cluster.Senders[0].Sender!.StatusReports - reports) / packets;
        double arrivalP99 = cluster.Timeline.RecoveryAtArrival.Quantile(0.99);
        output.WriteLine($"seed {seed}: {packets / 3:F0} messages/s; per packet delivered to all, {partialPerPacket:F2} partition aggregates taken by the block aggregators, "
            + $"{senderPerPacket:F2} reports at the sender; recovery at arrival p99 {arrivalP99:F0} ms");
        Assert.True(partialPerPacket < 0.8, $"seed {seed}: {partialPerPacket:F2} partition aggregates per packet at the block aggregators");
        Assert.True(senderPerPacket < 0.75, $"seed {seed}: {senderPerPacket:F2} reports per packet at the sender");
        Assert.True(arrivalP99 < 145, $"seed {seed}: p99 recovery at arrival {arrivalP99:F0} ms (no gap waits longer to be reported)");
        Assert.True(packets / 3 > 5_300, $"seed {seed}: {packets / 3:F0} messages a second");
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
