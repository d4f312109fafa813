using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Wire;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Tests.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// The pieces of <see cref="SlowReceiverPolicy.SkipAhead"/> (docs/qsm.md, "Slow receivers"): a stream told to skip
/// passes over its packets in order instead of delivering them, still waiting for gaps; the flow status carries who is
/// slowest and who leads; the skip notice's format; a notice is taken only from the sender's address; the options are
/// checked. The whole behaviour runs in <c>SlowReceiverSimulationTests</c>.
/// </summary>
public sealed class SlowReceiverPolicyTests
{
    private readonly List<ulong> _delivered = new();
    private readonly List<ulong> _skipped = new();
    private bool _refuse;

    private SenderStream NewStream(bool fifo = true)
    {
        var stream = new SenderStream(1, (_, seq, _) =>
        {
            if (_refuse)
            {
                return false;
            }

            _delivered.Add(seq);
            return true;
        }, fifo, skip: (_, seq, _) => _skipped.Add(seq));
        stream.Anchor(0);
        return stream;
    }

    [Fact]
    public void A_skipping_stream_passes_over_held_and_refused_packets_in_order_and_still_waits_for_gaps()
    {
        var stream = NewStream();
        stream.Add(1, [1]);
        _refuse = true;                     // the layer above is full from packet 2 on
        for (ulong seq = 2; seq <= 5; seq++)
        {
            stream.Add(seq, [1]);
        }

        stream.Add(7, [1]);                 // 6 is missing
        Assert.True(stream.Paused);
        Assert.Equal([1UL], _delivered);

        Assert.True(stream.SkipAhead(8));   // the sender says: skip through 8
        Assert.Equal([2UL, 3, 4, 5], _skipped);
        Assert.Equal(5UL, stream.Delivered); // 6 has not arrived: nothing beyond the gap moves, skipped or not

        stream.Add(6, [1]);
        stream.Add(8, [1]);
        Assert.Equal([2UL, 3, 4, 5, 6, 7, 8], _skipped);
        Assert.Equal(8UL, stream.Delivered);
        Assert.Equal(7, stream.Skipped);

        stream.Add(9, [1]);                 // past the point: offered again (and refused: the layer above is still full)
        Assert.True(stream.Paused);
        _refuse = false;
        stream.ResumeDelivery();
        Assert.Equal([1UL, 9], _delivered);
        Assert.False(stream.SkipAhead(8)); // nothing left to skip up to there
        Assert.Equal(9, stream.HeldCount);  // every packet is still held for the region (repairs) until the purge
    }

    [Fact]
    public void A_lossy_stream_passes_over_what_the_layer_above_refuses_instead_of_pausing()
    {
        var stream = NewStream();
        stream.Lossy = true;
        stream.Add(1, [1]);
        _refuse = true;
        stream.Add(2, [1]);
        stream.Add(3, [1]);
        Assert.False(stream.Paused);
        Assert.Equal(3UL, stream.Delivered);   // the position moves on: the sender is not held
        Assert.Equal([2UL, 3], _skipped);
        _refuse = false;
        stream.Add(4, [1]);
        Assert.Equal([1UL, 4], _delivered);

        stream.Lossy = false;                  // kept up: held to its pace again
        _refuse = true;
        stream.Add(5, [1]);
        Assert.True(stream.Paused);
        Assert.Equal(4UL, stream.Delivered);
        Assert.Equal(2, stream.Skipped);
    }

    [Fact]
    public void Without_fifo_a_packet_within_the_skip_is_not_delivered_early()
    {
        var stream = NewStream(fifo: false);
        stream.SkipAhead(4);
        stream.Add(3, [1]); // would be delivered at once without the skip
        Assert.Empty(_delivered);
        stream.Add(5, [1]);
        Assert.Equal([5UL], _delivered);
        stream.Add(1, [1]);
        stream.Add(2, [1]);
        stream.Add(4, [1]);
        Assert.Equal([1UL, 2, 3, 4], _skipped);
        Assert.Equal([5UL], _delivered);
    }

    [Fact]
    public void A_flow_status_carries_the_slowest_member_and_the_leading_position()
    {
        var status = new FlowStatus(7, 1, 3, 2, 4, Aggregate: true, Complete: true, 100, 65_536, 0b101, 150, Slowest: 9, Leading: 140, Cached: 130);
        var datagram = new byte[RegionWire.StatusSize];
        Assert.Equal(76, RegionWire.WriteStatus(datagram, status));
        Assert.Equal(WireError.None, PacketHeader.TryRead(datagram, out var header));
        Assert.True(RegionWire.TryReadStatus(header, datagram, out var read));
        Assert.Equal(status, read);

        // A leading position below the minimum is a lie: malformed.
        RegionWire.WriteStatus(datagram, status with { Leading = 99 });
        Assert.False(RegionWire.TryReadStatus(header, datagram, out _));
        Assert.False(RegionWire.TryReadStatus(header, datagram.AsSpan(0, 56), out _)); // the older 56-byte layout
        Assert.False(RegionWire.TryReadStatus(header, datagram.AsSpan(0, 68), out _)); // and the 68-byte one, before cached
    }

    [Fact]
    public void A_data_header_carries_the_cached_point_below_its_seq()
    {
        var datagram = new byte[RegionWire.DataHeaderSize + 4];
        var header = new DataHeader(7, 1, 3, 40, 50, Settled: 20, Cached: 45);
        int length = RegionWire.WriteData(datagram, header, [1, 2, 3, 4]);
        Assert.Equal(RegionWire.DataHeaderSize + 4, length);
        Assert.True(RegionWire.TryReadData(datagram, out var read, out var payload));
        Assert.Equal(header, read);
        Assert.Equal([1, 2, 3, 4], payload.ToArray());

        RegionWire.WriteData(datagram, header with { Cached = 50 }, [1, 2, 3, 4]); // a point at or beyond its own seq: a lie
        Assert.False(RegionWire.TryReadData(datagram, out _, out _));
    }

    [Fact]
    public void A_skip_notice_round_trips_and_malformed_ones_are_refused()
    {
        var message = new byte[RegionWire.SkipSize];
        RegionWire.WriteSkip(message, 1, 2, 3, 4_000);
        Assert.True(RegionWire.TryReadSkip(message, out uint region, out uint sender, out uint view, out ulong through));
        Assert.Equal((1u, 2u, 3u, 4_000UL), (region, sender, view, through));
        Assert.False(RegionWire.TryReadSkip(message.AsSpan(0, 20), out _, out _, out _, out _));
        RegionWire.WriteSkip(message, 1, 2, 0, 4_000);
        Assert.False(RegionWire.TryReadSkip(message, out _, out _, out _, out _));
        RegionWire.WriteSkip(message, 1, 2, 3, 0);
        Assert.False(RegionWire.TryReadSkip(message, out _, out _, out _, out _));
    }

    [Fact]
    public void A_skip_notice_is_taken_only_from_the_senders_address()
    {
        var rig = new RegionRig();
        int delivered = 0;
        rig.Layer.Delivered += (_, _, _) => delivered++;
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 1), new byte[10]);
        Assert.Equal(1, delivered);

        var notice = new byte[RegionWire.SkipSize];
        RegionWire.WriteSkip(notice, 1, 2, 1, 10);
        rig.Control(RegionRig.Peer3, notice);       // another member claims to be sender 2
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 2), new byte[10]);
        Assert.Equal(2, delivered);
        Assert.Equal(1, rig.Member.Drops[DropReason.NotAMember]);
        Assert.Equal(0, rig.Member.SkipNotices);

        rig.Control(RegionRig.Peer2, notice);       // the sender itself
        rig.Data(RegionRig.Peer2, new DataHeader(2, 1, 1, 1, 3), new byte[10]);
        Assert.Equal(2, delivered);                 // 3 is within the skip
        Assert.Equal(1, rig.Member.SkipNotices);
        Assert.True(rig.Layer.Member!.Streams[2].Lossy);
        Assert.Equal((3UL, 3UL), (rig.Member.Progress(2)!.Value.Delivered, rig.Member.Progress(2)!.Value.MaxSeen));
    }

    [Fact]
    public void The_options_are_checked_with_a_message_naming_them()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions
        {
            SlowReceivers = SlowReceiverPolicy.SkipAhead,
            FlowControl = RegionFlowControl.PaperRate,
        }.Validate());
        Assert.Contains("RegionOptions.SlowReceivers", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { LaggardTimeout = TimeSpan.FromMilliseconds(30) }.Validate());
        Assert.Contains("RegionOptions.LaggardTimeout", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { SlowReceivers = (SlowReceiverPolicy)7 }.Validate());
        Assert.Contains("RegionOptions.SlowReceivers", e.Message, StringComparison.Ordinal);
        new RegionOptions { SlowReceivers = SlowReceiverPolicy.SkipAhead, LaggardTimeout = TimeSpan.FromMilliseconds(40) }.Validate();
    }
}
