using QuickSilver.Core.Wire;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// The window above a gap (docs/qsm.md): a member whose byte bound has room for a window above its highest packet
/// says so (<see cref="FlowStatus.RoomAboveHighest"/>), and the sender counts that member's window from its highest
/// packet, not from its position, up to the packets the reports can name (<see cref="RegionOptions.GapReportPackets"/>).
/// Only with packets large enough that the window is at most half of those: with small ones the flag is never set.
/// </summary>
public sealed class WindowAboveGapTests(ITestOutputHelper output)
{
    /// <summary>Room is counted like the bound counts: held packets at their length, missing ones at the largest
    /// payload, from the purge point up to the highest packet; it must leave the reserve free.</summary>
    [Fact]
    public void A_stream_has_room_above_its_highest_packet_while_the_bound_less_the_reserve_holds_everything_up_to_it()
    {
        var stream = new SenderStream(1, static (_, _, _) => true, maxHeldBytes: 800, reserveBytes: 200, largestPayload: 100);
        Assert.False(stream.RoomAboveHighest); // not anchored: nothing to count from
        stream.Anchor(0);
        var packet = new byte[100];
        for (ulong seq = 2; seq <= 6; seq++)
        {
            Assert.True(stream.Add(seq, packet)); // 1 lost: counted at the largest payload
        }

        Assert.Equal(0UL, stream.FlowPosition);
        Assert.True(stream.RoomAboveHighest);  // 1..6: 600 B, the bound less the reserve
        Assert.True(stream.Add(7, packet));
        Assert.False(stream.RoomAboveHighest); // 1..7: 700 B, the reserve would not fit above it

        Assert.True(stream.Add(1, new byte[50])); // the repair, smaller than counted: 1..7 now 650 B, all delivered
        Assert.Equal(6UL, stream.FlowPosition);   // the position stops where the reserve still fits (1..6: 550 B)
        Assert.False(stream.RoomAboveHighest);
        stream.Purge(4);                          // every member took 1..4: 350 B left counted
        Assert.True(stream.RoomAboveHighest);
    }

    [Fact]
    public void The_flag_goes_on_the_wire_and_an_unknown_flag_is_malformed()
    {
        var status = new FlowStatus(7, 1, 3, 2, 0, Aggregate: true, Complete: true, 100, 65_536, 0b1, 150, Slowest: 9, Leading: 120,
            RoomAboveHighest: true);
        var datagram = new byte[RegionWire.MaxStatusSize];
        int length = RegionWire.WriteStatus(datagram, status);
        Assert.Equal(WireError.None, PacketHeader.TryRead(datagram.AsSpan(0, length), out var header));
        Assert.True(RegionWire.TryReadStatus(header, datagram.AsSpan(0, length), out var read));
        Assert.Equal(status, read);

        new PacketHeader(header.Type, header.Sender, (ushort)length, (ushort)(header.Flags | 32)).Write(datagram);
        Assert.Equal(WireError.None, PacketHeader.TryRead(datagram.AsSpan(0, length), out var unknown));
        Assert.False(RegionWire.TryReadStatus(unknown, datagram.AsSpan(0, length), out _));
    }

    /// <summary>5 % loss on every link of a 10 Gbit/s network, 16 KB packets (the 2 MiB window is 131 of them): counted
    /// from the members' positions only, the window filled behind each gap and held the sender (seeds 1272 and 1273:
    /// held by a gap 30.8 and 28.5 ms, the 2,000 packets delivered at 97 and 80 ms). Counted from their highest packets,
    /// it is not held by a gap at all and they are delivered at 57 and 53 ms, every one in order, no member holding more
    /// than its bound.</summary>
    [Theory]
    [InlineData(1272)]
    [InlineData(1273)]
    public void Under_loss_a_gap_no_longer_holds_the_sender_a_window_after_it(int seed)
    {
        const int Packets = 2_000;
        var cluster = new RegionCluster(seed, 3, 1, new RegionClusterOptions
        {
            Link = new LinkOptions { BandwidthBitsPerSecond = 10_000_000_000, LossRate = 0.05, Latency = TimeSpan.FromMilliseconds(0.1) },
            Region = new RegionOptions { TokenInterval = TimeSpan.FromSeconds(1) },
            PayloadBytes = 16_000, // one message a packet: the 2 MiB window is 131 of them
        });
        cluster.SendFromAll(Packets);
        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Packets), TimeSpan.FromSeconds(10));
        var sender = cluster.Senders[0].Sender!;
        var gap = sender.HeldBy(WindowHold.Gap) + sender.HeldBy(WindowHold.Horizon); // a gap held it, not the window above it
        output.WriteLine($"seed {seed}: done {done} at {cluster.Network.Now.TotalMilliseconds:F0} ms, held by a gap {gap.TotalMilliseconds:F1} ms, " +
                         $"limits above highest {sender.LimitsAboveHighest}, resent {sender.Retransmissions}, blocked {sender.WindowBlocked}");
        Assert.True(done, $"seed {seed}: not every message arrived");
        Assert.True(sender.Retransmissions > 50, $"seed {seed}: only {sender.Retransmissions} resends; the test proves nothing");
        Assert.True(sender.LimitsAboveHighest > 0, $"seed {seed}: no limit was counted from a highest packet");
        Assert.True(gap < TimeSpan.FromMilliseconds(10), $"seed {seed}: held by a gap for {gap}");
        Assert.Null(cluster.CheckDelivery(Packets));
        foreach (var node in cluster.LiveMembers)
        {
            foreach (var stream in node.Member!.Streams.Values)
            {
                Assert.True(stream.PeakHeldBytes <= stream.MaxHeldBytes, $"held {stream.PeakHeldBytes} B over the bound {stream.MaxHeldBytes}");
            }
        }
    }
}
