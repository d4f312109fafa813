using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// A node's senders and region views follow the regions its groups map to now, not every region they ever mapped to
/// (issue 12 item 5; docs/security.md, "Bounds"): <see cref="RegionLayer.Release"/>, <see cref="SenderContinuation"/>,
/// <c>GmsClient.RegionViewCount</c>. A mover joins and leaves fifty groups in turn, each shared with two stayers that
/// are in all fifty: each group maps to the mover's own region (distinct every time: its group set differs) and to the
/// stayers' region (the same every time, so the mover leaves it and comes back into it fifty times). Every message the
/// mover publishes reaches both stayers once, in order; before, its sender into the stayers' region was kept, and
/// now that it is released a new one numbering from 1 again would have had every packet dropped as a duplicate.
/// </summary>
public sealed class RegionReleaseSimulationTests(ITestOutputHelper output)
{
    private const int Groups = 50;
    private const int Messages = 20;

    [Theory]
    [InlineData(1301, 0.0)]
    [InlineData(1302, 0.02)]
    public void A_node_that_joins_and_leaves_fifty_groups_keeps_senders_and_region_views_only_for_its_current_groups(int seed, double loss)
    {
        var cluster = new NodeCluster(seed, new LinkOptions { LossRate = loss },
            new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100), RetireDepartedStreamsAfter = TimeSpan.FromHours(1) });
        var stayers = cluster.AddNodes(2);
        var names = Enumerable.Range(0, Groups).Select(i => $"g{i}").ToArray();
        cluster.Join(stayers, names);
        var mover = cluster.AddNodes(1)[0];
        int mostSenders = 0, mostViews = 0;
        for (int i = 0; i < Groups; i++)
        {
            cluster.Join([mover], names[i]);
            cluster.SettleViews(names[i], [.. stayers, mover]);
            uint id = mover.Id;
            mover.PublishNumbered(names[i], Messages, perSecond: 2_000);
            cluster.Require(() => stayers.All(n => n.Groups[names[i]].CountFrom(id) >= Messages), TimeSpan.FromMinutes(1), $"seed {seed}: group {names[i]}");
            mostSenders = Math.Max(mostSenders, mover.Region!.Senders.Count + mover.Region.RetiredSenders.Count);
            mostViews = Math.Max(mostViews, mover.Gms!.RegionViewCount);
            mover.Leave(names[i]);
            cluster.SettleViews(names[i], stayers);
        }

        cluster.Network.RunFor(TimeSpan.FromSeconds(5));
        var regions = mover.Region!;
        output.WriteLine($"seed {seed}: {regions.Describe()}; region views {mover.Gms!.RegionViewCount}, forgotten {mover.Gms.RegionViewsForgotten}");

        // Every message once, in order, at both stayers: none taken for a duplicate after the mover came back.
        uint moverId = mover.Id;
        Assert.All(stayers, n => Assert.All(names, g => Assert.Equal(Enumerable.Range(1, Messages), n.Groups[g].Received[moverId])));
        Assert.All(stayers, n => Assert.Equal(0, n.GroupLayer!.Duplicates));

        // O(1): two senders (its own region, the stayers') and two region views at most while in a group; none left after.
        Assert.InRange(mostSenders, 1, 2);
        Assert.InRange(mostViews, 1, 2);
        Assert.Empty(regions.Senders);
        Assert.Empty(regions.RetiredSenders);
        Assert.Equal(0, mover.Gms.RegionViewCount);
        Assert.True(regions.SendersReleased >= Groups, $"released {regions.SendersReleased}");
        Assert.True(regions.SendersStopped + regions.SendersTakenBack >= regions.SendersReleased, regions.Describe());
        Assert.Equal(0, regions.RetiredSendersEvicted);
        Assert.Null(regions.Member); // it left its last region: the member stopped and left the multicast address
        Assert.True(mover.Gms.RegionViewsForgotten >= Groups, $"forgotten {mover.Gms.RegionViewsForgotten}");
    }

    /// <summary>The stayers' region again, under a sender stopped in between: the mover leaves, its sender into the
    /// stayers' region is acknowledged and stopped, and the mover joins again. Its new sender numbers on from the old
    /// one's last packet (<see cref="SenderContinuation"/>), so the stayers, which still hold its stream (retirement
    /// put off for an hour), deliver the second run; it is a new sender object, not the old one taken back.</summary>
    [Fact]
    public void A_sender_stopped_after_leaving_numbers_on_when_the_node_comes_back()
    {
        var cluster = new NodeCluster(1303, new LinkOptions(),
            new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100), RetireDepartedStreamsAfter = TimeSpan.FromHours(1) });
        var stayers = cluster.AddNodes(2);
        cluster.Join(stayers, "prices", "other");
        var mover = cluster.AddNodes(1)[0];
        cluster.Join([mover], "prices");
        cluster.SettleViews("prices", [.. stayers, mover]);
        uint id = mover.Id;
        mover.PublishNumbered("prices", 100, perSecond: 2_000);
        cluster.Require(() => stayers.All(n => n.Groups["prices"].CountFrom(id) >= 100), TimeSpan.FromMinutes(1), "the first run");
        uint region = stayers[0].Region!.Member!.View!.Region.Value;
        ulong last = mover.Region!.Senders[region].LastSequence;

        mover.Leave("prices");
        cluster.SettleViews("prices", stayers);
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        Assert.Empty(mover.Region.Senders);
        Assert.Empty(mover.Region.RetiredSenders);
        Assert.Equal(2, mover.Region.ContinuationsRemembered); // its own region's (ended with its leave) and the stayers'

        cluster.Join([mover], "prices");
        cluster.SettleViews("prices", [.. stayers, mover]);
        Assert.Equal(id, mover.Id);
        mover.PublishNumbered("prices", 100, perSecond: 2_000);
        cluster.Require(() => stayers.All(n => n.Groups["prices"].CountFrom(id) >= 200), TimeSpan.FromMinutes(1), "the second run");
        Assert.All(stayers, n => Assert.Equal(Enumerable.Range(1, 100).Concat(Enumerable.Range(1, 100)), n.Groups["prices"].Received[id]));
        Assert.Equal(0, mover.Region.SendersTakenBack);
        Assert.True(mover.Region.Senders[region].LastSequence > last, "numbered on");
        Assert.All(stayers, n => Assert.Equal(0, n.GroupLayer!.Duplicates));
    }
}
