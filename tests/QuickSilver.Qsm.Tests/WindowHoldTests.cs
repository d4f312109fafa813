using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>What holds a sender at its byte limit (<see cref="RegionSender.HeldBy"/>), under the receivers' windows in
/// the paper's cost model (100 µs of receive CPU per datagram).</summary>
public sealed class WindowHoldTests(ITestOutputHelper output)
{
    /// <summary>Without loss, the receivers' CPU is what holds the sender: its limit is set by members that took all
    /// they got (their queues hold the rest). With loss, a member waiting for a repair holds it (docs/benchmarks.md,
    /// "Both controllers").</summary>
    [Theory]
    [InlineData(0.0, 71)]
    [InlineData(0.005, 72)]
    public void A_sender_held_at_its_limit_is_held_by_a_gap_only_under_loss(double loss, int seed)
    {
        var cluster = new RegionCluster(seed, 10, 1, new RegionClusterOptions
        {
            Link = new LinkOptions { LossRate = loss },
            Region = new RegionOptions { FlowControl = RegionFlowControl.ReceiverWindow, CongestionControl = false, ReceiveWindowBytes = 1_000 * 144 },
            PayloadBytes = 100, // one 144-byte datagram each: the window is what the 1,000-datagram receive queue holds
            ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.1),
        });
        cluster.SendFromAll();
        cluster.Network.RunFor(TimeSpan.FromSeconds(3));

        var sender = cluster.Senders[0].Sender!;
        var gap = sender.HeldBy(WindowHold.Gap);
        var taken = sender.HeldBy(WindowHold.Taken);
        output.WriteLine($"loss {loss}: sent {sender.LastSequence}, held by a gap {gap.TotalMilliseconds:F0} ms, by full windows {taken.TotalMilliseconds:F0} ms, " +
                         $"incomplete {sender.HeldBy(WindowHold.Incomplete).TotalMilliseconds:F0} ms");
        Assert.True(sender.LastSequence > 1_000, "the sender hardly sent");
        Assert.Equal(TimeSpan.Zero, sender.HeldBy(WindowHold.Congestion));
        Assert.Equal(TimeSpan.Zero, sender.HeldBy(WindowHold.Local));
        Assert.Equal(0, sender.LimitsAboveHighest); // 144-byte packets: the window spans what reports name (WindowAboveGapTests)
        if (loss == 0)
        {
            Assert.True(taken > TimeSpan.FromSeconds(1), $"held by full windows only {taken}");
            Assert.True(gap * 10 < taken, $"held by a gap {gap} without loss"); // a report caught between two packets' processing
        }
        else
        {
            Assert.True(gap > TimeSpan.FromSeconds(1) && gap > taken * 10, $"held by a gap {gap}, by full windows {taken}");
        }
    }
}
