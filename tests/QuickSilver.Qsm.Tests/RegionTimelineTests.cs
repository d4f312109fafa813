using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>The simulation's latency records (Fig. 19): recovery measured when the repaired copy arrives and when it is
/// delivered in order.</summary>
public sealed class RegionTimelineTests(ITestOutputHelper output)
{
    private const uint Sender = 1000;

    private static TimeSpan Ms(double ms) => TimeSpan.FromMilliseconds(ms);

    [Fact]
    public void Recovery_at_arrival_counts_the_first_repaired_copy_not_the_in_order_delivery()
    {
        var timeline = new RegionTimeline(trackRecovery: true) { MeasureFrom = TimeSpan.Zero, MeasureUntil = Ms(1_000) };
        for (ulong seq = 1; seq <= 3; seq++)
        {
            timeline.OnTransmit(Sender, seq, Ms(0));
        }

        // 1 arrives from the sender; 2 and 3 are lost on the first multicast. 3 is repaired by a peer at 100 ms, 2 by
        // the sender's retransmission at 300 ms; both are delivered at 300 ms, when the gap at 2 closes.
        timeline.OnArrival(0, Sender, 1, fromSender: true, Ms(1));
        timeline.OnDelivered(0, Sender, 1, Ms(1));
        timeline.OnArrival(0, Sender, 3, fromSender: false, Ms(100));
        timeline.OnTransmit(Sender, 2, Ms(299));
        timeline.OnArrival(0, Sender, 2, fromSender: true, Ms(300));
        timeline.OnDelivered(0, Sender, 2, Ms(300));
        timeline.OnDelivered(0, Sender, 3, Ms(300));
        timeline.OnArrival(0, Sender, 3, fromSender: false, Ms(400)); // a duplicate repair: not a second sample
        timeline.OnArrival(0, Sender, 1, fromSender: false, Ms(500)); // a copy of a packet it had: not a repair

        Assert.Equal(2, timeline.RecoveryAtArrival.Count);
        Assert.Equal(200, timeline.RecoveryAtArrival.Mean, 6);
        Assert.Equal(300, timeline.ArrivalFromSender.Mean, 6);
        Assert.Equal(100, timeline.ArrivalFromRing.Mean, 6);
        Assert.Equal(0, timeline.ArrivalFromOtherPartition.Count);
        Assert.Equal(2, timeline.Recovery.Count);
        Assert.Equal(300, timeline.Recovery.Mean, 6);
        Assert.Equal(3, timeline.SampledDeliveries);
    }

    [Fact]
    public void Packets_first_sent_outside_the_window_are_not_sampled_at_arrival()
    {
        var timeline = new RegionTimeline(trackRecovery: true) { MeasureFrom = Ms(10), MeasureUntil = Ms(20) };
        timeline.OnTransmit(Sender, 1, Ms(0));
        timeline.OnTransmit(Sender, 2, Ms(15));
        timeline.OnArrival(0, Sender, 1, fromSender: false, Ms(50));
        timeline.OnArrival(0, Sender, 2, fromSender: false, Ms(65), ownClass: false);

        Assert.Equal(1, timeline.RecoveryAtArrival.Count);
        Assert.Equal(1, timeline.ArrivalFromOtherPartition.Count);
        Assert.Equal(50, timeline.RecoveryAtArrival.Mean, 6);
    }

    /// <summary>A lossy region: every repaired packet's arrival is sampled, and on average it comes no later than its
    /// in-order delivery.</summary>
    [Theory]
    [InlineData(RegionFlowControl.PaperRate, 61)]
    [InlineData(RegionFlowControl.ReceiverWindow, 62)]
    public void A_lossy_region_repairs_arrive_no_later_than_they_are_delivered(RegionFlowControl flow, int seed)
    {
        const int Messages = 2_000;
        var cluster = new RegionCluster(seed, 10, 1, new RegionClusterOptions
        {
            Link = LinkOptions.LossyLan,
            Region = new RegionOptions { TokenInterval = Ms(50), FlowControl = flow },
            TrackRecovery = true,
        });
        cluster.Timeline.MeasureFrom = TimeSpan.Zero;
        cluster.SendFromAll(Messages);
        Assert.True(cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(2)), cluster.CheckDelivery(Messages));

        var timeline = cluster.Timeline;
        output.WriteLine($"{flow}: repaired {timeline.Recovery.Count} of {timeline.SampledDeliveries}, at arrival {timeline.RecoveryAtArrival.Mean:F1} ms " +
                         $"(samples {timeline.RecoveryAtArrival.Count}), at delivery {timeline.Recovery.Mean:F1} ms");
        Assert.True(timeline.Recovery.Count > 10, "too few repairs to test anything");
        Assert.Equal(timeline.Recovery.Count, timeline.RecoveryAtArrival.Count); // every repaired packet, once, both ways
        Assert.Equal(timeline.RecoveryAtArrival.Count, timeline.ArrivalFromSender.Count + timeline.ArrivalFromRing.Count + timeline.ArrivalFromOtherPartition.Count);
        Assert.True(timeline.RecoveryAtArrival.Mean <= timeline.Recovery.Mean, $"arrival {timeline.RecoveryAtArrival.Mean} ms after delivery {timeline.Recovery.Mean} ms");
    }
}
