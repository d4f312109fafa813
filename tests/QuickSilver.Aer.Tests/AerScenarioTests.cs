using QuickSilver.Aer.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Aer.Tests;

public sealed class AerScenarioTests(ITestOutputHelper output)
{
    [Fact]
    public void Smoke()
    {
        var result = new AerScenario(new AerScenarioOptions { Seed = 1, Messages = 500 }).Run();
        output.WriteLine($"done {result.AllDelivered} at {result.Finished}, naks at source {result.NaksAtSource}, latency {result.MeanRepairLatencyMs:0.0} ms ({result.RepairSamples}), {result.Totals}");
        output.WriteLine(result.Describe);
        Assert.True(result.AllDelivered);
    }
}
