using QuickSilver.Aer.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Aer.Tests;

/// <summary>NCA's window paces the source's pull from its feed: over a bottleneck with a drop-tail queue, the source
/// with NCA overflows the queue far less than one that sends as fast as its own link allows.</summary>
public sealed class NcaPacingTests(ITestOutputHelper output)
{
    [Fact]
    public void The_window_paces_the_feed_over_a_bottleneck()
    {
        var bottleneck = new TreeLink { Latency = TimeSpan.FromMilliseconds(30), BandwidthBitsPerSecond = 2_000_000, QueueLimitPackets = 30 };
        var options = new AerScenarioOptions
        {
            Seed = 21,
            Sites = 2,
            ReceiversPerSite = 3,
            Messages = 1500,
            BackboneLink = bottleneck,
            AccessLink = new TreeLink { Latency = TimeSpan.FromMilliseconds(2), BandwidthBitsPerSecond = 100_000_000 },
        };
        var nca = new AerScenario(options);
        var ncaResult = nca.Run();
        // Without it the source fills the bottleneck's queue at once and the repairs of what it drops keep it full:
        // one second of that is enough to see.
        var flood = new AerScenario(options with { Aer = new AerOptions { CongestionControl = false }, TimeLimit = TimeSpan.FromSeconds(1) });
        var floodResult = flood.Run();
        output.WriteLine($"NCA: {ncaResult.Finished.TotalSeconds:0.0} s, {nca.Tree.QueueDrops} queue drops, W {nca.Sender.Window.W:0.0}, reductions {nca.Sender.Window.Reductions}, timeouts {nca.Sender.Window.Timeouts}");
        output.WriteLine($"no congestion control: {floodResult.Finished.TotalSeconds:0.0} s, {flood.Tree.QueueDrops} queue drops");
        Assert.True(ncaResult.AllDelivered);
        Assert.Equal(0, ncaResult.OrderViolations);
        Assert.True(nca.Sender.Window.Reductions > 0, "the bottleneck's losses reached the window");
        Assert.True(nca.Tree.QueueDrops * 20 < flood.Tree.QueueDrops, $"{nca.Tree.QueueDrops} vs {flood.Tree.QueueDrops} datagrams dropped by the bottleneck's queue");
    }
}
