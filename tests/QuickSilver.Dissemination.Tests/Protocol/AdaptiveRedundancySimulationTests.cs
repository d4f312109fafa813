using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Simulation;

namespace QuickSilver.Dissemination.Tests.Protocol;

/// <summary>The adaptive redundancy (the default) on the seeded simulated network: no repair packet when nothing is
/// lost, repair packets that grow with the loss the clients report and cut their NAKs when it is lost.</summary>
public class AdaptiveRedundancySimulationTests
{
    private static DisseminationSim Run(int seed, double loss, ServerOptions options)
    {
        var files = SimFixtures.Files(options, seed, 3_000_000, 3_000_000);
        var names = SimFixtures.Names(files);
        var sim = new DisseminationSim(seed, options, files);
        for (int i = 0; i < 4; i++)
        {
            sim.AddClient(names, SimFixtures.FastClient(), loss > 0 ? SimFixtures.Lossy(loss) : null).Start();
        }

        Assert.True(sim.RunUntilComplete(TimeSpan.FromSeconds(120)), $"seed {seed}: incomplete");
        foreach (var c in sim.Clients)
        {
            SimFixtures.AssertIdentical(sim, c, names);
        }

        return sim;
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    public void WithoutLossNoRepairPacketIsSent(int seed)
    {
        var sim = Run(seed, 0, SimFixtures.FastServer());
        var c = sim.Server.Counters;
        Assert.Equal(0, c.ProactiveRepairPackets);
        Assert.Equal(0, c.RepairPacketsSent);
        Assert.Equal(0, c.NaksAccepted);
        Assert.Equal(0.0, sim.Server.LossEstimate);

        // The seed's rule, same run: a repair packet per page from the second requester on, needed by nobody.
        var paper = Run(seed, 0, SimFixtures.FastServer() with { RedundancyMode = RedundancyMode.Paper });
        Assert.True(paper.Server.Counters.ProactiveRepairPackets >= sim.Files.Catalog.ItemCount);
        Assert.True(paper.Server.Counters.DataBytesSent > c.DataBytesSent);
    }

    [Theory]
    [InlineData(3)]
    [InlineData(4)]
    public void AtTwoPercentLossTheRedundancyRisesAndNaksFall(int seed)
    {
        var adaptive = Run(seed, 0.02, SimFixtures.FastServer());
        var none = Run(seed, 0.02, SimFixtures.FastServer() with { RedundancyMode = RedundancyMode.Paper, Redundancy = new RedundancyRule { PercentPerRequester = 0 } });
        var a = adaptive.Server.Counters;
        var z = none.Server.Counters;
        Assert.Equal(0, z.ProactiveRepairPackets);
        Assert.True(a.ProactiveRepairPackets > adaptive.Files.Catalog.ItemCount / 2, $"seed {seed}: {a.ProactiveRepairPackets} proactive repair packets");
        Assert.InRange(adaptive.Server.LossEstimate, 0.01, 0.035);
        Assert.True(a.NaksAccepted * 2 < z.NaksAccepted, $"seed {seed}: NAKs {a.NaksAccepted} adaptive, {z.NaksAccepted} without redundancy");
    }
}
