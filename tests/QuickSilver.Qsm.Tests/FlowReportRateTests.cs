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
    [Fact]
    public void Reports_of_small_packets_come_every_eighth_of_a_window_not_every_few_packets()
    {
        const int Seed = 2006;
        var cluster = new RegionCluster(Seed, 25, 1, new RegionClusterOptions
        {
            Link = new LinkOptions { BandwidthBitsPerSecond = 100_000_000, Latency = TimeSpan.FromMilliseconds(0.05) },
            Region = new RegionOptions { SenderWindow = 65_536, MaxHeldPackets = 4 * 65_536, ReceiveWindowBytes = 131_072 },
            ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.1), // at most 10,000 datagrams a second per node
            ReceiveQueueLimit = 1000,
            PayloadBytes = 100,
        });
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
}
