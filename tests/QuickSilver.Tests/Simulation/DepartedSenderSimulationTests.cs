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

        // The group layer forgets their delivery progress with them (it kept one entry per sender ever heard).
        Assert.All(stayers, n => Assert.Equal(0, n.GroupLayer!.SendersTracked));
        Assert.All(stayers, n => Assert.Equal(Cycles, n.GroupLayer!.SendersForgotten));

        Assert.All(stayers, n => Assert.Equal(Cycles, senders.Count(s => n.Groups["prices"].CountFrom(s.Id) == Messages)));
    }

    [Fact]
    public void Without_retirement_every_departed_senders_stream_stays()
    {
        var (stayers, _) = Run(1203, 0.0, TimeSpan.FromHours(1));
        Assert.All(stayers, n => Assert.Equal(Cycles, n.Region!.Member!.StreamCount));
        Assert.All(stayers, n => Assert.Equal(Cycles, n.GroupLayer!.SendersTracked));
    }

    /// <summary>Fifty senders in turn join, publish 20 messages and leave while four members stay, under 2 % loss:
    /// every member delivers all 1,000 in order and ends holding no stream and no per-sender delivery progress.
    /// Before the group layer forgot departed senders it ended with 50 entries per member.</summary>
    [Fact]
    public void After_fifty_senders_come_and_go_no_per_sender_state_is_left()
    {
        var (stayers, senders) = Run(1204, 0.02, TimeSpan.FromSeconds(1), cycles: 50, messages: 20);
        Assert.Equal(50, senders.Count);
        Assert.All(stayers, n => Assert.Equal(0, n.Region!.Member!.StreamCount));
        Assert.All(stayers, n => Assert.Equal(0, n.GroupLayer!.SendersTracked));
        Assert.All(stayers, n => Assert.Equal(50, n.GroupLayer!.SendersForgotten));
    }

    /// <summary>A sender crashes after its stream reached everyone; the GMS removes it, and a node joins afterwards that
    /// never heard it. The members retire its stream as complete (nothing given up): the joiner holds nothing of a
    /// departed sender it never heard, so it no longer holds the region's purge of that stream at 0. Before, no member
    /// could purge the stream's last packets, and it was given up with them after the delay.</summary>
    [Fact]
    public void A_crashed_senders_stream_is_retired_although_a_later_joiner_never_heard_it()
    {
        var (cluster, stayers, sender) = ThreeStayAndOneSends(1206, TimeSpan.FromSeconds(1), 200);
        uint id = sender.Id;
        sender.Sim.Crash();
        cluster.SettleViews("prices", stayers);
        var joiner = cluster.AddNodes(1)[0];
        cluster.Join([joiner], "prices");
        cluster.SettleViews("prices", [.. stayers, joiner]);
        cluster.Network.RunFor(TimeSpan.FromSeconds(5));
        foreach (var member in stayers.Select(n => n.Region!.Member!))
        {
            output.WriteLine(member.Describe());
            Assert.Equal(0, member.StreamCount);
            Assert.Equal(1, member.StreamsRetired);
            Assert.Equal(0, member.StreamsGivenUp);
        }

        Assert.All(stayers, n => Assert.Equal(Enumerable.Range(1, 200), n.Groups["prices"].Received[id]));
        Assert.All(stayers, n => Assert.Equal(0, n.GroupLayer!.SendersTracked));
    }

    /// <summary>A sender leaves the group and joins it again under the same id before members retire its stream
    /// (retirement put off for an hour), then publishes again: every member delivers its second run too. Its group
    /// numbering goes on above the first run's, so a member that still remembers the first run's progress does not take
    /// the second run's messages for duplicates.</summary>
    [Fact]
    public void A_sender_that_leaves_and_joins_again_under_the_same_id_is_delivered_again()
    {
        var (cluster, stayers, sender) = ThreeStayAndOneSends(1205, TimeSpan.FromHours(1), 100);
        sender.Leave("prices");
        cluster.SettleViews("prices", stayers);
        uint id = sender.Id;
        cluster.Join([sender], "prices");
        cluster.SettleViews("prices", [.. stayers, sender]);
        Assert.Equal(id, sender.Id);
        sender.PublishNumbered("prices", 100, perSecond: 2_000);
        bool again = cluster.Network.RunUntil(() => stayers.All(n => n.Groups["prices"].CountFrom(id) >= 200), TimeSpan.FromMinutes(1));
        Assert.True(again, $"second run: {string.Join(", ", stayers.Select(n => n.Groups["prices"].CountFrom(id)))} of 200; duplicates dropped {string.Join(", ", stayers.Select(n => n.GroupLayer!.Duplicates))}");
        Assert.All(stayers, n => Assert.Equal(Enumerable.Range(1, 100).Concat(Enumerable.Range(1, 100)), n.Groups["prices"].Received[id]));
    }

    /// <summary>Three members and a sender in group "prices", without loss; the sender's first <paramref name="messages"/>
    /// are delivered to all three when this returns.</summary>
    private static (NodeCluster Cluster, List<NodeCluster.Node> Stayers, NodeCluster.Node Sender) ThreeStayAndOneSends(int seed, TimeSpan retireAfter, int messages)
    {
        var cluster = new NodeCluster(seed, new LinkOptions(),
            new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100), RetireDepartedStreamsAfter = retireAfter });
        var stayers = cluster.AddNodes(3);
        cluster.Join(stayers, "prices");
        var sender = cluster.AddNodes(1)[0];
        cluster.Join([sender], "prices");
        cluster.SettleViews("prices", [.. stayers, sender]);
        sender.PublishNumbered("prices", messages, perSecond: 2_000);
        cluster.Require(() => stayers.All(n => n.Groups["prices"].CountFrom(sender.Id) >= messages), TimeSpan.FromMinutes(1), "the first stream");
        return (cluster, stayers, sender);
    }

    private (List<NodeCluster.Node> Stayers, List<NodeCluster.Node> Senders) Run(int seed, double loss, TimeSpan retireAfter,
        int cycles = Cycles, int messages = Messages)
    {
        var cluster = new NodeCluster(seed, new LinkOptions { LossRate = loss },
            new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100), RetireDepartedStreamsAfter = retireAfter });
        var stayers = cluster.AddNodes(4);
        cluster.Join(stayers, "prices");
        cluster.SettleViews("prices", stayers);
        var senders = new List<NodeCluster.Node>();
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            var sender = cluster.AddNodes(1)[0];
            senders.Add(sender);
            cluster.Join([sender], "prices");
            cluster.SettleViews("prices", [.. stayers, sender]);
            sender.PublishNumbered("prices", messages, perSecond: 2_000);
            bool delivered = cluster.Network.RunUntil(() => stayers.All(n => n.Groups["prices"].CountFrom(sender.Id) >= messages), TimeSpan.FromMinutes(1));
            Assert.True(delivered, $"seed {seed}, cycle {cycle}: not everything was delivered");
            sender.Leave("prices");
            cluster.SettleViews("prices", stayers);
        }

        cluster.Network.RunFor(TimeSpan.FromSeconds(5));
        foreach (var n in stayers)
        {
            foreach (var s in senders)
            {
                Assert.Equal(Enumerable.Range(1, messages), n.Groups["prices"].Received[s.Id]);
            }
        }

        output.WriteLine($"seed {seed}: {stayers[0].Region!.Member!.Describe()}");
        return (stayers, senders);
    }
}
