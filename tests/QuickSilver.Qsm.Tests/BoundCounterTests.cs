using QuickSilver.Core.Diagnostics;
using QuickSilver.Membership;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Tests.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// Bounds that had no counter (issue 12 item 5; docs/security.md, "Bounds", "Gaps found"): each test drives one to its
/// bound and sees its counter move, and not before.
/// </summary>
public sealed class BoundCounterTests
{
    [Fact]
    public void A_full_group_outbox_refuses_the_next_message_and_counts_it()
    {
        var group = new NodeGroup("g", new NullGroupOwner());
        group.Outbox.SetRegions([1]);
        for (int i = 0; i < NodeGroup.OutboxCapacity + 10; i++)
        {
            group.Pending.Enqueue(new byte[1]);
        }

        var drops = new DropCounters();
        int taken = 0;
        for (int i = 0; i < 2 * NodeGroup.OutboxCapacity && group.TryTakeNext(100, drops); i++)
        {
            taken++;
        }

        Assert.Equal(NodeGroup.OutboxCapacity, taken);
        Assert.Equal(1, group.OutboxFullCount);
        Assert.False(group.TryTakeNext(100, drops));
        Assert.Equal(2, group.OutboxFullCount);

        // The region writes one: room for one more, and no new count.
        Assert.True(group.Outbox.TryPeek(1, out _, out _));
        group.Outbox.Advance(1);
        Assert.True(group.TryTakeNext(100, drops));
        Assert.Equal(2, group.OutboxFullCount);
    }

    [Fact]
    public void A_pull_for_more_held_packets_than_the_repair_burst_is_cut_and_counted()
    {
        var rig = new RegionRig(new RegionOptions
        {
            MaxSenders = 8, MaxNakRanges = 8, SenderWindow = 256, MaxHeldPackets = 1024, TokenInterval = TimeSpan.FromMilliseconds(100),
            MaxRepairBurst = 4,
        });
        for (ulong seq = 1; seq <= 20; seq++)
        {
            rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, seq), new byte[10]);
        }

        Assert.Equal(0, rig.Member.RepairBudgetsSpent);
        rig.Control(RegionRig.Peer3, Pull(sender: 2, first: 1, last: 4)); // exactly the burst: nothing cut
        Assert.Equal(4, rig.Member.RepairsSent);
        Assert.Equal(0, rig.Member.RepairBudgetsSpent);

        rig.Control(RegionRig.Peer3, Pull(sender: 2, first: 1, last: 20));
        Assert.Equal(8, rig.Member.RepairsSent);
        Assert.Equal(1, rig.Member.RepairBudgetsSpent);
    }

    [Fact]
    public void A_missing_set_beyond_the_range_bound_is_coarsened_and_counted()
    {
        var rig = new RegionRig(); // MaxNakRanges = 8
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 1), new byte[10]);
        rig.Control(RegionRig.Peer3, Token(rig, cutoff: 1, round: 1));
        Assert.Equal(0, rig.Member.MissingSetsCoarsened);

        // Every other packet of 2..41 lost: 20 gaps, more than the set's 8 ranges.
        for (ulong seq = 3; seq <= 41; seq += 2)
        {
            rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, seq), new byte[10]);
        }

        rig.Control(RegionRig.Peer3, Token(rig, cutoff: 41, round: 2));
        Assert.True(rig.Member.MissingSetsCoarsened >= 1, rig.Member.Describe());
    }

    [Fact]
    public void A_pull_whose_ranges_exceed_the_range_bound_is_sent_truncated_and_counted()
    {
        var rig = new RegionRig(); // MaxNakRanges = 8; members 1 (this rig, ring step 0 and 3), 2, 3
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 1), new byte[10]);
        rig.Control(RegionRig.Peer3, Token(rig, cutoff: 1, round: 1));
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 102), new byte[10]); // 2..101 missing: one range
        Assert.Equal(0, rig.Member.RangeSetsTruncated);

        // The token comes back to this member at its closing step from member 2, which lacks 8 scattered packets of
        // 2..101: what this member pulls from it (what it lacks and member 2 has) is 2..101 less those 8, 9 ranges.
        var token = new Token { Region = rig.View.Region.Value, View = rig.View.ViewNumber, Round = 2, Partition = 0, Step = 3 };
        var section = new TokenSection(2, rig.Options.MaxNakRanges) { Cutoff = 101, PurgeUpTo = 0, StableBefore = 0, Holder = 1 };
        for (ulong seq = 10; seq <= 80; seq += 10)
        {
            section.PredecessorNaks.AddRange(seq, seq);
        }

        token.Sections.Add(section);
        var message = new byte[4096];
        rig.Control(RegionRig.Peer3, message.AsSpan(0, token.Write(message)));
        Assert.True(rig.Member.PullsSent >= 1, rig.Member.Describe());
        Assert.Equal(1, rig.Member.RangeSetsTruncated);
    }

    [Fact]
    public void The_NAK_set_reports_truncation_and_coarsening_that_the_counters_read()
    {
        var set = new NakSet(2);
        set.AddRange(1, 1);
        set.AddRange(3, 3);
        Assert.False(set.Truncated);
        set.AddRange(5, 5);
        Assert.True(set.Truncated);
        set.Clear();
        set.AppendCoarsening(1, 1);
        set.AppendCoarsening(3, 3);
        Assert.False(set.Coarse);
        set.AppendCoarsening(5, 5);
        Assert.True(set.Coarse);
    }

    private static byte[] Pull(uint sender, ulong first, ulong last)
    {
        var ranges = new NakSet(8);
        ranges.AddRange(first, last);
        var message = new byte[64];
        int length = RegionWire.WriteRanges(message, RegionControl.Pull, 1, sender, 0, 1, ranges);
        return message.AsSpan(0, length).ToArray();
    }

    /// <summary>A token of the rig's region at its start, with a section for node 2 cut off at <paramref name="cutoff"/>
    /// and nothing purged.</summary>
    private static byte[] Token(RegionRig rig, ulong cutoff, ulong round)
    {
        var token = new Token { Region = rig.View.Region.Value, View = rig.View.ViewNumber, Round = round, Partition = 0, Step = 0 };
        token.Sections.Add(new TokenSection(2, rig.Options.MaxNakRanges) { Cutoff = cutoff, PurgeUpTo = 0, StableBefore = 0 });
        var message = new byte[4096];
        return message.AsSpan(0, token.Write(message)).ToArray();
    }
}
