using System.Buffers.Binary;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Transport.Tests.Simulation;

public sealed class SimNetworkTests
{
    private sealed class Recorder : IDatagramHandler
    {
        private readonly SimNetwork _network;
        public Recorder(SimNetwork network) => _network = network;
        public List<(TimeSpan At, NetAddress From, int Seq)> Got { get; } = new();

        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
            => Got.Add((_network.Now, from, datagram.Length >= 4 ? BinaryPrimitives.ReadInt32LittleEndian(datagram) : -1));
    }

    private static byte[] Numbered(int seq, int size = 100)
    {
        var bytes = new byte[size];
        BinaryPrimitives.WriteInt32LittleEndian(bytes, seq);
        return bytes;
    }

    private static (SimNetwork Net, IDatagramTransport A, IDatagramTransport B, Recorder AtB) Pair(int seed, LinkOptions? link = null)
    {
        var net = new SimNetwork(seed, link);
        var a = net.AddNode().Open(5000);
        var b = net.AddNode().Open(5000);
        var recorder = new Recorder(net);
        b.SetHandler(recorder);
        return (net, a, b, recorder);
    }

    private static (ulong Trace, long Deliveries, long Drops) LossyRun(int seed)
    {
        var link = new LinkOptions { LossRate = 0.05, ReorderRate = 0.05, DuplicateRate = 0.02 };
        var net = new SimNetwork(seed, link);
        var sender = net.AddNode().Open(1);
        var receivers = Enumerable.Range(0, 5).Select(_ => net.AddNode().Open(1)).ToList();
        var group = new NetAddress(0xEF010101, 1);
        foreach (var r in receivers)
        {
            r.SetHandler(new Recorder(net));
            r.JoinGroup(group);
        }

        for (int i = 0; i < 2000; i++)
        {
            sender.TrySend(group, Numbered(i));
            net.RunFor(TimeSpan.FromMicroseconds(50));
        }

        net.RunFor(TimeSpan.FromSeconds(1));
        return (net.TraceHash, net.Deliveries, net.Drops.Total);
    }

    [Fact]
    public void The_same_seed_replays_the_same_trace_and_another_seed_does_not()
    {
        var first = LossyRun(42);
        Assert.Equal(first, LossyRun(42));
        Assert.NotEqual(first.Trace, LossyRun(43).Trace);
        Assert.True(first.Drops > 0, "seed 42: the lossy run lost nothing");
    }

    [Fact]
    public void Arrival_time_is_latency_plus_serialization_on_both_links()
    {
        // 8 Mbit/s = one byte per microsecond; 1 ms latency per link. A 1000-byte datagram: 1000 µs up, 1 ms,
        // 1000 µs down, 1 ms -> arrives at 4 ms. A second one sent at once queues 1000 µs behind it on each link.
        var (net, a, b, atB) = Pair(1, new LinkOptions { Latency = TimeSpan.FromMilliseconds(1), BandwidthBitsPerSecond = 8_000_000 });
        a.TrySend(b.LocalAddress, Numbered(0, 1000));
        a.TrySend(b.LocalAddress, Numbered(1, 1000));
        net.RunFor(TimeSpan.FromMilliseconds(10));

        Assert.Equal(2, atB.Got.Count);
        Assert.Equal(TimeSpan.FromMilliseconds(4), atB.Got[0].At);
        Assert.Equal(TimeSpan.FromMilliseconds(5), atB.Got[1].At);
        Assert.Equal(a.LocalAddress, atB.Got[0].From);
    }

    [Fact]
    public void A_full_link_queue_drops_and_counts()
    {
        var (net, a, b, atB) = Pair(1, new LinkOptions { BandwidthBitsPerSecond = 8_000_000, QueueLimitPackets = 5 });
        for (int i = 0; i < 20; i++)
        {
            a.TrySend(b.LocalAddress, Numbered(i, 1000));
        }

        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(5, atB.Got.Count);
        Assert.Equal(15, net.Drops[DropReason.LinkQueueFull]);
        Assert.Equal(Enumerable.Range(0, 5), atB.Got.Select(g => g.Seq));
    }

    [Theory]
    [InlineData(7)]
    [InlineData(8)]
    public void Random_loss_is_close_to_its_rate(int seed)
    {
        var net = new SimNetwork(seed);
        var a = net.AddNode().Open(1);
        var bNode = net.AddNode();
        var b = bNode.Open(1);
        net.SetLink(bNode, new LinkOptions { LossRate = 0.1 });
        var atB = new Recorder(net);
        b.SetHandler(atB);
        for (int i = 0; i < 10_000; i++)
        {
            a.TrySend(b.LocalAddress, Numbered(i));
            net.RunFor(TimeSpan.FromMicroseconds(10));
        }

        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.True(atB.Got.Count is > 8_700 and < 9_300, $"seed {seed}: {atB.Got.Count} of 10,000 arrived at 10 % loss");
        Assert.Equal(10_000 - atB.Got.Count, net.Drops[DropReason.LinkLoss]);
    }

    [Fact]
    public void Burst_loss_loses_in_runs()
    {
        static double MeanRun(LinkOptions link, int seed)
        {
            var net = new SimNetwork(seed);
            var a = net.AddNode().Open(1);
            var bNode = net.AddNode();
            var b = bNode.Open(1);
            net.SetLink(bNode, link);
            var atB = new Recorder(net);
            b.SetHandler(atB);
            for (int i = 0; i < 20_000; i++)
            {
                a.TrySend(b.LocalAddress, Numbered(i));
                net.RunFor(TimeSpan.FromMicroseconds(10));
            }

            net.RunFor(TimeSpan.FromSeconds(1));
            var got = atB.Got.Select(g => g.Seq).ToHashSet();
            int runs = 0, lost = 0;
            for (int i = 0; i < 20_000; i++)
            {
                if (!got.Contains(i))
                {
                    lost++;
                    if (i == 0 || got.Contains(i - 1))
                    {
                        runs++;
                    }
                }
            }

            return (double)lost / Math.Max(1, runs);
        }

        double bursty = MeanRun(new LinkOptions { Burst = new BurstLoss(0.01, 0.25) }, 3);
        double independent = MeanRun(new LinkOptions { LossRate = 0.04 }, 3);
        Assert.True(bursty > 3, $"seed 3: mean loss run {bursty:F2} with bursts");
        Assert.True(independent < 1.2, $"seed 3: mean loss run {independent:F2} without bursts");
    }

    [Fact]
    public void Duplication_and_reordering_are_observable()
    {
        var (net, a, b, atB) = Pair(11, new LinkOptions { DuplicateRate = 0.1, ReorderRate = 0.1, ReorderDelay = TimeSpan.FromMilliseconds(2) });
        for (int i = 0; i < 1000; i++)
        {
            a.TrySend(b.LocalAddress, Numbered(i));
            net.RunFor(TimeSpan.FromMicroseconds(100));
        }

        net.RunFor(TimeSpan.FromSeconds(1));
        var seqs = atB.Got.Select(g => g.Seq).ToList();
        Assert.True(seqs.Count > seqs.Distinct().Count(), "seed 11: no duplicate arrived");
        Assert.Contains(seqs.Zip(seqs.Skip(1)), p => p.Second < p.First);
        Assert.Equal(Enumerable.Range(0, 1000), seqs.Distinct().Order());
    }

    [Fact]
    public void A_partition_blocks_both_ways_until_healed()
    {
        var net = new SimNetwork(1);
        var nodeA = net.AddNode();
        var nodeB = net.AddNode();
        var a = nodeA.Open(1);
        var b = nodeB.Open(1);
        var atA = new Recorder(net);
        var atB = new Recorder(net);
        a.SetHandler(atA);
        b.SetHandler(atB);
        net.Partition([nodeA], [nodeB]);
        a.TrySend(b.LocalAddress, Numbered(1));
        b.TrySend(a.LocalAddress, Numbered(2));
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Empty(atA.Got);
        Assert.Empty(atB.Got);
        Assert.Equal(2, net.Drops[DropReason.Partitioned]);

        net.Heal();
        a.TrySend(b.LocalAddress, Numbered(3));
        b.TrySend(a.LocalAddress, Numbered(4));
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(3, Assert.Single(atB.Got).Seq);
        Assert.Equal(4, Assert.Single(atA.Got).Seq);
    }

    [Fact]
    public void A_crash_stops_alarms_and_deliveries_and_a_restart_starts_afresh()
    {
        var net = new SimNetwork(1, new LinkOptions { Latency = TimeSpan.FromMilliseconds(5) });
        var a = net.AddNode().Open(1);
        var nodeB = net.AddNode();
        var b = nodeB.Open(1);
        var atB = new Recorder(net);
        b.SetHandler(atB);
        int fired = 0;
        nodeB.ScheduleAfter(new Alarm(_ => fired++), TimeSpan.FromMilliseconds(20));
        a.TrySend(b.LocalAddress, Numbered(1)); // in flight when b crashes
        net.RunFor(TimeSpan.FromMilliseconds(1));
        nodeB.Crash();
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(0, fired);
        Assert.Empty(atB.Got);
        Assert.Equal(1, net.Drops[DropReason.NodeDown] + net.Drops[DropReason.NoHandler]);
        Assert.False(nodeB.TryPost(_ => fired++, null));

        nodeB.Restart();
        var b2 = nodeB.Open(1);
        var atB2 = new Recorder(net);
        b2.SetHandler(atB2);
        a.TrySend(b2.LocalAddress, Numbered(2));
        nodeB.ScheduleAfter(new Alarm(_ => fired++), TimeSpan.FromMilliseconds(1));
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(1, fired);
        Assert.Equal(2, Assert.Single(atB2.Got).Seq);
    }

    [Fact]
    public void Processing_cost_limits_a_nodes_receive_rate_and_overflow_drops()
    {
        var net = new SimNetwork(1, new LinkOptions { QueueLimitPackets = 100_000 }); // only the CPU may drop here
        var a = net.AddNode().Open(1);
        var nodeB = net.AddNode();
        nodeB.ProcessingCostPerPacket = TimeSpan.FromMilliseconds(1);
        nodeB.ReceiveQueueLimit = 100;
        var b = nodeB.Open(1);
        var atB = new Recorder(net);
        b.SetHandler(atB);
        for (int i = 0; i < 2000; i++)
        {
            a.TrySend(b.LocalAddress, Numbered(i));
        }

        net.RunFor(TimeSpan.FromSeconds(1));

        // The datagrams reach b within about 2 ms; its CPU takes 1 ms each and holds at most 100 waiting.
        Assert.InRange(atB.Got.Count, 100, 104);
        Assert.Equal(2000 - atB.Got.Count, net.Drops[DropReason.ReceiveBufferFull]);
        var gaps = atB.Got.Zip(atB.Got.Skip(1), (x, y) => y.At - x.At);
        Assert.All(gaps, g => Assert.True(g >= TimeSpan.FromMilliseconds(1)));
    }

    [Fact]
    public void Multicast_reaches_every_member_but_not_the_sender_or_others()
    {
        var net = new SimNetwork(1);
        var group = new NetAddress(0xEF000001, 9);
        var sender = net.AddNode().Open(9);
        sender.JoinGroup(group);
        var atSender = new Recorder(net);
        sender.SetHandler(atSender);
        var members = Enumerable.Range(0, 10).Select(_ => net.AddNode().Open(9)).ToList();
        var recorders = members.Select(m =>
        {
            var r = new Recorder(net);
            m.SetHandler(r);
            m.JoinGroup(group);
            return r;
        }).ToList();
        var outsider = net.AddNode().Open(9);
        var atOutsider = new Recorder(net);
        outsider.SetHandler(atOutsider);
        members[9].LeaveGroup(group);

        sender.TrySend(group, Numbered(77));
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(recorders.Take(9), r => Assert.Equal(77, Assert.Single(r.Got).Seq));
        Assert.Empty(recorders[9].Got);
        Assert.Empty(atOutsider.Got);
        Assert.Empty(atSender.Got);
    }

    private sealed class CountingFeed(NetAddress to, int total) : IDatagramFeed
    {
        public int Next { get; private set; }

        public int Pull(Span<byte> buffer, out NetAddress destination)
        {
            destination = to;
            if (Next >= total)
            {
                return 0;
            }

            BinaryPrimitives.WriteInt32LittleEndian(buffer, Next++);
            return 1000;
        }
    }

    [Fact]
    public void A_feed_is_paced_by_its_link_and_loses_nothing()
    {
        var (net, a, b, atB) = Pair(1, new LinkOptions { BandwidthBitsPerSecond = 1_000_000, QueueLimitPackets = 4 });
        var feed = new CountingFeed(b.LocalAddress, 10_000);
        IFeedChannel channel = a.RegisterFeed(feed);
        net.RunUntil(() => atB.Got.Count == 10_000, TimeSpan.FromSeconds(200));

        Assert.Equal(10_000, atB.Got.Count);
        Assert.Equal(0, net.Drops.Total);
        Assert.False(channel.IsActive);

        // 10,000 x 8,000 bits at 1 Mbit/s takes 80 s of virtual time: the feed could not have gone faster.
        Assert.True(atB.Got[^1].At >= TimeSpan.FromSeconds(80));
    }
}
