using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Tests.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// Issue 12, "accept only members" (docs/security.md): a region member takes data only from the nodes the views admit
/// as senders, at the addresses the views give them, repairs, tokens and pulls only from members of its view, and a
/// sender takes NAKs and ACKs only from members of its view of the region. Each test also shows the same input from
/// where it may come is taken, so the check is what makes the difference.
/// </summary>
public sealed class RegionAdmissionTests
{
    private static readonly NetAddress Admitted = NetAddress.Loopback(5020);

    [Fact]
    public void Data_from_a_sender_no_view_admits_is_dropped_and_makes_no_stream()
    {
        var rig = new RegionRig();
        var delivered = Count(rig);
        rig.Data(RegionRig.Outsider, First(777, 1), new byte[10]);
        rig.Data(RegionRig.Peer2, First(777, 1), new byte[10]); // a member's address claiming another id
        rig.Data(RegionRig.Outsider, First(777, 1UL << 62), new byte[10]);

        Assert.Null(rig.Member.Progress(777));
        Assert.Equal(3, rig.Member.Drops[DropReason.NotAMember]);
        Assert.Equal(0, delivered());

        rig.Data(RegionRig.Peer2, First(2, 1), new byte[10]); // the member as itself
        Assert.Equal(1, delivered());
    }

    [Fact]
    public void A_stream_start_hint_is_taken_only_from_an_admitted_sender_at_its_address()
    {
        var rig = new RegionRig();
        var hint = new byte[RegionWire.StartSize];
        RegionWire.WriteStart(hint, 1, 777, 1, 50);
        rig.Control(RegionRig.Outsider, hint); // an id no view admits
        RegionWire.WriteStart(hint, 1, 2, 1, 50);
        rig.Control(RegionRig.Outsider, hint); // a member's id from another address
        Assert.Null(rig.Member.Progress(777));
        Assert.Null(rig.Member.Progress(2));
        Assert.Equal(2, rig.Member.Drops[DropReason.NotAMember]);

        rig.Control(RegionRig.Peer2, hint); // the member itself: its stream starts after 49, at the next token
        Assert.False(rig.Member.Progress(2)!.Value.Anchored);
        RegionWire.WriteStart(hint, 1, 2, 1, 1);
        rig.Control(RegionRig.Peer3, hint);
        Assert.Equal(3, rig.Member.Drops[DropReason.NotAMember]);
    }

    [Fact]
    public void A_members_id_from_another_address_does_not_touch_its_stream()
    {
        var rig = new RegionRig();
        var delivered = Count(rig);
        rig.Data(RegionRig.Peer2, First(2, 1), new byte[10]);
        rig.Data(RegionRig.Outsider, new DataHeader(2, 1, 1, 1, 2), new byte[10]);
        rig.Data(RegionRig.Outsider, new DataHeader(2, 1, 1, 1, 10_000_000), new byte[10]);

        Assert.Equal((1UL, 1UL), (rig.Member.Progress(2)!.Value.Delivered, rig.Member.Progress(2)!.Value.MaxSeen));
        Assert.Equal(2, rig.Member.Drops[DropReason.NotAMember]);

        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 2), new byte[10]);
        Assert.Equal(2, delivered());
    }

    [Fact]
    public void A_sender_outside_the_region_is_heard_once_admitted_and_only_at_its_address()
    {
        var rig = new RegionRig();
        var delivered = Count(rig);
        rig.Data(Admitted, First(9, 1), new byte[10]);
        Assert.Equal(0, delivered());

        rig.Layer.AdmitSenders([new ViewMember(new NodeId(9), Admitted)]);
        rig.Data(Admitted, First(9, 1), new byte[10]);
        rig.Data(RegionRig.Peer3, new DataHeader(9, 1, 1, 1, 2), new byte[10]);
        Assert.Equal(1, delivered());
        Assert.Equal(2, rig.Member.Drops[DropReason.NotAMember]);
    }

    [Fact]
    public void A_sender_that_left_the_views_keeps_its_stream_at_its_address()
    {
        // Its last packets are still owed to the members that have its stream.
        var rig = new RegionRig();
        var delivered = Count(rig);
        rig.Layer.AdmitSenders([new ViewMember(new NodeId(9), Admitted)]);
        rig.Data(Admitted, First(9, 1), new byte[10]);
        rig.Layer.AdmitSenders([]);

        rig.Data(Admitted, new DataHeader(9, 1, 1, 1, 2), new byte[10]);
        rig.Data(RegionRig.Outsider, new DataHeader(9, 1, 1, 1, 3), new byte[10]);
        Assert.Equal(2, delivered());
        Assert.Equal(1, rig.Member.Drops[DropReason.NotAMember]);
    }

    [Fact]
    public void Repairs_come_only_from_members_of_the_view()
    {
        var rig = new RegionRig();
        var delivered = Count(rig);
        rig.Data(RegionRig.Peer2, First(2, 1), new byte[10]);
        var repair = new DataHeader(2, 1, RegionWire.RepairView, 1, 2);
        rig.Data(RegionRig.Outsider, repair, new byte[10]);
        Assert.Equal(1, delivered());

        rig.Data(RegionRig.Peer3, repair, new byte[10]);
        Assert.Equal(2, delivered());
    }

    [Fact]
    public void A_token_from_outside_the_view_does_not_move_a_streams_start()
    {
        var rig = new RegionRig();
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 5, 10), new byte[10]); // mid-stream: starts at the next token
        Assert.False(rig.Member.Progress(2)!.Value.Anchored);

        rig.Control(RegionRig.Outsider, rig.Token(2, purgeUpTo: 100, round: 1));
        Assert.False(rig.Member.Progress(2)!.Value.Anchored);
        Assert.Equal(1, rig.Member.Drops[DropReason.NotAMember]);

        rig.Control(RegionRig.Peer3, rig.Token(2, purgeUpTo: 100, round: 1));
        Assert.Equal((true, 100UL), (rig.Member.Progress(2)!.Value.Anchored, rig.Member.Progress(2)!.Value.Delivered));
    }

    [Fact]
    public void A_pull_from_outside_the_view_is_not_answered()
    {
        var rig = new RegionRig();
        for (ulong seq = 1; seq <= 3; seq++)
        {
            rig.Data(RegionRig.Peer2, First(2, seq), new byte[10]);
        }

        var pull = Ranges(RegionControl.Pull, sender: 2, first: 1, last: 3);
        rig.Control(RegionRig.Outsider, pull);
        Assert.Equal(0, rig.Member.RepairsSent);

        rig.Control(RegionRig.Peer3, pull);
        Assert.Equal(3, rig.Member.RepairsSent);
    }

    /// <summary>A well-formed pull from a member for a sender this member holds no stream of (a survivor that
    /// registered again after a publisher crashed, soak seed 8926) is not malformed: it is counted as not for this
    /// node, and nothing is repaired.</summary>
    [Fact]
    public void A_pull_for_a_sender_without_a_stream_here_is_not_counted_malformed()
    {
        var rig = new RegionRig();
        rig.Control(RegionRig.Peer3, Ranges(RegionControl.Pull, sender: 2, first: 1, last: 3));
        Assert.Equal(0, rig.Member.RepairsSent);
        Assert.Equal(0, rig.Member.Drops[DropReason.Malformed]);
        Assert.Equal(1, rig.Member.Drops[DropReason.NotForThisNode]);

        rig.Control(RegionRig.Peer3, [.. Ranges(RegionControl.Pull, sender: 2, first: 1, last: 3)[..^1]]);
        Assert.Equal(1, rig.Member.Drops[DropReason.Malformed]);
    }

    [Fact]
    public void A_sender_takes_NAKs_and_ACKs_only_from_members_of_its_view()
    {
        var rig = new RegionRig();
        rig.Run(TimeSpan.FromMilliseconds(1), pulls: 8);
        Assert.True(rig.Sender.LastSequence >= 5, $"the sender sent {rig.Sender.LastSequence} packets");
        var ack = new byte[RegionWire.AckSize];
        RegionWire.WriteAck(ack, new RegionAck(1, 1, 1, Stable: 5, MaxSeen: 5, Rate: 0, Loss: 0));
        var nak = Ranges(RegionControl.Nak, sender: 1, first: 1, last: 3);
        ulong acknowledged = rig.Sender.Acknowledged;

        rig.Control(RegionRig.Outsider, ack);
        rig.Control(RegionRig.Outsider, nak);
        Assert.Equal(acknowledged, rig.Sender.Acknowledged);
        Assert.Equal(0, rig.Sender.RetransmittedOnNak);
        Assert.Equal(2, rig.Sender.Drops[DropReason.NotAMember]);

        rig.Control(RegionRig.Peer2, nak);
        Assert.Equal(3, rig.Sender.RetransmittedOnNak);
        rig.Control(RegionRig.Peer2, ack);
        Assert.Equal(5UL, rig.Sender.Acknowledged);
    }

    [Fact]
    public void A_sender_retired_when_the_node_registered_again_still_takes_its_streams_NAKs_and_ACKs()
    {
        var rig = new RegionRig();
        rig.Run(TimeSpan.FromMilliseconds(1), pulls: 8);
        var old = rig.Sender;
        Assert.True(old.LastSequence >= 5, $"the sender sent {old.LastSequence} packets");
        rig.Layer.SetNode(7); // registered again as node 7: the sender of node 1 retires
        Assert.Same(old, Assert.Single(rig.Layer.RetiredSenders));

        rig.Control(RegionRig.Peer2, Ranges(RegionControl.Nak, sender: 1, first: 1, last: 3));
        Assert.Equal(3, old.RetransmittedOnNak);
        var ack = new byte[RegionWire.AckSize];
        RegionWire.WriteAck(ack, new RegionAck(1, 1, 1, Stable: old.LastSequence, MaxSeen: old.LastSequence, Rate: 0, Loss: 0));
        rig.Control(RegionRig.Peer2, ack);
        Assert.Equal(0, old.Unacknowledged);

        // All of it acknowledged: the next view lets it go.
        rig.Layer.InstallView(new RegionView(new RegionId(1), 2, rig.View.Members.Replace(rig.View.Members[0], new ViewMember(new NodeId(7), RegionRig.Self)), RegionRig.Group));
        Assert.Empty(rig.Layer.RetiredSenders);
    }

    [Fact]
    public void One_source_holds_at_most_a_few_stream_start_hints_waiting_for_their_view()
    {
        var rig = new RegionRig();
        var hint = new byte[RegionWire.StartSize];
        for (uint sender = 100; sender < 100 + RegionLayer.MaxPendingStarts; sender++)
        {
            RegionWire.WriteStart(hint, 1, sender, 9, 50); // for view 9, which this node does not have: kept for later
            rig.Control(RegionRig.Outsider, hint);
        }

        Assert.Equal(RegionLayer.MaxPendingStarts - RegionLayer.MaxPendingStartsPerSource, rig.Layer.Drops[DropReason.ReceiveBufferFull]);
        RegionWire.WriteStart(hint, 1, 2, 9, 50);
        rig.Control(RegionRig.Peer2, hint); // a real member's hint still finds room
        Assert.Equal(RegionLayer.MaxPendingStarts - RegionLayer.MaxPendingStartsPerSource, rig.Layer.Drops[DropReason.ReceiveBufferFull]);
    }

    [Fact]
    public void A_NAK_or_pull_with_bytes_after_its_ranges_is_malformed()
    {
        var rig = new RegionRig();
        rig.Run(TimeSpan.FromMilliseconds(1), pulls: 8);
        var nak = Ranges(RegionControl.Nak, sender: 1, first: 1, last: 3);
        rig.Control(RegionRig.Peer2, [.. nak, 0]);
        Assert.Equal(0, rig.Sender.RetransmittedOnNak);
        Assert.Equal(1, rig.Sender.Drops[DropReason.Malformed]);
    }

    private static DataHeader First(uint sender, ulong seq) => new(sender, 1, 1, 1, seq);

    private static byte[] Ranges(RegionControl kind, uint sender, ulong first, ulong last)
    {
        var set = new NakSet(8);
        set.AddRange(first, last);
        var message = new byte[64];
        return message.AsSpan(0, RegionWire.WriteRanges(message, kind, 1, sender, 0, 1, set)).ToArray();
    }

    private static Func<int> Count(RegionRig rig)
    {
        int delivered = 0;
        rig.Layer.Delivered += (_, _, _) => delivered++;
        return () => delivered;
    }
}
