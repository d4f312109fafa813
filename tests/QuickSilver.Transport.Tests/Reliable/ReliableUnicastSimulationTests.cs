using System.Buffers.Binary;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Transport.Tests.Reliable;

public sealed class ReliableUnicastSimulationTests
{
    private static readonly ReliableUnicastOptions FastFailure = new()
    {
        MaxRetransmissions = 5,
        MaxRto = TimeSpan.FromMilliseconds(200),
    };

    private static (SimNetwork Net, SimNode NodeA, SimNode NodeB, TestEndpoint A, TestEndpoint B) Setup(
        int seed, LinkOptions? link = null, ReliableUnicastOptions? options = null)
    {
        var net = new SimNetwork(seed, link);
        var nodeA = net.AddNode();
        var nodeB = net.AddNode();
        var a = Endpoint(nodeA, options);
        var b = Endpoint(nodeB, options);
        return (net, nodeA, nodeB, a, b);
    }

    private static TestEndpoint Endpoint(SimNode node, ReliableUnicastOptions? options)
        => new(node.Open(5000), node, (uint)node.Random.Next(1, int.MaxValue), options);

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    public void Hundred_thousand_messages_arrive_once_and_in_order_through_loss_reordering_and_duplication(int seed)
    {
        var link = new LinkOptions
        {
            LossRate = 0.1, // per link: a datagram crosses two, so about 19 % are lost end to end
            ReorderRate = 0.1,
            ReorderDelay = TimeSpan.FromMilliseconds(1),
            DuplicateRate = 0.05,
        };
        var (net, _, _, a, b) = Setup(seed, link);
        var scenario = new ReliableTransferScenario(a, b, 100_000);
        scenario.Pump();

        bool done = net.RunUntil(() => scenario.Done || scenario.Violation is not null, TimeSpan.FromMinutes(10));
        Assert.True(scenario.Violation is null, $"seed {seed}: {scenario.Violation}");
        Assert.True(done, $"seed {seed}: only {scenario.Received} of 100,000 arrived");
        Assert.True(net.Drops[DropReason.LinkLoss] > 10_000, $"seed {seed}: the network lost only {net.Drops[DropReason.LinkLoss]}");
        Assert.Equal(100_000, scenario.Received);
    }

    [Fact]
    public void Traffic_flows_both_ways_at_once()
    {
        var (net, _, _, a, b) = Setup(3, new LinkOptions { LossRate = 0.1 });
        var ab = new ReliableTransferScenario(a, b, 5_000);
        var ba = new ReliableTransferScenario(b, a, 5_000);
        ab.Pump();
        ba.Pump();
        Assert.True(net.RunUntil(() => ab.Done && ba.Done, TimeSpan.FromMinutes(2)), $"seed 3: {ab.Received} and {ba.Received}");
        Assert.Null(ab.Violation);
        Assert.Null(ba.Violation);
    }

    [Fact]
    public void A_full_send_buffer_refuses_counts_the_refusal_then_frees_space()
    {
        var options = new ReliableUnicastOptions { SendBufferSegments = 64, Window = 16, MaxMessageBytes = 10_000 };
        var (net, _, _, a, b) = Setup(4, options: options);
        int accepted = 0;
        while (a.TrySend(b.LocalAddress, new byte[10]))
        {
            accepted++;
        }

        Assert.Equal(64, accepted);
        Assert.Equal(1, a.Reliable.Counters.SendBufferFull); // the refusal is counted (docs/security.md, "Bounds")
        Assert.False(a.TrySend(b.LocalAddress, new byte[10]));
        Assert.Equal(2, a.Reliable.Counters.SendBufferFull);
        int spaceEvents = 0;
        a.SpaceAvailable += _ => spaceEvents++;
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.True(spaceEvents >= 1);
        Assert.Equal(0, a.Connection(b.LocalAddress).Pending);
        Assert.True(a.TrySend(b.LocalAddress, new byte[10]));
    }

    [Fact]
    public void A_crashed_peer_is_reported_with_the_messages_it_never_acknowledged()
    {
        var (net, _, nodeB, a, b) = Setup(5, options: FastFailure);
        var failures = new List<(NetAddress Peer, int Lost)>();
        a.PeerFailed += (peer, lost) => failures.Add((peer, lost));
        int delivered = 0;
        b.MessageReceived += (_, _) => delivered++;
        for (int i = 0; i < 10; i++)
        {
            Assert.True(a.TrySend(b.LocalAddress, new byte[8]));
        }

        net.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal(10, delivered);
        nodeB.Crash();
        for (int i = 0; i < 7; i++)
        {
            Assert.True(a.TrySend(b.LocalAddress, new byte[8]));
        }

        // 5 timeouts with backoff capped at 200 ms: reported within about a second of virtual time.
        Assert.True(net.RunUntil(() => failures.Count > 0, TimeSpan.FromSeconds(3)), "seed 5: the crash was never reported");
        Assert.Equal((b.LocalAddress, 7), Assert.Single(failures));
    }

    [Fact]
    public void A_restarted_peer_starts_a_new_conversation()
    {
        var (net, _, nodeB, a, _) = Setup(6, options: FastFailure);
        var bAddress = nodeB.Address;
        a.TrySend(new NetAddress(bAddress.Ip, 5000), new byte[4]);
        net.RunFor(TimeSpan.FromMilliseconds(50));

        nodeB.Crash();
        nodeB.Restart();
        var b2 = Endpoint(nodeB, FastFailure);
        var got = new List<int>();
        b2.MessageReceived += (_, m) => got.Add(BinaryPrimitives.ReadInt32LittleEndian(m));
        int lostReported = -1;
        a.PeerFailed += (_, lost) => lostReported = lost;
        var message = new byte[4];
        for (int i = 0; i < 20; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(message, i);
            a.TrySend(b2.LocalAddress, message);
        }

        net.RunFor(TimeSpan.FromSeconds(2));

        // Either the new b saw a's old conversation and made a start a new one (a reports the old one's losses), or it
        // joined the conversation cleanly; in both cases whatever it delivers is in order and without duplicates.
        Assert.Equal(got.Distinct().Order(), got);
        if (lostReported >= 0)
        {
            for (int i = 100; i < 110; i++)
            {
                BinaryPrimitives.WriteInt32LittleEndian(message, i);
                a.TrySend(b2.LocalAddress, message);
            }

            net.RunFor(TimeSpan.FromSeconds(2));
            Assert.Equal(Enumerable.Range(100, 10), got.Where(x => x >= 100));
        }
        else
        {
            Assert.Equal(Enumerable.Range(0, 20), got);
        }
    }

    [Fact]
    public void A_partition_shorter_than_the_failure_timeout_loses_nothing()
    {
        var (net, nodeA, nodeB, a, b) = Setup(7);
        var scenario = new ReliableTransferScenario(a, b, 3_000);
        int failures = 0;
        a.PeerFailed += (_, _) => failures++;
        scenario.Pump();
        net.RunFor(TimeSpan.FromMilliseconds(5));
        net.Partition([nodeA], [nodeB]);
        net.RunFor(TimeSpan.FromSeconds(2)); // default: 10 timeouts from 200 ms, backoff to 2 s, is far longer
        net.Heal();
        Assert.True(net.RunUntil(() => scenario.Done, TimeSpan.FromMinutes(1)), $"seed 7: {scenario.Received} of 3,000");
        Assert.Null(scenario.Violation);
        Assert.Equal(0, failures);
    }

    [Fact]
    public void Malformed_datagrams_are_dropped_and_counted_without_harm()
    {
        var (net, _, nodeB, a, b) = Setup(8);
        var junkSource = net.AddNode().Open(5000);
        var random = new Random(8);
        var scenario = new ReliableTransferScenario(a, b, 500);
        scenario.Pump();
        for (int i = 0; i < 5_000; i++)
        {
            var junk = new byte[random.Next(0, 80)];
            random.NextBytes(junk);
            if (junk.Length >= 12 && i % 2 == 0)
            {
                // Valid common header, random body: reaches the reliable-unicast decoders.
                new QuickSilver.Core.Wire.PacketHeader(i % 4 == 0 ? ReliableWire.DataType : ReliableWire.AckType,
                    0, (ushort)junk.Length).Write(junk);
            }

            junkSource.TrySend(b.LocalAddress, junk);
            junkSource.TrySend(a.LocalAddress, junk);
            net.RunFor(TimeSpan.FromMicroseconds(20)); // paced, so the junk source's own uplink queue never overflows
        }

        Assert.True(net.RunUntil(() => scenario.Done, TimeSpan.FromMinutes(1)));
        Assert.Null(scenario.Violation);
        Assert.True(b.DropsTotal > 1000, $"b counted {b.DropsTotal} drops");
        Assert.True(nodeB.IsUp);
    }

    [Fact]
    public void Bad_options_and_oversized_messages_are_refused_with_clear_errors()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { Window = 65 }.Validate());
        Assert.Contains("Window", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { AckDelay = TimeSpan.FromSeconds(1) }.Validate());
        Assert.Contains("AckDelay", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { MaxMessageBytes = 1 << 20, SendBufferSegments = 512 }.Validate());
        Assert.Contains("SendBufferSegments", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { MaxSegmentBytes = 0 }.Validate());
        Assert.Contains("MaxSegmentBytes", e.Message, StringComparison.Ordinal);
        var (_, _, _, a, b) = Setup(9);
        var big = Assert.Throws<ArgumentException>(() => a.TrySend(b.LocalAddress, new byte[a.MaxMessageBytes + 1]));
        Assert.Contains("MaxMessageBytes", big.Message, StringComparison.Ordinal);
        var net = new SimNetwork(9);
        var small = net.AddNode().Open(5000, maxDatagramSize: 1200);
        var tooLarge = Assert.Throws<ArgumentException>(() => new TestEndpoint(small, net.AddNode(), 1));
        Assert.Contains("MaxSegmentBytes", tooLarge.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(21)]
    [InlineData(22)]
    public void Messages_larger_than_a_datagram_arrive_whole_once_and_in_order_through_loss_reordering_and_duplication(int seed)
    {
        // Sizes from 4 bytes to 40 KB (up to 30 segments of 1,384 bytes), so fragments of one message are lost, reordered
        // and duplicated independently; every message must come back whole, in order, exactly once.
        var link = new LinkOptions
        {
            LossRate = 0.1,
            ReorderRate = 0.1,
            ReorderDelay = TimeSpan.FromMilliseconds(1),
            DuplicateRate = 0.05,
        };
        var (net, _, _, a, b) = Setup(seed, link);
        static int SizeOf(int i) => i % 7 == 0 ? 4 + (i * 997 % 40_000) : 4 + (i * 131 % 3_000);
        var scenario = new ReliableTransferScenario(a, b, 2_000, sizeOf: SizeOf);
        scenario.Pump();

        bool done = net.RunUntil(() => scenario.Done || scenario.Violation is not null, TimeSpan.FromMinutes(10));
        Assert.True(scenario.Violation is null, $"seed {seed}: {scenario.Violation}");
        Assert.True(done, $"seed {seed}: only {scenario.Received} of 2,000 arrived");
        Assert.True(net.Drops[DropReason.LinkLoss] > 1_000, $"seed {seed}: the network lost only {net.Drops[DropReason.LinkLoss]}");
    }

    [Fact]
    public void A_multi_segment_message_waits_for_room_for_all_its_segments()
    {
        var options = new ReliableUnicastOptions { SendBufferSegments = 64, Window = 16, MaxSegmentBytes = 1000, MaxMessageBytes = 3000 };
        var (net, _, _, a, b) = Setup(23, options: options);
        int accepted = 0;
        while (a.TrySend(b.LocalAddress, new byte[2500])) // 3 segments each
        {
            accepted++;
        }

        Assert.Equal(21, accepted);
        Assert.Equal(63, a.Connection(b.LocalAddress).Pending);
        Assert.True(a.TrySend(b.LocalAddress, new byte[999]), "one segment still fits (999 bytes and the channel id)");
        int spaceEvents = 0;
        a.SpaceAvailable += _ => spaceEvents++;
        var sizes = new List<int>();
        b.MessageReceived += (_, m) => sizes.Add(m.Length);
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(1, spaceEvents);
        Assert.Equal(Enumerable.Repeat(2500, 21).Append(999), sizes);
    }

    [Fact]
    public void A_peer_whose_message_exceeds_the_receivers_bound_has_it_dropped_and_counted_and_the_next_one_delivered()
    {
        var net = new SimNetwork(24);
        var nodeA = net.AddNode();
        var nodeB = net.AddNode();
        var a = Endpoint(nodeA, new ReliableUnicastOptions { MaxMessageBytes = 100_000 });
        var b = Endpoint(nodeB, new ReliableUnicastOptions { MaxMessageBytes = 10_000 });
        var sizes = new List<int>();
        b.MessageReceived += (_, m) => sizes.Add(m.Length);
        Assert.True(a.TrySend(b.LocalAddress, new byte[9_000]));
        Assert.True(a.TrySend(b.LocalAddress, new byte[50_000])); // 37 segments: b gives up after 10,000 bytes
        Assert.True(a.TrySend(b.LocalAddress, new byte[9_999])); // with its channel id, exactly b's bound
        Assert.True(a.TrySend(b.LocalAddress, new byte[3]));
        net.RunFor(TimeSpan.FromSeconds(2));
        Assert.Equal(new[] { 9_000, 9_999, 3 }, sizes);
        Assert.Equal(1, b.Reliable.Drops[DropReason.Oversized]);
        Assert.Equal(0, a.Connection(b.LocalAddress).Pending);
    }

    [Fact]
    public void A_crashed_peer_is_reported_with_the_number_of_messages_not_segments_it_never_acknowledged()
    {
        var (net, _, nodeB, a, b) = Setup(25, options: FastFailure);
        var failures = new List<int>();
        a.PeerFailed += (_, lost) => failures.Add(lost);
        nodeB.Crash();
        for (int i = 0; i < 3; i++)
        {
            Assert.True(a.TrySend(b.LocalAddress, new byte[5_000])); // 4 segments each
        }

        Assert.True(net.RunUntil(() => failures.Count > 0, TimeSpan.FromSeconds(3)), "seed 25: the crash was never reported");
        Assert.Equal(3, Assert.Single(failures));
    }
}
