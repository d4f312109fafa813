using QuickSilver.Core.Io;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;

namespace QuickSilver.Qsm.Tests;

/// <summary>The partition share at one stream (<see cref="PartitionShare"/>, docs/qsm.md, "Partition share"): what is
/// released at delivery, what an old class keeps after a view change and until when, and how the new class is scanned
/// and taken back.</summary>
public sealed class PartitionShareStreamTests
{
    private static readonly byte[] Payload = new byte[100];
    private static readonly NetAddress[][] OldLayout = [[NetAddress.Loopback(1)], [NetAddress.Loopback(2)], [NetAddress.Loopback(3)], [NetAddress.Loopback(4)]];

    private static (SenderStream Stream, PartitionShare Share) NewStream(int partitions, int partition, bool cachedAhead = true)
    {
        var share = new PartitionShare(enabled: true);
        share.OnViewInstalled(1, partitions, partition, oldLayout: null);
        var stream = new SenderStream(1, static (_, _, _) => true, share: share);
        stream.Anchor(0);
        if (cachedAhead)
        {
            stream.OnCached(SenderStream.MaxSequence); // the sender says every packet is held by its caching partition
        }

        return (stream, share);
    }

    [Fact]
    public void A_member_keeps_only_its_partitions_class_once_delivered_and_everything_it_has_not_delivered()
    {
        var (stream, _) = NewStream(partitions: 4, partition: 1);
        for (ulong seq = 1; seq <= 40; seq++)
        {
            if (seq != 21)
            {
                stream.OnNumbered(1, 1);
                stream.Add(seq, Payload);
            }
        }

        // 1..20 delivered: only 1, 5, 9, 13, 17 kept; 22..40 wait behind the gap at 21, all held.
        Assert.Equal(20UL, stream.Delivered);
        Assert.Equal(5 + 19, stream.HeldCount);
        Assert.Equal(15, stream.ReleasedAtDelivery);
        Assert.Equal((5 + 19) * 100, stream.HeldBytes);
        for (ulong seq = 1; seq <= 20; seq++)
        {
            Assert.Equal(seq % 4 == 1, stream.TryGet(seq, out _));
            Assert.True(stream.Received(seq)); // delivered: never asked for again
        }

        stream.Add(21, Payload);
        Assert.Equal(40UL, stream.Delivered);
        Assert.Equal(10, stream.HeldCount); // 1, 5, …, 37
        stream.Purge(20);
        Assert.Equal(5, stream.HeldCount);
        Assert.Equal(20UL, stream.PurgedThrough);
    }

    [Fact]
    public void The_purge_moves_the_window_even_when_the_share_released_everything()
    {
        var (stream, _) = NewStream(partitions: 4, partition: 1);
        stream.Add(2, Payload);
        stream.Add(1, Payload);
        stream.Purge(1);
        Assert.Equal(0, stream.HeldCount);
        stream.Purge(2);
        Assert.Equal(2UL, stream.PurgedThrough); // else the window would stay at 1 and overflow later
    }

    [Fact]
    public void After_a_view_change_the_old_class_is_kept_for_packets_numbered_before_it_until_the_region_purges_them()
    {
        var (stream, share) = NewStream(partitions: 4, partition: 1);
        for (ulong seq = 1; seq <= 20; seq++)
        {
            stream.OnNumbered(1, 1);
            stream.Add(seq, Payload);
        }

        // View 2 redraws: 3 partitions, this member in partition 2. The sender's view 2 starts at 25.
        share.OnViewInstalled(2, 3, 2, OldLayout);
        Assert.Single(share.OldShares);
        for (ulong seq = 21; seq <= 30; seq++)
        {
            stream.OnNumbered(seq < 25 ? 1u : 2u, seq < 25 ? 1UL : 25UL);
            stream.Add(seq, Payload);
        }

        Assert.Equal(24UL, stream.NumberedBefore(2));
        Assert.Equal(ulong.MaxValue, stream.NumberedBefore(3));
        // Old class (≡ 1 mod 4) up to 24: 1, 5, 9, 13, 17, 21; new class (≡ 2 mod 3) from 21: 23, 26, 29; 25 ≡ 1 mod 4 is
        // numbered in view 2: not kept on the old class's account.
        ulong[] held = [.. Enumerable.Range(1, 30).Select(i => (ulong)i).Where(seq => stream.TryGet(seq, out _))];
        Assert.Equal([1UL, 5, 9, 13, 17, 21, 23, 26, 29], held);

        // The new class is scanned from the purge point: 2, 8, 11, 14, 20 were released (5 and 17 are held as the old class).
        var lacking = new NakSet(32);
        stream.CachedMissing(30, 3, 2, lacking);
        Assert.Equal([new SeqRange(0, 0), new SeqRange(2, 4), new SeqRange(6, 6)], lacking.Ranges.ToArray());
        Assert.Equal(1UL, stream.CachedUpTo(3, 2, 30)); // does not vouch for 2, which it released

        // A peer's repair of 2 is taken back, not delivered again.
        Assert.False(stream.Add(2, Payload));
        Assert.Equal(1, stream.Restored);
        Assert.True(stream.TryGet(2, out _));
        Assert.Equal(7UL, stream.CachedUpTo(3, 2, 30)); // now up to 7 (5 is held as the old class; 8 is lacking)

        // Not settled while the region has purged less than 24; settled once it has.
        share.Settle([stream]);
        Assert.Single(share.OldShares);
        stream.Purge(24);
        share.Settle([stream]);
        Assert.Empty(share.OldShares);
        Assert.Equal(1, share.OldSharesSettled);
    }

    [Fact]
    public void A_delivered_packet_of_another_class_is_held_until_the_senders_cached_point_passes_it()
    {
        var (stream, _) = NewStream(partitions: 4, partition: 1, cachedAhead: false);
        for (ulong seq = 1; seq <= 20; seq++)
        {
            stream.OnNumbered(1, 1);
            stream.Add(seq, Payload);
        }

        Assert.Equal(20UL, stream.Delivered);
        Assert.Equal(20, stream.HeldCount); // no cached point yet: its caching partition may not hold them
        Assert.Equal(0, stream.ReleasedAtDelivery);

        stream.OnCached(10); // 1..10 held by their caching partitions: 2, 3, 4, 6, 7, 8, 10 go (1, 5, 9 are this class)
        Assert.Equal(7, stream.ReleasedAtDelivery);
        Assert.Equal(13, stream.HeldCount);
        stream.OnCached(10); // nothing new
        Assert.Equal(7, stream.ReleasedAtDelivery);

        stream.OnCached(30); // beyond what was delivered: 11..20 go now, 21.. at delivery
        Assert.Equal(7 + 8, stream.ReleasedAtDelivery);
        stream.Add(22, Payload);
        stream.Add(21, Payload);
        Assert.Equal([1UL, 5, 9, 13, 17, 21], Enumerable.Range(1, 22).Select(i => (ulong)i).Where(seq => stream.TryGet(seq, out _)));
    }

    [Fact]
    public void A_member_reports_the_highest_point_up_to_which_it_holds_its_class_and_a_joiner_nothing_until_the_purge_passes_its_start()
    {
        var (stream, _) = NewStream(partitions: 4, partition: 1, cachedAhead: false);
        foreach (ulong seq in new ulong[] { 1, 2, 3, 5, 6, 13 })
        {
            stream.Add(seq, Payload);
        }

        Assert.Equal(8UL, stream.HeldClassUpTo(4, 1)); // 1 and 5 held, 9 missing
        stream.Add(9, Payload);
        Assert.Equal(13UL, stream.HeldClassUpTo(4, 1)); // up to the highest seen
        // Another class (a view change moved this member): scanned again. 2 and 6 are held (nothing was released before a
        // cached point passed it), 10 is missing.
        Assert.Equal(9UL, stream.HeldClassUpTo(4, 2));

        var share = new PartitionShare(enabled: true);
        share.OnViewInstalled(1, 4, 1, oldLayout: null);
        var joiner = new SenderStream(1, static (_, _, _) => true, share: share);
        joiner.Anchor(100);
        joiner.Add(101, Payload);
        joiner.Add(105, Payload);
        Assert.Equal(0UL, joiner.HeldClassUpTo(4, 1)); // it holds nothing below 100, and its scan would vouch for it
        joiner.Purge(100); // the region purged up to its start: everyone has those
        Assert.Equal(105UL, joiner.HeldClassUpTo(4, 1));

        var off = new SenderStream(1, static (_, _, _) => true, share: new PartitionShare(enabled: false));
        off.Anchor(0);
        off.Add(1, Payload);
        Assert.Equal(0UL, off.HeldClassUpTo(4, 1)); // without the share nothing is released early: nothing to report
    }

    [Fact]
    public void Without_the_share_every_packet_is_kept_until_the_purge()
    {
        var share = new PartitionShare(enabled: false);
        share.OnViewInstalled(1, 4, 1, null);
        var stream = new SenderStream(1, static (_, _, _) => true, share: share);
        stream.Anchor(0);
        for (ulong seq = 1; seq <= 20; seq++)
        {
            stream.Add(seq, Payload);
        }

        Assert.Equal(20, stream.HeldCount);
        Assert.Equal(0, stream.ReleasedAtDelivery);
        share.OnViewInstalled(2, 3, 2, OldLayout);
        Assert.Empty(share.OldShares);
    }

    [Fact]
    public void Old_classes_are_bounded_and_forgetting_one_is_counted()
    {
        var share = new PartitionShare(enabled: true);
        share.OnViewInstalled(1, 4, 0, null);
        for (uint view = 2; view < 2 + PartitionShare.MaxOldShares + 3; view++)
        {
            share.OnViewInstalled(view, (int)view + 1, 0, OldLayout); // p changes every time: a new class each time
        }

        Assert.True(share.OldShares.Count <= PartitionShare.MaxOldShares);
        Assert.True(share.OldSharesForgotten > 0);
    }
}
