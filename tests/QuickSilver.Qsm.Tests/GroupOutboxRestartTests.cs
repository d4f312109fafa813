using QuickSilver.Qsm.Group;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// <see cref="GroupOutbox.Restart"/>, what a group does with its messages when the GMS restarts (docs/membership.md, "A
/// restarted GMS"): the messages of packets sent and not acknowledged go back ahead of what the outbox holds, in group
/// order, and everything goes to the next view's regions, which start at the head, not at the tail.
/// </summary>
public sealed class GroupOutboxRestartTests
{
    private static ReadOnlyMemory<byte> M(int n) => new[] { (byte)n };

    private static List<ulong> Drain(GroupOutbox outbox, uint region)
    {
        var taken = new List<ulong>();
        while (outbox.TryPeek(region, out _, out ulong sequence))
        {
            taken.Add(sequence);
            outbox.Advance(region);
        }

        return taken;
    }

    [Fact]
    public void Resent_messages_go_first_in_order_then_what_the_old_region_had_not_written()
    {
        var fresh = new GroupOutbox(16);
        fresh.SetRegions([1]);
        for (ulong s = 1; s <= 6; s++)
        {
            fresh.Add(M((int)s), s, published: true);
        }

        for (int i = 0; i < 3; i++)
        {
            Assert.True(fresh.TryPeek(1, out _, out _));
            fresh.Advance(1);
        }

        Assert.Equal(3, fresh.Count); // 4, 5, 6 not written by region 1 yet
        int dropped = fresh.Restart([(2, M(2)), (3, M(3)), (5, M(5))]); // 2 and 3 unacknowledged; 5 is held already
        Assert.Equal(0, dropped);
        fresh.SetRegions([9]); // the new epoch's region starts at the head
        Assert.Equal([2ul, 3, 4, 5, 6], Drain(fresh, 9));
        Assert.Equal(0, fresh.Count);
    }

    [Fact]
    public void Without_a_restart_a_new_region_starts_at_the_tail_and_with_one_at_the_head()
    {
        var outbox = new GroupOutbox(8);
        outbox.SetRegions([1]);
        outbox.Add(M(1), 1, published: false);
        outbox.SetRegions([1, 2]);
        Assert.Empty(Drain(outbox, 2)); // taken before region 2 was in the view: not region 2's
        outbox.Restart([]);
        outbox.SetRegions([3]);
        Assert.Equal([1ul], Drain(outbox, 3));
    }

    [Fact]
    public void What_does_not_fit_is_dropped_and_counted_and_positions_stay_valid_from_the_start()
    {
        var outbox = new GroupOutbox(4);
        outbox.SetRegions([1]);
        outbox.Add(M(10), 10, published: false);
        outbox.Add(M(11), 11, published: false);
        int dropped = outbox.Restart([(5, M(5)), (6, M(6)), (7, M(7)), (8, M(8))]); // room for two: the newest two go back
        Assert.Equal(2, dropped);
        outbox.SetRegions([2]);
        Assert.Equal([7ul, 8, 10, 11], Drain(outbox, 2));
        outbox.Add(M(12), 12, published: false); // the ring goes on from where it is
        Assert.Equal([12ul], Drain(outbox, 2));
    }

    [Fact]
    public void A_replay_goes_to_the_new_regions_only_and_the_old_ones_send_nothing_twice()
    {
        var outbox = new GroupOutbox(16);
        outbox.SetRegions([1, 2]);
        for (ulong s = 1; s <= 5; s++)
        {
            outbox.Add(M((int)s), s, published: false);
        }

        Assert.Equal([1ul, 2, 3, 4, 5], Drain(outbox, 1));
        Assert.Equal([1ul, 2, 3, 4, 5], Drain(outbox, 2)); // both regions wrote all five: released
        outbox.Add(M(6), 6, published: false); // taken, not yet written by anyone
        outbox.SetRegions([1, 2, 7]); // region 7 is new: by default it starts at the tail
        Assert.Equal(0, outbox.Replay([(4, M(4)), (5, M(5))], [7u]));
        Assert.Equal([4ul, 5, 6], Drain(outbox, 7)); // the replay, then what is held
        Assert.Equal([6ul], Drain(outbox, 1)); // the old regions: only what they had not written
        Assert.Equal([6ul], Drain(outbox, 2));
        Assert.Equal(0, outbox.Count);
    }

    [Fact]
    public void A_region_that_stays_in_a_new_view_keeps_its_place_and_only_published_messages_go_back_once_all_wrote_them()
    {
        var outbox = new GroupOutbox(16);
        var released = new List<byte>();
        outbox.Released = message => released.Add(message.Span[0]);
        outbox.SetRegions([1, 2]); // region 1's cursor is the outbox's own field, region 2's in its array
        for (int s = 1; s <= 4; s++)
        {
            outbox.Add(M(s), (ulong)s, published: s % 2 == 0);
        }

        outbox.Advance(2);
        outbox.Advance(2);
        outbox.Advance(2); // region 2 wrote 1-3, region 1 nothing: nothing released
        Assert.Empty(released);
        Assert.Equal(4, outbox.Count);

        outbox.SetRegions([2, 5]); // region 1 left the view; region 2's cursor moves to the first place
        Assert.Equal([2], released); // 1-3 are no longer held back by region 1; of them only 2 was published
        Assert.Empty(Drain(outbox, 5)); // new, it starts at the tail: 4 was taken before it came
        Assert.Equal(1, outbox.Count); // region 2 has not written 4 yet
        Assert.Equal([4ul], Drain(outbox, 2));
        Assert.Equal(0, outbox.Count);
        Assert.Equal([2, 4], released);
        Assert.False(outbox.TryPeek(1, out _, out _)); // a region not in the view has nothing to write
    }
}
