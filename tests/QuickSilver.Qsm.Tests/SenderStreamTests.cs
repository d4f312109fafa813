using QuickSilver.Qsm.Region;

namespace QuickSilver.Qsm.Tests;

/// <summary>One sender's stream at one member: FIFO delivery holds packets behind a gap; without FIFO they are delivered
/// on arrival, and in both modes each packet exactly once and nothing before the anchor.</summary>
public sealed class SenderStreamTests
{
    private readonly List<ulong> _delivered = new();

    private void Deliver(SenderStream stream, ulong seq, byte[] payload) => _delivered.Add(seq);

    [Fact]
    public void A_member_vouches_for_its_own_partitions_packets_up_to_the_regions_horizon_not_only_its_own_last_packet()
    {
        // 5 partitions; the region has seen up to 18; this member has 1..16 and missed 17 and 18.
        var stream = new SenderStream(1);
        stream.Anchor(0, Deliver);
        for (ulong seq = 1; seq <= 16; seq++)
        {
            stream.Add(seq, [1], Deliver);
        }

        Assert.Equal(16UL, stream.CachedUpTo(5, 2, horizon: 18)); // 17 is in its class and missing
        Assert.Equal(18UL, stream.CachedUpTo(5, 1, horizon: 18)); // its class: 16 held, the next is 21: it holds all of its class up to 18
        Assert.Equal(16UL, stream.CachedUpTo(5, 1));               // without a horizon: its own last packet
    }

    [Fact]
    public void With_fifo_a_packet_after_a_gap_waits_for_the_gap()
    {
        var stream = new SenderStream(1, fifo: true);
        stream.Anchor(0, Deliver);
        stream.Add(1, [1], Deliver);
        stream.Add(3, [3], Deliver);
        Assert.Equal([1UL], _delivered);
        stream.Add(2, [2], Deliver);
        Assert.Equal([1UL, 2, 3], _delivered);
        Assert.Equal(3UL, stream.Delivered);
    }

    [Fact]
    public void Without_fifo_a_packet_after_a_gap_is_delivered_at_once_and_never_again()
    {
        var stream = new SenderStream(1, fifo: false);
        stream.Anchor(0, Deliver);
        stream.Add(1, [1], Deliver);
        stream.Add(3, [3], Deliver);
        stream.Add(5, [5], Deliver);
        Assert.Equal([1UL, 3, 5], _delivered);
        Assert.Equal(1UL, stream.Delivered); // the contiguous point (stability, NAKs) still waits for the gap

        Assert.False(stream.Add(3, [3], Deliver)); // a repair of what was delivered early is a duplicate
        stream.Add(2, [2], Deliver);
        stream.Add(4, [4], Deliver);
        Assert.Equal([1UL, 3, 5, 2, 4], _delivered);
        Assert.Equal(5UL, stream.Delivered);
        Assert.False(stream.Add(4, [4], Deliver));
        Assert.Equal(5, _delivered.Count);
    }

    [Fact]
    public void Without_fifo_a_mid_stream_joiner_delivers_what_it_held_beyond_its_anchor_and_nothing_before()
    {
        var stream = new SenderStream(1, fifo: false);
        stream.Add(9, [9], Deliver);   // heard before the member knows where its stream starts
        stream.Add(12, [12], Deliver);
        stream.Add(11, [11], Deliver);
        Assert.Empty(_delivered);

        stream.Anchor(9, Deliver);     // owed everything after 9
        Assert.Equal([11UL, 12], _delivered);
        stream.Add(10, [10], Deliver);
        Assert.Equal([11UL, 12, 10], _delivered);
        Assert.Equal(12UL, stream.Delivered);
    }
}
