using Xunit.Abstractions;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Simulation;

namespace QuickSilver.Dissemination.Tests.Protocol;

public class DisseminationSimulationTests(ITestOutputHelper output)
{
    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    public void FiftyClientsWithFivePercentLossGetByteIdenticalFiles(int seed)
    {
        var options = SimFixtures.FastServer();
        var files = SimFixtures.Files(options, seed, 95_000, 30_000, 1, 61_234, 200_000, 12_345);
        var sim = new DisseminationSim(seed, options, files);
        var names = SimFixtures.Names(files);
        for (int i = 0; i < 50; i++)
        {
            sim.AddClient(names, SimFixtures.FastClient(), SimFixtures.Lossy(0.05)).Start();
        }

        bool done = sim.RunUntilComplete(TimeSpan.FromSeconds(120));
        Assert.True(done, $"seed {seed}: {sim.Clients.Count(c => c.Client!.IsComplete)} of 50 complete at {sim.Network.Now}");
        foreach (var c in sim.Clients)
        {
            SimFixtures.AssertIdentical(sim, c, names);
            Assert.Equal(0, c.Client!.Counters.VerifyFailures);
            Assert.Equal(0, c.Client.Counters.WantRefreshes); // NAKs recovered every loss; the stall guard never fired
        }

        var sc = sim.Server.Counters;
        output.WriteLine($"t={sim.Network.Now} tx={sc.Transmissions} repairOnly={sc.RepairOnlyTransmissions} src={sc.SourcePacketsSent} rep={sc.RepairPacketsSent} naks={sc.NaksAccepted} ann={sc.AnnounceDatagrams} drops={sim.Server.Drops.Total} rebuilt={sim.Clients.Sum(c => c.Client!.Counters.PagesRebuilt)} refresh={sim.Clients.Sum(c => c.Client!.Counters.WantRefreshes)} gaps={sim.Clients.Sum(c => c.Client!.Counters.AnnounceGaps)}");
        Assert.True(sim.Server.Counters.NaksAccepted > 0, "5 % loss should cost some NAKs");
        Assert.Equal(0, sim.Server.Book.Entries);
    }
}
