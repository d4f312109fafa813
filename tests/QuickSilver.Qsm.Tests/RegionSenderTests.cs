using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>The region sender's copy-free, pull-driven send path, driven by hand through a transport double.</summary>
public sealed class RegionSenderTests
{
    private static readonly NetAddress Group = new(0xEF0A0001, 6000);

    /// <summary>A transport whose only send path is its feed, pulled when the test says (a ring of <c>slots</c>).</summary>
    private sealed class PulledTransport : IDatagramTransport, IFeedChannel
    {
        private readonly byte[] _slot = new byte[1500];
        private IDatagramFeed? _feed;

        public bool IsActive { get; private set; }

        public List<(NetAddress To, ulong Seq, int Length)> Sent { get; } = new();

        public NetAddress LocalAddress => NetAddress.Loopback(4000);

        public int MaxDatagramSize => 1500;

        public void SetHandler(IDatagramHandler handler)
        {
        }

        public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram) => throw new InvalidOperationException("the sender must only be pulled");

        public bool TryClaim(out Span<byte> slot) => throw new InvalidOperationException("the sender must only be pulled");

        public void Commit(NetAddress to, int length) => throw new InvalidOperationException();

        public Span<byte> ClaimedSlot => throw new InvalidOperationException("the sender must only be pulled");

        public IFeedChannel RegisterFeed(IDatagramFeed feed)
        {
            _feed = feed;
            IsActive = true;
            return this;
        }

        public void JoinGroup(NetAddress group)
        {
        }

        public void LeaveGroup(NetAddress group)
        {
        }

        public void Signal() => IsActive = true;

        public void Dispose() => _feed = null;

        /// <summary>Pulls while the feed is active and the ring has room; returns datagrams taken.</summary>
        public int Pull(int room, bool record = true)
        {
            int taken = 0;
            while (taken < room && IsActive && _feed is { } feed)
            {
                int length = feed.Pull(_slot, out var to);
                if (length <= 0)
                {
                    IsActive = false;
                    break;
                }

                if (record)
                {
                    Sent.Add((to, BitConverter.ToUInt64(_slot, RegionWire.DataHeaderSize - 24), length));
                }

                taken++;
            }

            return taken;
        }
    }

    /// <summary>Writes records of a fixed size, as many as fit, forever.</summary>
    private sealed class RecordSource(int recordBytes) : IRegionPacketSource
    {
        public long Records;

        public int WritePayload(Span<byte> payload)
        {
            int written = 0;
            while (written + recordBytes <= payload.Length)
            {
                payload.Slice(written, recordBytes).Fill((byte)Records);
                written += recordBytes;
                Records++;
            }

            return written;
        }
    }

    private static (RegionSender Sender, PulledTransport Transport, RecordSource Source, VirtualScheduler Time) Make(int window = 64)
    {
        var view = new RegionView(new RegionId(1), 1, [new ViewMember(new NodeId(1), NetAddress.Loopback(4000)), new ViewMember(new NodeId(2), NetAddress.Loopback(4001))], Group);
        var time = new VirtualScheduler();
        var transport = new PulledTransport();
        var sender = new RegionSender(1, view, transport, time, new RegionOptions { SenderWindow = window },
            new RateControl.RateControlOptions { MinRate = 1_000_000, Credits = 1_000_000, CreditsHigh = 1_000_000 });
        var source = new RecordSource(100);
        sender.Source = source;
        return (sender, transport, source, time);
    }

    private static readonly byte[] AckMessage = new byte[RegionWire.AckSize];

    private static void Ack(RegionSender sender, ulong stable)
    {
        var message = AckMessage; // one buffer, so the allocation test counts the sender's allocations alone
        RegionWire.WriteAck(message, new RegionAck(1, 1, 1, stable, stable, 1_000_000, 0));
        sender.OnControl(NetAddress.Loopback(4001), message);
    }

    /// <summary>A sender into a region of two members (the first the partition leader) that has sent packets 1 to 8.</summary>
    private static (RegionSender Sender, ViewMember Leader) EightSentToTwoMembers()
    {
        var leader = new ViewMember(new NodeId(2), NetAddress.Loopback(4001));
        var view = new RegionView(new RegionId(1), 1, [leader, new ViewMember(new NodeId(3), NetAddress.Loopback(4002))], Group);
        var transport = new PulledTransport();
        var sender = new RegionSender(1, view, transport, new VirtualScheduler(), new RegionOptions { SenderWindow = 64 },
            new RateControl.RateControlOptions { MinRate = 1_000_000, Credits = 1_000_000, CreditsHigh = 1_000_000 }) { Source = new RecordSource(100) };
        transport.Pull(room: 8);
        return (sender, leader);
    }

    /// <summary>With the receivers' windows a token's ACK says a packet is held by its caching partition, not that every
    /// member has it. While a flow report names a member's gap the sender keeps every packet after that member's
    /// position, so it can still resend the missing one (released, the member would wait a token round for a pull:
    /// simulated 25-member regions under 1 % loss stalled for a second in 1 to 4 of 12 seeds; docs/qsm.md, "Leader
    /// repair"). A member that has taken less but lacks nothing (a paused reader) does not hold the copies back.</summary>
    [Fact]
    public void A_token_ack_keeps_the_packets_after_a_reported_gap_but_not_after_a_paused_reader()
    {
        var (sender, leader) = EightSentToTwoMembers();
        Assert.Equal(8UL, sender.LastSequence);
        void Report(ulong position, GapMap missing) => sender.OnStatus(leader.Address, new FlowStatus(2, 1, 1, 1, 0, Aggregate: true, Complete: true,
            position, 1 << 20, missing, Highest: 8), local: false);

        Report(2, 1UL); // packet 3 missing, 4..8 arrived
        Assert.Equal(2UL, sender.Acknowledged);
        Ack(sender, 8);
        Assert.Equal(2UL, sender.Acknowledged); // still resendable
        Assert.Equal(1, sender.HeldAgainstToken);

        Report(5, 0UL); // the gap closed; a reader paused at 5
        Assert.Equal(5UL, sender.Acknowledged);
        Ack(sender, 8);
        Assert.Equal(8UL, sender.Acknowledged); // the caching partition holds them: released as before
        Assert.Equal(1, sender.HeldAgainstToken);
    }

    /// <summary>A flow report naming a highest packet the sender never numbered is dropped as malformed, like one whose
    /// position is: stored, it would hide every later report's highest (the sender samples its report delay on a rise).</summary>
    [Fact]
    public void A_report_whose_highest_packet_was_never_sent_is_dropped()
    {
        var (sender, leader) = EightSentToTwoMembers();
        void Report(ulong position, ulong highest) => sender.OnStatus(leader.Address, new FlowStatus(2, 1, 1, 1, 0, Aggregate: true, Complete: true,
            position, 1 << 20, 0UL, Highest: highest), local: false);

        Report(2, 1_000_000);
        Assert.Equal(1, sender.Drops[DropReason.Malformed]);
        Assert.Equal(0, sender.StatusReports);
        Report(4, 8);
        Assert.Equal(1, sender.Drops[DropReason.Malformed]);
        Assert.Equal(1, sender.StatusReports);
        Assert.Equal(4UL, sender.Acknowledged);
    }

    [Fact]
    public void A_full_ring_stops_the_pulls_and_nothing_is_numbered_that_cannot_leave()
    {
        var (sender, transport, source, _) = Make();
        Assert.Equal(3, transport.Pull(room: 3)); // the ring has three free slots
        Assert.Equal(3UL, sender.LastSequence);   // exactly what left: nothing numbered and held back
        long records = source.Records;
        Assert.Equal(0, transport.Pull(room: 0));
        Assert.Equal(3UL, sender.LastSequence);
        Assert.Equal(records, source.Records);     // and nothing taken from the source while the ring was full
        Assert.Equal(5, transport.Pull(room: 5));
        Assert.Equal([1UL, 2, 3, 4, 5, 6, 7, 8], transport.Sent.Select(s => s.Seq));
        Assert.All(transport.Sent, s => Assert.Equal(Group, s.To));
    }

    [Fact]
    public void The_window_stops_the_pulls_until_the_region_acknowledges()
    {
        var (sender, transport, _, _) = Make(window: 16);
        Assert.Equal(16, transport.Pull(room: 100));
        Assert.False(transport.IsActive); // the feed said "nothing now"
        Ack(sender, 10);
        Assert.True(transport.IsActive);  // the ACK signalled it
        Assert.Equal(10, transport.Pull(room: 100));
        Assert.Equal(26UL, sender.LastSequence);
    }

    [Fact]
    public void A_NAK_resends_the_kept_copy_byte_for_byte()
    {
        var (sender, transport, _, _) = Make();
        transport.Pull(room: 4);
        var nak = new byte[64];
        var ranges = new NakSet(8);
        ranges.Add(2);
        int length = RegionWire.WriteRanges(nak, RegionControl.Nak, 1, 1, partition: 0, partitions: 1, ranges);
        sender.OnControl(NetAddress.Loopback(4001), nak.AsSpan(0, length));
        Assert.Equal(1, transport.Pull(room: 1));
        Assert.Equal(2UL, transport.Sent[^1].Seq);
        Assert.Equal(transport.Sent[1].Length, transport.Sent[^1].Length);
        Assert.Equal(1, sender.RetransmittedOnNak);
    }

    [Theory]
    [InlineData(100)]
    [InlineData(1000)]
    public void Steady_state_sending_allocates_nothing_per_packet(int recordBytes)
    {
        var (sender, transport, _, _) = Make(window: 256);
        sender.Source = new RecordSource(recordBytes);
        void Cycle()
        {
            transport.Pull(room: 100, record: false);
            Ack(sender, sender.LastSequence);
        }

        for (int i = 0; i < 20; i++)
        {
            Cycle(); // warm-up: the window's slots get their buffers
        }

        ulong first = sender.LastSequence;
        long allocated = Property.FewestAllocated(() =>
        {
            for (int i = 0; i < 100; i++)
            {
                Cycle();
            }
        });
        Assert.Equal(30_000UL, sender.LastSequence - first);
        Assert.True(allocated == 0, $"{allocated} bytes allocated sending 10,000 packets (the fewest of three windows)");
    }

    /// <summary>A sender alone in its region's view (no member reports; its own member reads its stream in place): its
    /// local member's position acknowledges, settles and moves the byte window on every send, so with no ACK or report
    /// ever it sends far beyond one receive window (2 MiB) and holds nothing. (Before the fix the window moved only on a
    /// report, an ACK, a view or a resume, none of which come here: between real processes a publisher stopped for good
    /// after a GMS failover.)</summary>
    [Fact]
    public void A_sender_alone_in_its_view_is_acknowledged_by_its_own_member_and_never_blocks()
    {
        var view = new RegionView(new RegionId(1), 1, [new ViewMember(new NodeId(1), NetAddress.Loopback(4000))], Group);
        var transport = new PulledTransport();
        var sender = new RegionSender(1, view, transport, new VirtualScheduler(), new RegionOptions { SenderWindow = 4096 },
            new RateControl.RateControlOptions());
        sender.LocalPosition = () => sender.LastSequence; // its own member takes each packet as it is sent
        sender.Source = new RecordSource(100);
        sender.InstallView(view with { ViewNumber = 2 });
        int packets = (4 << 20) / 1500; // twice the receive window, in 1,500-byte datagrams
        Assert.Equal(packets, transport.Pull(room: packets, record: false));
        Assert.Equal((ulong)packets, sender.Acknowledged);
        Assert.Equal((ulong)packets, sender.Settled);
        Assert.Equal(0, sender.WindowBlocked);
    }

    /// <summary>Holds what the sender lends, as the node's own member does, and gives it back when told.</summary>
    private sealed class OwnMember
    {
        public readonly Dictionary<ulong, (byte[] Buffer, int Offset, byte[] Copy)> Held = new();

        public void OnSent(ulong seq, in LentPacket packet, ReadOnlySpan<byte> sent)
        {
            Assert.True(sent.SequenceEqual(packet.Payload), $"packet {seq}: the slot's bytes and the lent datagram's differ");
            packet.Lender.Lend(seq, packet.Buffer);
            Held.Add(seq, (packet.Buffer, packet.Offset, packet.Payload.ToArray()));
        }

        public void GiveBack(RegionSender sender, ulong seq)
        {
            ((IPacketLender)sender).GiveBack(seq, Held[seq].Buffer);
            Held.Remove(seq);
        }

        public void AssertIntact()
        {
            foreach (var (seq, (buffer, offset, copy)) in Held)
            {
                Assert.True(buffer.AsSpan(offset, copy.Length).SequenceEqual(copy), $"packet {seq} was overwritten while its member held it");
            }
        }
    }

    /// <summary>The sender's own member holds the datagrams the sender kept (docs/qsm.md, "The sender's own packets"):
    /// a window slot whose last packet the member still holds takes another buffer for its next packet, and a buffer
    /// given back is used again.</summary>
    [Fact]
    public void A_datagram_its_own_member_holds_is_not_written_again_until_given_back()
    {
        var (sender, transport, _, _) = Make(window: 16);
        sender.Source = new RecordSource(200); // each packet's records hold different bytes
        var member = new OwnMember();
        sender.Sent += member.OnSent;
        Assert.Equal(16, transport.Pull(room: 100));
        var first = member.Held.ToDictionary(p => p.Key, p => p.Value.Buffer);

        Ack(sender, 16); // the window moves on while the member still holds 1..16
        Assert.Equal(16, transport.Pull(room: 100));
        member.AssertIntact();
        var second = member.Held.Where(p => p.Key > 16).ToDictionary(p => p.Key, p => p.Value.Buffer);
        Assert.All(second.Values, buffer => Assert.DoesNotContain(buffer, first.Values));

        for (ulong seq = 1; seq <= 16; seq++)
        {
            member.GiveBack(sender, seq); // released after the window moved on: spares
        }

        for (ulong seq = 17; seq <= 24; seq++)
        {
            member.GiveBack(sender, seq); // released while the window still keeps them: used again in place
        }

        Ack(sender, 32);
        Assert.Equal(16, transport.Pull(room: 100));
        member.AssertIntact(); // 25..32 are still held: none of their buffers was written
        for (ulong seq = 33; seq <= 40; seq++)
        {
            Assert.Same(second[seq - 16], member.Held[seq].Buffer);
        }

        for (ulong seq = 41; seq <= 48; seq++)
        {
            Assert.Contains(member.Held[seq].Buffer, first.Values); // the slots of 25..32 took spares
        }
    }

    /// <summary>A member that holds each packet for 300 more (longer than the 256-packet window, so every slot is
    /// still lent when the window comes back to it) costs no allocation once the spares have warmed up.</summary>
    [Fact]
    public void Steady_state_sending_to_a_member_that_holds_packets_past_the_window_allocates_nothing()
    {
        var (sender, transport, _, _) = Make(window: 256);
        sender.Source = new RecordSource(1000);
        var held = new (ulong Seq, byte[] Buffer)[512];
        ulong oldest = 1;
        sender.Sent += (ulong seq, in LentPacket packet, ReadOnlySpan<byte> sent) =>
        {
            packet.Lender.Lend(seq, packet.Buffer);
            held[seq % (ulong)held.Length] = (seq, packet.Buffer);
        };
        void Cycle()
        {
            transport.Pull(room: 100, record: false);
            Ack(sender, sender.LastSequence);
            for (; oldest + 300 <= sender.LastSequence; oldest++)
            {
                var (seq, buffer) = held[oldest % (ulong)held.Length];
                ((IPacketLender)sender).GiveBack(seq, buffer);
            }
        }

        for (int i = 0; i < 20; i++)
        {
            Cycle(); // warm-up: the window's slots and the spares get their buffers
        }

        long allocated = Property.FewestAllocated(() =>
        {
            for (int i = 0; i < 100; i++)
            {
                Cycle();
            }
        });
        Assert.True(allocated == 0, $"{allocated} bytes allocated sending 10,000 packets (the fewest of three windows)");
    }
}
