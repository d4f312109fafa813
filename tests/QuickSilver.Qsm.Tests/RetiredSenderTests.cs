using System.Collections.Immutable;
using QuickSilver.Membership;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Tests.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// The region layer's retired senders (issue 12 item 5; docs/security.md, "Bounds"): a sender into a region none of the
/// node's groups maps to any more is released (<see cref="RegionLayer.Release"/>), kept while it finishes its stream
/// within <see cref="RegionLayer.MaxRetiredSenders"/> and <see cref="RegionOptions.RetireDepartedStreamsAfter"/>, and
/// a sender made into the region again numbers on (<see cref="SenderContinuation"/>). Each bound moves its counter.
/// </summary>
public sealed class RetiredSenderTests
{
    [Fact]
    public void Released_senders_beyond_the_bound_are_evicted_and_counted_and_the_rest_stop_after_the_drain_delay()
    {
        // Paper rate control: a sender into a region it is no member of sends without waiting for a receiver's window.
        var rig = new RegionRig(new RegionOptions
        {
            FlowControl = RegionFlowControl.PaperRate, MaxSenders = 8, MaxNakRanges = 8, SenderWindow = 256, MaxHeldPackets = 1024,
            TokenInterval = TimeSpan.FromMilliseconds(100),
        });
        rig.Sender.Source = null; // the pulls go to the senders below
        var views = new List<RegionView>();
        for (uint region = 2; region < 2 + RegionLayer.MaxRetiredSenders + 1; region++)
        {
            var view = OtherRegion(region);
            views.Add(view);
            var sender = rig.Layer.Sender(view);
            sender.Source = rig.Source;
            sender.Signal();
            rig.Run(TimeSpan.FromMilliseconds(1), pulls: 4);
            sender.Source = null; // sent a few: the next sender takes the next pulls
        }

        var last = views.ToDictionary(v => v.Region.Value, v => rig.Layer.Senders[v.Region.Value].LastSequence);
        Assert.All(last.Values, l => Assert.True(l > 0));
        foreach (var view in views)
        {
            Assert.True(rig.Layer.Release(view.Region.Value)); // nobody acknowledges: each keeps what it sent
        }

        Assert.Equal(views.Count, rig.Layer.SendersReleased);
        Assert.Equal(RegionLayer.MaxRetiredSenders, rig.Layer.RetiredSenders.Count);
        Assert.Equal(1, rig.Layer.RetiredSendersEvicted);
        Assert.Equal(1, rig.Layer.SendersStopped);

        rig.Time.RunFor(rig.Options.RetireDepartedStreamsAfter + rig.Options.TokenInterval * 2);
        Assert.Empty(rig.Layer.RetiredSenders);
        Assert.Equal(RegionLayer.MaxRetiredSenders, rig.Layer.RetiredSendersTimedOut);
        Assert.Equal(views.Count, rig.Layer.SendersStopped);
        Assert.Equal(views.Count, rig.Layer.ContinuationsRemembered);

        // Back into one of them: a new sender, numbering on from the last packet the stopped one sent.
        var again = rig.Layer.Sender(views[3]);
        Assert.Equal(last[views[3].Region.Value], again.LastSequence);
        Assert.Equal(last[views[3].Region.Value] + 1, again.ViewStart);
        Assert.Equal(0, again.Unacknowledged);
        Assert.Equal(views.Count - 1, rig.Layer.ContinuationsRemembered);
    }

    [Fact]
    public void A_released_sender_asked_for_again_before_it_stopped_is_taken_back()
    {
        var rig = new RegionRig();
        rig.Run(TimeSpan.FromMilliseconds(1), pulls: 8);
        var sender = rig.Sender;
        ulong sent = sender.LastSequence;
        Assert.True(sent > 0);
        Assert.True(rig.Layer.Release(rig.View.Region.Value));
        Assert.Null(sender.Source);
        Assert.Same(sender, Assert.Single(rig.Layer.RetiredSenders));
        Assert.Empty(rig.Layer.Senders);

        Assert.Same(sender, rig.Layer.Sender(rig.View));
        Assert.Equal(1, rig.Layer.SendersTakenBack);
        Assert.Empty(rig.Layer.RetiredSenders);
        Assert.Equal(sent, sender.LastSequence);
        Assert.False(rig.Layer.Release(99)); // no sender there
    }

    [Fact]
    public void The_continuation_table_is_bounded_and_forgets_the_oldest_region()
    {
        var table = new SenderContinuation();
        table.Remember(1, 0); // nothing sent: nothing to continue
        Assert.Equal(0, table.Count);
        for (uint region = 1; region <= SenderContinuation.MaxRegions + 10; region++)
        {
            table.Remember(region, region * 10);
        }

        Assert.Equal(SenderContinuation.MaxRegions, table.Count);
        Assert.Equal(10, table.Forgotten);
        Assert.Equal(0UL, table.Take(1));
        Assert.Equal(110UL, table.Take(11));
        Assert.Equal(0UL, table.Take(11)); // taken: the new sender carries it on
        for (int i = 0; i < 3 * SenderContinuation.MaxRegions; i++)
        {
            table.Remember(11, 200);
            table.Take(11);
        }

        Assert.Equal(SenderContinuation.MaxRegions - 1, table.Count);
    }

    /// <summary>A region of nodes 2 and 3 that node 1 (the rig) sends into without being a member.</summary>
    private static RegionView OtherRegion(uint region) => new(new RegionId(region), 1,
        ImmutableArray.Create(new ViewMember(new NodeId(2), RegionRig.Peer2), new ViewMember(new NodeId(3), RegionRig.Peer3)), null);
}
