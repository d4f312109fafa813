using QuickSilver.Core.Alarms;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// <see cref="RegionOptions.MaxHeldBytes"/> (issue 11, "Bounded memory"; docs/qsm.md, "The window and its bound"): a
/// member holds at most the byte bound of each sender's payloads, the bound stops the sender before it drops packets,
/// and a bound far below the receive window still delivers everything, exactly once and in order. Each scenario prints
/// every member's peak of held bytes as a multiple of <see cref="RegionOptions.ReceiveWindowBytes"/> (rerun:
/// <c>dotnet test tests/QuickSilver.Qsm.Tests -c Release --filter "FullyQualifiedName~HeldBytesBoundTests"
/// --logger "console;verbosity=detailed"</c>). All on the simulated network, virtual time, seeded.
/// </summary>
public sealed class HeldBytesBoundTests(ITestOutputHelper output)
{
    private const int LargePayload = 16 * 1024 - RegionWire.DataHeaderSize; // one message fills a 16 KiB datagram

    private sealed record Scenario(string Name, int Members, int Senders, int Payload, int Messages)
    {
        public RegionFlowControl Flow { get; init; } = RegionFlowControl.ReceiverWindow;
        public LinkOptions Link { get; init; } = new() { BandwidthBitsPerSecond = 1_000_000_000 };
        public long MaxHeldBytes { get; init; }
        public long MaxMemberHeldBytes { get; init; }
        public int MaxPacketBytes { get; init; }
        public int MaxSenders { get; init; } = 64;
        public bool SlowReader { get; init; }
        public bool Joiner { get; init; }
        public bool Fifo { get; init; } = true;
    }

    private sealed record Outcome(long Bound, long[] MemberPeaks, long StreamPeak, long ByteOverflows, long Evicted, TimeSpan Took);

    private Outcome Run(Scenario s, int seed)
    {
        var options = new RegionOptions
        {
            TokenInterval = TimeSpan.FromMilliseconds(50),
            FlowControl = s.Flow,
            MaxHeldBytes = s.MaxHeldBytes,
            MaxMemberHeldBytes = s.MaxMemberHeldBytes,
            MaxPacketBytes = s.MaxPacketBytes,
            MaxSenders = s.MaxSenders,
            FifoDelivery = s.Fifo,
        };
        var cluster = new RegionCluster(seed, s.Members, s.Senders, new RegionClusterOptions { Link = s.Link, Region = options, PayloadBytes = s.Payload });
        var members = cluster.LiveMembers.ToList();
        if (s.SlowReader)
        {
            // One member's application takes 4 packets every 5 ms, well below the rate the others take (back-pressure).
            var slow = members[^1];
            int budget = 0;
            slow.Member!.Consumer = (_, _, _) => budget-- > 0;
            var drain = new Alarm(self =>
            {
                budget = 4;
                slow.Member!.ResumeDelivery();
                slow.Sim.ScheduleAfter(self, TimeSpan.FromMilliseconds(5));
            });
            slow.Sim.TryPost(_ => slow.Sim.ScheduleAfter(drain, TimeSpan.FromMilliseconds(5)), null);
        }

        cluster.SendFromAll(s.Messages);
        if (s.Joiner)
        {
            Assert.True(cluster.Network.RunUntil(() => cluster.DeliveredToAll() >= (long)s.Messages * s.Senders / 3, TimeSpan.FromMinutes(2)),
                $"{s.Name}: a third was not delivered before the join");
            members.Add(cluster.Admit());
        }

        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(s.Messages), TimeSpan.FromMinutes(10));
        Assert.True(done, $"{s.Name}, seed {seed}: {cluster.CheckDelivery(s.Messages)}; {cluster.Nodes[^1].Member?.Describe()}");
        if (s.Fifo)
        {
            Assert.Null(cluster.CheckDelivery(s.Messages)); // every member got every message, exactly once, in order
        }
        else
        {
            cluster.Network.RunFor(TimeSpan.FromSeconds(1)); // a packet delivered twice would show by now
            Assert.All(cluster.LiveMembers, n => Assert.All(cluster.Senders, sender => Assert.Equal(s.Messages, n.DeliveredFrom(sender.Id))));
        }

        var live = cluster.LiveMembers.Select(n => n.Member!).ToArray();
        var streams = live.SelectMany(m => m.Streams.Values).ToArray();
        return new Outcome(live[0].HeldBytesBound, [.. live.Select(m => m.PeakHeldBytes)], streams.Max(st => st.PeakHeldBytes),
            live.Sum(m => m.ByteOverflows), live.Sum(m => m.Evicted), cluster.Network.Now);
    }

    private void Report(Scenario s, int seed, Outcome o)
    {
        double window = new RegionOptions().ReceiveWindowBytes;
        output.WriteLine($"{s.Name} ({s.Flow}, seed {seed}): {s.Members} members, {s.Senders} sender(s), {s.Messages:N0} × {s.Payload:N0} B each, " +
                         $"delivered in {o.Took.TotalSeconds:F3} s virtual");
        output.WriteLine($"  peak held per member {o.MemberPeaks.Min():N0}..{o.MemberPeaks.Max():N0} B = {o.MemberPeaks.Min() / window:F2}..{o.MemberPeaks.Max() / window:F2} × ReceiveWindowBytes; " +
                         $"largest stream peak {o.StreamPeak:N0} B = {o.StreamPeak / window:F2} ×; bound {o.Bound:N0} B per sender = {o.Bound / window:F2} ×; " +
                         $"dropped at the bound {o.ByteOverflows}, evicted {o.Evicted}");
    }

    public static TheoryData<string> DefaultScenarios => ["1000 B", "16 KiB", "8 senders", "100 senders", "slow reader", "3 % bursty loss", "joiner"];

    private static Scenario Named(string name) => name switch
    {
        "1000 B" => new Scenario(name, 10, 1, 1_000, 30_000),
        "16 KiB" => new Scenario(name, 10, 1, LargePayload, 3_000),
        "8 senders" => new Scenario(name, 10, 8, 1_000, 4_000),
        "100 senders" => new Scenario(name, 5, 100, 1_000, 300), // more than the token's 64 sections: retirement takes turns
        "slow reader" => new Scenario(name, 10, 1, LargePayload, 1_500) { SlowReader = true },
        "3 % bursty loss" => new Scenario(name, 10, 1, LargePayload, 2_000)
        {
            Link = new LinkOptions { BandwidthBitsPerSecond = 1_000_000_000, LossRate = 0.03, Burst = new BurstLoss(0.002, 0.3) },
        },
        "joiner" => new Scenario(name, 10, 1, LargePayload, 3_000) { Joiner = true },
        _ => throw new ArgumentOutOfRangeException(nameof(name), name, "no such scenario"),
    };

    /// <summary>With the default bound (four receive windows per sender) and receivers' windows, each scenario delivers
    /// everything exactly once and in order, no stream ever holds more than the bound, and the bound stopped the sender:
    /// nothing was dropped or given up at it. Each scenario runs first with a bound too large to act (what members held
    /// before the bound existed), for the figures.</summary>
    [Theory]
    [MemberData(nameof(DefaultScenarios))]
    public void Under_the_default_bound_every_member_holds_at_most_the_bound_and_nothing_is_dropped_at_it(string name)
    {
        const int Seed = 1701;
        var s = Named(name);
        var unbounded = s with { Name = $"{name}, bound 2^40 (in effect none: as before the bound)", MaxHeldBytes = 1L << 40 };
        Report(unbounded, Seed, Run(unbounded, Seed));
        var o = Run(s, Seed);
        Report(s, Seed, o);
        Assert.Equal(4L * new RegionOptions().ReceiveWindowBytes, o.Bound);
        Assert.True(o.StreamPeak <= o.Bound, $"{name}: a stream held {o.StreamPeak} B, over the bound {o.Bound}");
        Assert.True(o.MemberPeaks.Max() <= o.Bound * s.Senders, $"{name}: a member held {o.MemberPeaks.Max()} B");
        Assert.Equal(0, o.ByteOverflows);
        Assert.Equal(0, o.Evicted);
    }

    /// <summary>A member whose application reads slowly holds every sender's packets up to the bound per sender: eight
    /// senders, eight bounds. With <see cref="RegionOptions.MaxMemberHeldBytes"/> at two bounds per sender the member
    /// shares it among the streams, and holds about that much over all of them; everyone still gets every message,
    /// exactly once and in order.</summary>
    [Theory]
    [InlineData(1731)]
    [InlineData(1732)]
    public void A_slow_reader_of_eight_senders_holds_the_bound_per_member_not_eight_bounds(int seed)
    {
        const long PerSender = 1 << 20, PerMember = 2 << 20;
        var s = new Scenario("slow reader, 8 senders", 6, 8, LargePayload, 200) { SlowReader = true, MaxHeldBytes = PerSender };
        var unshared = s with { Name = $"{s.Name}, bound per member 2^42 (in effect none)", MaxMemberHeldBytes = 1L << 42 };
        var shared = s with { Name = $"{s.Name}, bound per member 2 MiB", MaxMemberHeldBytes = PerMember };
        var before = Run(unshared, seed);
        Report(unshared, seed, before);
        var after = Run(shared, seed);
        Report(shared, seed, after);
        Assert.True(before.MemberPeaks.Max() > 2 * PerMember, $"without the bound per member the slow reader held only {before.MemberPeaks.Max()} B: the test tests nothing");
        Assert.True(after.MemberPeaks.Max() <= PerMember + (PerMember / 4), $"a member held {after.MemberPeaks.Max()} B, over the bound per member {PerMember} B");
    }

    /// <summary>With the paper's rate control the sender counts packets; a byte bound set well below its window of
    /// packets acts through the stability the members vouch for, and drops what overruns it all the same: still
    /// everything is delivered, exactly once and in order, and no stream held more than the bound.</summary>
    [Theory]
    [InlineData(1711, false)]
    [InlineData(1712, true)]
    public void Paper_rate_with_a_byte_bound_below_its_packet_window_holds_the_bound_and_delivers_everything(int seed, bool loss)
    {
        var s = new Scenario("paper rate, 1 MiB bound", 10, 1, LargePayload, 1_500)
        {
            Flow = RegionFlowControl.PaperRate,
            MaxHeldBytes = 1 << 20,
            Link = new LinkOptions { BandwidthBitsPerSecond = 1_000_000_000, LossRate = loss ? 0.02 : 0, Burst = loss ? new BurstLoss(0.002, 0.3) : null },
        };
        var o = Run(s, seed);
        Report(s, seed, o);
        Assert.Equal(1L << 20, o.Bound);
        Assert.True(o.StreamPeak <= o.Bound, $"a stream held {o.StreamPeak} B, over the bound {o.Bound}");
    }

    /// <summary>A bound of four 16 KiB packets, far below the default receive window. With receivers' windows a member
    /// offers each sender half the bound, so the bound stops the sender and nothing is dropped at it. With the paper's
    /// rate control the sender's window of packets overruns it: packets beyond the bound are dropped and counted and come
    /// back through the NAKs, a member gives up held packets to take the one it needs next (without FIFO, where a packet
    /// delivered early cannot be given up, every other packet leaves room for it). Either way every member gets every
    /// message, exactly once (and with FIFO in order), holding at most the bound. With and without loss.</summary>
    [Theory]
    [InlineData(RegionFlowControl.ReceiverWindow, 0.0, true, 1721)]
    [InlineData(RegionFlowControl.ReceiverWindow, 0.03, true, 1722)]
    [InlineData(RegionFlowControl.PaperRate, 0.0, true, 1723)]
    [InlineData(RegionFlowControl.PaperRate, 0.03, true, 1724)]
    [InlineData(RegionFlowControl.ReceiverWindow, 0.03, false, 1725)]
    [InlineData(RegionFlowControl.PaperRate, 0.03, false, 1726)]
    public void A_bound_of_four_packets_still_delivers_everything(RegionFlowControl flow, double loss, bool fifo, int seed)
    {
        var s = new Scenario(fifo ? "four-packet bound" : "four-packet bound, no FIFO", 6, 1, LargePayload, 400)
        {
            Flow = flow,
            Fifo = fifo,
            MaxPacketBytes = 16 * 1024,
            MaxHeldBytes = 4 * 16 * 1024,
            Link = new LinkOptions { BandwidthBitsPerSecond = 1_000_000_000, LossRate = loss, Burst = loss > 0 ? new BurstLoss(0.002, 0.3) : null },
        };
        var o = Run(s, seed);
        Report(s, seed, o);
        Assert.True(o.StreamPeak <= o.Bound, $"a stream held {o.StreamPeak} B, over the bound {o.Bound}");
        Assert.True(o.MemberPeaks.Max() <= o.Bound, $"a member held {o.MemberPeaks.Max()} B, over the bound {o.Bound}");
        if (flow == RegionFlowControl.ReceiverWindow)
        {
            Assert.Equal(0, o.ByteOverflows);
            Assert.Equal(0, o.Evicted);
        }
        else
        {
            Assert.True(o.ByteOverflows > 0, "the sender's window of packets did not overrun the bound: the test tests nothing");
        }
    }

    /// <summary>The mechanism on one stream: the bound caps the position it reports; a packet over the bound is dropped,
    /// except the one needed next, which takes the room of undelivered packets above it (highest first); the purge
    /// moves the cap on.</summary>
    [Fact]
    public void A_stream_caps_its_position_drops_over_the_bound_and_makes_room_for_the_packet_it_needs_next()
    {
        var delivered = new List<ulong>();
        var stream = new SenderStream(1, (_, seq, _) => { delivered.Add(seq); return true; }, maxHeldBytes: 400, reserveBytes: 100, largestPayload: 100);
        stream.Anchor(0);
        var packet = new byte[100];
        for (ulong seq = 2; seq <= 5; seq++)
        {
            Assert.True(stream.Add(seq, packet));
        }

        Assert.Equal(400, stream.HeldBytes);
        Assert.False(stream.Add(6, packet));          // over the bound, not needed next: dropped
        Assert.Equal(1, stream.ByteOverflows);
        Assert.Equal(0UL, stream.FlowPosition);       // nothing delivered yet

        Assert.True(stream.Add(1, packet));           // needed next: 5 makes room for it
        Assert.Equal(1, stream.Evicted);
        Assert.Equal([1UL, 2, 3, 4], delivered);
        Assert.Equal(400, stream.PeakHeldBytes);
        Assert.Equal(3UL, stream.FlowPosition);       // 1..3 fill the bound less the reserve: the sender may send 100 B more

        stream.Purge(3);                              // every member took them
        Assert.Equal(4UL, stream.FlowPosition);
        Assert.True(stream.Add(5, packet));           // asked for again, like a lost one
        Assert.Equal([1UL, 2, 3, 4, 5], delivered);
        Assert.Equal(5UL, stream.FlowPosition);       // 4 and 5 held: 200 B, within the bound less the reserve
        Assert.True(stream.PeakHeldBytes <= 400);
    }

    /// <summary>A stream's share of the bound per member (<see cref="SenderStream.ShareByteBound"/>): it never drops below
    /// the packets the stream vouched for plus room for one more, comes down to the share as the purge releases them,
    /// and a packet over it is then dropped and counted.</summary>
    [Fact]
    public void A_shared_bound_comes_down_to_the_share_as_the_purge_releases_what_the_stream_vouched_for()
    {
        var stream = new SenderStream(1, (_, _, _) => true, maxHeldBytes: 1_000, reserveBytes: 100, largestPayload: 100);
        stream.Anchor(0);
        var packet = new byte[100];
        for (ulong seq = 1; seq <= 8; seq++)
        {
            Assert.True(stream.Add(seq, packet));
        }

        Assert.Equal(8UL, stream.FlowPosition);   // 800 B vouched for, within the bound less the reserve
        stream.ShareByteBound(300, 100);
        Assert.Equal(900, stream.MaxHeldBytes);   // not below the 800 B vouched for, plus one packet
        stream.Purge(6);
        stream.ShareByteBound(300, 100);
        Assert.Equal(300, stream.MaxHeldBytes);   // 7 and 8 left: the share
        Assert.Equal(8UL, stream.FlowPosition);
        Assert.True(stream.Add(9, packet));       // 300 B held
        Assert.False(stream.Add(11, packet));     // over the share, not needed next: dropped
        Assert.Equal(1, stream.ByteOverflows);
        stream.ShareByteBound(1_000, 100);        // the share grows again (fewer streams hold packets)
        Assert.Equal(1_000, stream.MaxHeldBytes);
        Assert.True(stream.Add(11, packet));
    }

    /// <summary>The stream's invariants over random arrivals (out of order, duplicated, of random sizes), refusals, purges
    /// at the reported position and vouching, FIFO and not: it never holds more than the bound, never delivers a packet
    /// twice (with FIFO: in order), never gives up a packet it vouched for, and once the senders' resends keep coming it
    /// delivers everything.</summary>
    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void A_bounded_stream_stays_within_its_bound_keeps_what_it_vouched_for_and_delivers_everything(bool fifo)
    {
        const int Packets = 400, Largest = 200;
        long overflows = 0, evicted = 0;
        for (int seed = 0; seed < 40; seed++)
        {
            var random = new Random(seed);
            long bound = random.Next(2 * Largest, 12 * Largest);
            long reserve = random.Next(0, (int)bound);
            int[] sizes = [.. Enumerable.Range(0, Packets + 1).Select(_ => random.Next(1, Largest + 1))];
            var delivered = new HashSet<ulong>();
            ulong lastInOrder = 0;
            bool refuse = false;
            var stream = new SenderStream(1, (_, seq, _) =>
            {
                if (refuse)
                {
                    return false;
                }

                Assert.True(delivered.Add(seq), $"seed {seed}: {seq} delivered twice");
                if (fifo)
                {
                    Assert.Equal(lastInOrder + 1, seq);
                    lastInOrder = seq;
                }

                return true;
            }, fifo, maxHeld: 256, pool: new PacketPool(64), maxHeldBytes: bound, reserveBytes: reserve, largestPayload: Largest);
            stream.Anchor(0);
            ulong vouched = 0;
            for (int step = 0; step < 3_000; step++)
            {
                switch (random.Next(10))
                {
                    case < 5:
                        ulong seq = stream.Delivered + 1 + (ulong)random.Next(0, 24);
                        if (seq <= Packets)
                        {
                            stream.Add(seq, new byte[sizes[seq]]);
                        }

                        break;
                    case 5:
                        ulong position = stream.FlowPosition; // the slowest member's, at most this one's
                        stream.Purge(position - Math.Min(position, (ulong)random.Next(0, 3)));
                        break;
                    case 6:
                        vouched = Math.Max(vouched, stream.CachedUpTo(1, 0, (ulong)Packets));
                        break;
                    case 7:
                        refuse = random.Next(4) == 0;
                        if (!refuse)
                        {
                            stream.ResumeDelivery();
                        }

                        break;
                    default:
                        Assert.True(stream.FlowPosition <= stream.Delivered);
                        break;
                }

                Assert.True(stream.HeldBytes <= bound, $"seed {seed}, step {step}: held {stream.HeldBytes} over {bound}");
                for (ulong v = stream.Delivered + 1; v <= vouched; v++)
                {
                    Assert.True(stream.Received(v), $"seed {seed}, step {step}: {v} was vouched for and is gone");
                }
            }

            // The senders keep resending what is missing and the region keeps purging what every member has taken.
            refuse = false;
            stream.ResumeDelivery();
            for (int round = 0; round < 10 * Packets && stream.Delivered < Packets; round++)
            {
                stream.Purge(stream.FlowPosition);
                for (ulong seq = stream.Delivered + 1; seq <= Math.Min((ulong)Packets, stream.Delivered + 24); seq++)
                {
                    stream.Add(seq, new byte[sizes[seq]]);
                }

                Assert.True(stream.HeldBytes <= bound);
            }

            Assert.True(stream.Delivered == Packets, $"seed {seed} (bound {bound}, reserve {reserve}): stalled at {stream.Delivered}");
            Assert.Equal(Packets, delivered.Count);
            overflows += stream.ByteOverflows;
            evicted += stream.Evicted;
        }

        output.WriteLine($"fifo {fifo}: 40 seeds, dropped at the bound {overflows}, given up {evicted}");
        Assert.True(overflows > 0, "nothing reached the bound: the test tests nothing");
        if (fifo)
        {
            Assert.True(evicted > 0, "no packet was ever given up: the test tests nothing");
        }
    }

    [Fact]
    public void The_bound_is_checked_against_the_largest_packet_and_names_the_option()
    {
        new RegionOptions { MaxHeldBytes = 0 }.Validate();
        new RegionOptions { MaxHeldBytes = 2 * 65_507 }.Validate();
        new RegionOptions { MaxPacketBytes = 1_472, MaxHeldBytes = 2 * 1_472 }.Validate();

        var tooSmall = Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxHeldBytes = 100_000 }.Validate());
        Assert.Contains("RegionOptions.MaxHeldBytes", tooSmall.Message);
        Assert.Contains("twice the largest packet", tooSmall.Message);
        Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxPacketBytes = 1_472, MaxHeldBytes = 2_000 }.Validate());
        Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxHeldBytes = -1 }.Validate());
        Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxHeldBytes = (1L << 40) + 1 }.Validate());

        // The default follows the flow control: four receive windows, or the packet window's largest packets.
        Assert.Equal(4L * (2 << 20), new RegionOptions().HeldBytesBound(LargePayload));
        Assert.Equal(16_384L * LargePayload, new RegionOptions { FlowControl = RegionFlowControl.PaperRate }.HeldBytesBound(LargePayload));
        Assert.Equal(12_345_678L, new RegionOptions { MaxHeldBytes = 12_345_678 }.HeldBytesBound(LargePayload));

        // The bound per member: 0 (four bounds per sender) or between twice the largest packet and 2^42.
        new RegionOptions { MaxMemberHeldBytes = 2 * 65_507 }.Validate();
        var member = Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxMemberHeldBytes = 100_000 }.Validate());
        Assert.Contains("RegionOptions.MaxMemberHeldBytes", member.Message);
        Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxMemberHeldBytes = -1 }.Validate());
        Assert.Throws<ArgumentOutOfRangeException>(() => new RegionOptions { MaxMemberHeldBytes = (1L << 42) + 1 }.Validate());
        Assert.Equal(4 * 4L * (2 << 20), new RegionOptions().MemberHeldBytesBound(LargePayload));
        Assert.Equal(5_000_000L, new RegionOptions { MaxMemberHeldBytes = 5_000_000 }.MemberHeldBytesBound(LargePayload));
    }
}
