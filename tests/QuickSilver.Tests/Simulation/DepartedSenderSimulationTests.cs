using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// Senders come and go while members stay (issue 12, bounded memory; docs/qsm.md, "Departed senders"): six nodes in turn
/// join the group, publish, and leave it. Each staying member gets every message of every one of them, in order, and
/// then retires their streams (<see cref="StreamRetirement"/>), so it does not keep one stream per sender it ever heard.
/// With retirement put off (the longest delay the option allows) the same run leaves six streams at each member: the
/// count is what the mechanism changes.
/// </summary>
public sealed class DepartedSenderSimulationTests(ITestOutputHelper output)
{
    private const int Cycles = 6;
    private const int Messages = 300;

    [Theory]
    [InlineData(1201, 0.0)]
    [InlineData(1202, 0.02)]
    public void Members_retire_the_streams_of_senders_that_left_after_delivering_everything(int seed, double loss)
    {
        var (stayers, senders) = Run(seed, loss, TimeSpan.FromSeconds(1));
        foreach (var member in stayers.Select(n => n.Region!.Member!))
        {
            Assert.Equal(0, member.StreamCount);
            Assert.Equal(Cycles, member.StreamsRetired);
        }

        Assert.All(stayers, n => Assert.Equal(Cycles, senders.Count(s => n.Groups["prices"].CountFrom(s.Id) == Messages)));
    }

    [Fact]
    public void Without_retirement_every_departed_senders_stream_stays()
    {
        var (stayers, _) = Run(1203, 0.0, TimeSpan.FromHours(1));
        Assert.All(stayers, n => Assert.Equal(Cycles, n.Region!.Member!.StreamCount));
    }

    private (List<NodeCluster.Node> Stayers, List<NodeCluster.Node> Senders) Run(int seed, double loss, TimeSpan retireAfter)
    {
        var cluster = new NodeCluster(seed, new LinkOptions { LossRate = loss },
            new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100), RetireDepartedStreamsAfter = retireAfter });
        var stayers = cluster.AddNodes(4);
        cluster.Join(stayers, "prices");
        cluster.SettleViews("prices", stayers);
        var senders = new List<NodeCluster.Node>();
        for (int cycle = 0; cycle < Cycles; cycle++)
        {
            var sender = cluster.AddNodes(1)[0];
            senders.Add(sender);
            cluster.Join([sender], "prices");
            cluster.SettleViews("prices", [.. stayers, sender]);
            sender.PublishNumbered("prices", Messages, perSecond: 2_000);
            bool delivered = cluster.Network.RunUntil(() => stayers.All(n => n.Groups["prices"].CountFrom(sender.Id) >= Messages), TimeSpan.FromMinutes(1));
            Assert.True(delivered, $"seed {seed}, cycle {cycle}: not everything was delivered");
            sender.Leave("prices");
            cluster.SettleViews("prices", stayers);
        }

        cluster.Network.RunFor(TimeSpan.FromSeconds(5));
        foreach (var n in stayers)
        {
            foreach (var s in senders)
            {
                Assert.Equal(Enumerable.Range(1, Messages), n.Groups["prices"].Received[s.Id]);
            }
        }

        output.WriteLine($"seed {seed}: {stayers[0].Region!.Member!.Describe()}");
        return (stayers, senders);
    }
}
