using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests;

/// <summary>One sender's stream at one member: FIFO delivery holds packets behind a gap; without FIFO they are delivered
/// on arrival, and in both modes each packet exactly once and nothing before the anchor. Packets live in a bounded ring
/// of pooled buffers; a refused delivery pauses the stream until it is resumed.</summary>
public sealed class SenderStreamTests
{
    private readonly List<ulong> _delivered = new();

    private bool Deliver(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload)
    {
        _delivered.Add(seq);
        return true;
    }

    private SenderStream NewStream(bool fifo = true, int maxHeld = 16_384, DropCounters? drops = null)
        => new(1, Deliver, fifo, maxHeld, drops: drops);

    [Fact]
    public void A_member_vouches_for_its_own_partitions_packets_up_to_the_regions_horizon_not_only_its_own_last_packet()
    {
        // 5 partitions; the region has seen up to 18; this member has 1..16 and missed 17 and 18.
        var stream = NewStream();
        stream.Anchor(0);
        for (ulong seq = 1; seq <= 16; seq++)
        {
            stream.Add(seq, [1]);
        }

        Assert.Equal(16UL, stream.CachedUpTo(5, 2, horizon: 18)); // 17 is in its class and missing
        Assert.Equal(18UL, stream.CachedUpTo(5, 1, horizon: 18)); // its class: 16 held, the next is 21: it holds all of its class up to 18
        Assert.Equal(16UL, stream.CachedUpTo(5, 1));               // without a horizon: its own last packet
    }

    [Fact]
    public void With_fifo_a_packet_after_a_gap_waits_for_the_gap()
    {
        var stream = NewStream(fifo: true);
        stream.Anchor(0);
        stream.Add(1, [1]);
        stream.Add(3, [3]);
        Assert.Equal([1UL], _delivered);
        stream.Add(2, [2]);
        Assert.Equal([1UL, 2, 3], _delivered);
        Assert.Equal(3UL, stream.Delivered);
    }

    [Fact]
    public void A_large_packet_is_delivered_and_kept_byte_for_byte_whether_it_arrives_in_order_or_behind_a_gap()
    {
        // A packet delivered on arrival is delivered from the bytes as they came and kept through StreamingCopy (its copy
        // is for repairs only); one behind a gap is copied as usual and delivered from the copy when the gap closes.
        var delivered = new Dictionary<ulong, byte[]>();
        var stream = new SenderStream(1, (_, seq, payload) =>
        {
            delivered[seq] = payload.ToArray();
            return true;
        });
        stream.Anchor(0);
        var packets = Enumerable.Range(1, 4).Select(n =>
        {
            var bytes = new byte[16_000 + n];
            new Random(n).NextBytes(bytes);
            return bytes;
        }).ToArray();

        stream.Add(1, packets[0]); // in order: delivered now
        stream.Add(3, packets[2]); // behind the gap at 2: held
        stream.Add(4, packets[3]);
        Assert.Equal([1UL], delivered.Keys);
        stream.Add(2, packets[1]); // the gap closes: 2 from the fresh bytes, 3 and 4 from their copies

        for (ulong seq = 1; seq <= 4; seq++)
        {
            Assert.Equal(packets[seq - 1], delivered[seq]);
            Assert.True(stream.TryGet(seq, out var kept), $"packet {seq} is not kept for repairs");
            Assert.True(kept.SequenceEqual(packets[seq - 1]), $"packet {seq}'s kept copy differs");
        }
    }

    [Fact]
    public void Without_fifo_a_packet_after_a_gap_is_delivered_at_once_and_never_again()
    {
        var stream = NewStream(fifo: false);
        stream.Anchor(0);
        stream.Add(1, [1]);
        stream.Add(3, [3]);
        stream.Add(5, [5]);
        Assert.Equal([1UL, 3, 5], _delivered);
        Assert.Equal(1UL, stream.Delivered); // the contiguous point (stability, NAKs) still waits for the gap

        Assert.False(stream.Add(3, [3])); // a repair of what was delivered early is a duplicate
        stream.Add(2, [2]);
        stream.Add(4, [4]);
        Assert.Equal([1UL, 3, 5, 2, 4], _delivered);
        Assert.Equal(5UL, stream.Delivered);
        Assert.False(stream.Add(4, [4]));
        Assert.Equal(5, _delivered.Count);
    }

    [Fact]
    public void Without_fifo_a_mid_stream_joiner_delivers_what_it_held_beyond_its_anchor_and_nothing_before()
    {
        var stream = NewStream(fifo: false);
        stream.Add(9, [9]);   // heard before the member knows where its stream starts
        stream.Add(12, [12]);
        stream.Add(11, [11]);
        Assert.Empty(_delivered);

        stream.Anchor(9);     // owed everything after 9
        Assert.Equal([11UL, 12], _delivered);
        stream.Add(10, [10]);
        Assert.Equal([11UL, 12, 10], _delivered);
        Assert.Equal(12UL, stream.Delivered);
    }

    /// <summary>The sender's <c>settled</c> word (docs/qsm.md, "Purging on the sender's word"): an anchored stream drops
    /// its delivered copies up to there at once; a joiner that heard it before its anchor never starts below it, because
    /// those packets were numbered before any view that included it and the other members may have dropped them (it
    /// would wait for them for good).</summary>
    [Fact]
    public void The_senders_settled_word_purges_an_anchored_stream_and_floors_a_joiners_anchor()
    {
        var stream = NewStream();
        stream.Anchor(0);
        for (ulong seq = 1; seq <= 10; seq++)
        {
            stream.Add(seq, [1]);
        }

        Assert.Equal(10, stream.HeldCount);
        stream.OnSettled(6);
        Assert.Equal(4, stream.HeldCount);
        stream.OnSettled(40); // never above what it has delivered
        Assert.Equal(0, stream.HeldCount);

        var joiner = NewStream();
        joiner.Add(20, [20]);  // the first packet it hears, numbered before its first view: candidate 19
        joiner.OnSettled(25);  // a later packet: everyone in the sender's view has 1..25
        joiner.Anchor(19);     // the token's anchor, from the candidate
        Assert.Equal(25UL, joiner.AnchoredAt);
        Assert.True(joiner.Received(23)); // not owed: it does not wait for packets no one keeps
        _delivered.Clear();
        joiner.Add(26, [26]);
        Assert.Equal([26UL], _delivered);
    }

    [Fact]
    public void A_packet_beyond_the_window_is_dropped_and_counted_and_fits_once_the_purge_moves_it()
    {
        var drops = new DropCounters();
        var stream = NewStream(maxHeld: 16, drops: drops);
        stream.Anchor(0);
        for (ulong seq = 1; seq <= 16; seq++)
        {
            Assert.True(stream.Add(seq, [(byte)seq]));
        }

        Assert.False(stream.Add(17, [17])); // the window is 1..16 until the region purges
        Assert.Equal(1, stream.Overflows);
        Assert.Equal(1, drops[DropReason.ReceiveBufferFull]);
        Assert.Equal(16UL, stream.MaxSeen);      // not seen: a sender with the region's options never sends beyond the
                                                 // window, so only a forged sequence lands there, and it must not raise
                                                 // the cutoff or the ACK (RegionHostileDataTests)
        Assert.False(stream.Received(17));       // so its retransmission is taken, not a duplicate
        Assert.Equal(16, stream.HeldCount);
        Assert.Equal(16, stream.Capacity);       // the ring never grows past the window

        stream.Purge(4);
        Assert.True(stream.Add(17, [17]));
        Assert.True(stream.Add(20, [20]));
        Assert.False(stream.Add(21, [21]));      // 5..20 is the window now
        Assert.Equal(Enumerable.Range(1, 17).Select(i => (ulong)i), _delivered);
        Assert.Equal(2, stream.Overflows);
        Assert.True(stream.TryGet(20, out var payload) && payload.SequenceEqual(new byte[] { 20 }));
        Assert.False(stream.TryGet(4, out _));   // purged

        var naks = new NakSet(8);
        stream.CachedMissing(40, 1, 0, naks);    // the region has seen 40; this member asks only for what it can store
        Assert.Equal("{18-19}", naks.ToString());

        var reserved = new SenderStream(2, Deliver, maxHeld: 16, reserve: 6);
        reserved.Anchor(0);
        for (ulong seq = 1; seq <= 16; seq++)
        {
            reserved.Add(seq, [1]);
        }

        Assert.Equal(10UL, reserved.CachedUpTo(1, 0)); // stable only up to 16 − 6: a sender acknowledged there still fits
        reserved.Purge(5);
        Assert.Equal(15UL, reserved.CachedUpTo(1, 0, horizon: 30));
    }

    [Fact]
    public void A_refused_packet_stays_held_and_undelivered_until_resumed_then_everything_follows_in_order_once()
    {
        bool open = true;
        var delivered = new List<ulong>();
        var stream = new SenderStream(1, (_, seq, _) =>
        {
            if (!open)
            {
                return false;
            }

            delivered.Add(seq);
            return true;
        });
        stream.Anchor(0);
        stream.Add(1, [1]);
        open = false;
        stream.Add(2, [2]);
        stream.Add(4, [4]);
        stream.Add(3, [3]);
        Assert.Equal([1UL], delivered);
        Assert.True(stream.Paused);
        Assert.Equal(1UL, stream.Delivered);                  // what the token reports as received (the purge point waits)
        Assert.Equal(4UL, stream.CachedUpTo(1, 0));           // but the packets are cached: peers may pull them
        stream.Purge(4);
        Assert.Equal(3, stream.HeldCount);                    // only 1 went: undelivered packets are never purged

        open = true;
        stream.Add(5, [5]);                                    // a paused stream waits for the resume, even if the consumer would take it
        Assert.Equal([1UL], delivered);
        stream.ResumeDelivery();
        Assert.Equal([1UL, 2, 3, 4, 5], delivered);
        Assert.False(stream.Paused);
        Assert.Equal(5UL, stream.Delivered);
        stream.ResumeDelivery();
        Assert.Equal(5, delivered.Count);
    }

    [Fact]
    public void Steady_receiving_and_purging_allocates_nothing_per_packet()
    {
        // The ring and the pool are warmed by the first window; after that every packet reuses a purged packet's buffer.
        var stream = new SenderStream(1, static (_, _, _) => true, fifo: true, maxHeld: 1024);
        stream.Anchor(0);
        var payload = new byte[1400];
        ulong seq = 0;
        void Run(int packets)
        {
            for (int i = 0; i < packets; i++)
            {
                stream.Add(++seq, payload);
                if (seq % 256 == 0 && seq > 512)
                {
                    stream.Purge(seq - 512); // the purge lags delivery, as the region's does
                }
            }
        }

        Run(4096);
        long allocated = Property.FewestAllocated(() => Run(100_000));
        Assert.Equal(seq, stream.Delivered);
        Assert.True(allocated < 1024, $"{allocated} bytes allocated for 100,000 packets (the fewest of three windows)");
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void The_ring_behaves_as_a_simple_model_over_random_adds_purges_anchors_and_pauses(bool fifo)
    {
        for (int seed = 1; seed <= 60; seed++)
        {
            RunAgainstModel(seed, fifo);
        }
    }

    private static void RunAgainstModel(int seed, bool fifo)
    {
        var random = new Random(seed);
        int maxHeld = random.Next(16, 80);
        int reserve = random.Next(0, maxHeld / 2);
        int partitions = random.Next(1, 5);
        int mine = random.Next(partitions);
        // The consumer: open, closed, or refusing the packets divisible by 5 (a packet for a full group).
        int gate = 0;
        bool Accepts(ulong seq) => gate == 0 || (gate == 2 && seq % 5 != 0);
        var real = new List<ulong>();
        var drops = new DropCounters();
        var stream = new SenderStream(7, (_, seq, payload) =>
        {
            Assert.True(payload.SequenceEqual(Payload(seq)), $"seed {seed}: payload of {seq}");
            if (!Accepts(seq))
            {
                return false;
            }

            real.Add(seq);
            return true;
        }, fifo, maxHeld, reserve, new PacketPool(8), drops);
        var model = new StreamModel(fifo, (ulong)maxHeld, (ulong)reserve, Accepts);
        bool anchorLate = random.Next(3) == 0;
        if (!anchorLate)
        {
            ulong start = (ulong)random.Next(0, 3);
            stream.Anchor(start);
            model.Anchor(start);
        }

        for (int op = 0; op < 400; op++)
        {
            ulong baseSeq = Math.Max(model.Delivered, model.Low);
            int roll = random.Next(100);
            string what;
            if (roll < 60)
            {
                ulong seq = (ulong)Math.Max(0, (long)baseSeq + random.Next(-6, (int)(maxHeld * 1.4)));
                what = $"add {seq}";
                Assert.Equal(model.Add(seq, Payload(seq)), stream.Add(seq, Payload(seq)));
            }
            else if (roll < 72)
            {
                ulong upTo = (ulong)Math.Max(0, (long)model.Delivered + random.Next(-10, 10));
                what = $"purge {upTo}";
                stream.Purge(upTo);
                model.Purge(upTo);
            }
            else if (roll < 80 && !model.Anchored)
            {
                ulong start = model.Held.Count == 0 ? (ulong)random.Next(0, 5) : (ulong)Math.Max(0, (long)model.Held.Keys.First() + random.Next(-maxHeld, 4));
                what = $"anchor {start}";
                stream.Anchor(start);
                model.Anchor(start);
            }
            else if (roll < 88)
            {
                gate = random.Next(3);
                what = $"gate {gate}";
            }
            else
            {
                what = "resume";
                stream.ResumeDelivery();
                model.Resume();
            }

            string at = $"seed {seed}, fifo {fifo}, maxHeld {maxHeld}, reserve {reserve}, op {op} ({what})";
            Assert.True(model.Log.SequenceEqual(real), $"{at}: delivered [{string.Join(",", real)}], model [{string.Join(",", model.Log)}]");
            Assert.Equal(model.Delivered, stream.Delivered);
            Assert.Equal(model.MaxSeen, stream.MaxSeen);
            Assert.Equal(model.Held.Count, stream.HeldCount);
            Assert.Equal(model.Overflows, stream.Overflows);
            Assert.Equal(model.Overflows, drops[DropReason.ReceiveBufferFull]);
            Assert.True(stream.Capacity <= 2 * maxHeld, at);
            ulong from = model.Delivered > 3 * (ulong)maxHeld ? model.Delivered - (3 * (ulong)maxHeld) : 0;
            for (ulong seq = from; seq <= model.MaxSeen + 3; seq++)
            {
                Assert.True(model.Received(seq) == stream.Received(seq), $"{at}: Received({seq})");
                bool held = stream.TryGet(seq, out var payload);
                Assert.True(model.Held.ContainsKey(seq) == held, $"{at}: TryGet({seq})");
                Assert.True(!held || payload.SequenceEqual(Payload(seq)), $"{at}: payload of {seq}");
            }

            if (model.Anchored)
            {
                ulong horizon = model.Delivered + (ulong)random.Next(0, 3 * maxHeld);
                Assert.True(model.CachedUpTo(partitions, mine, horizon) == stream.CachedUpTo(partitions, mine, horizon), $"{at}: CachedUpTo");
                var expected = new NakSet(4);
                var actual = new NakSet(4);
                model.CachedMissing(horizon, partitions, mine, expected);
                stream.CachedMissing(horizon, partitions, mine, actual);
                Assert.True(expected.ToString() == actual.ToString(), $"{at}: CachedMissing {actual}, model {expected}");
                var expectedOthers = Enumerable.Range(0, partitions).Select(_ => new NakSet(4)).ToArray();
                var actualOthers = Enumerable.Range(0, partitions).Select(_ => new NakSet(4)).ToArray();
                model.OtherMissing(horizon, partitions, mine, expectedOthers);
                stream.OtherMissing(horizon, partitions, mine, actualOthers);
                for (int j = 0; j < partitions; j++)
                {
                    Assert.True(expectedOthers[j].ToString() == actualOthers[j].ToString(), $"{at}: OtherMissing[{j}] {actualOthers[j]}, model {expectedOthers[j]}");
                }
            }
        }

        // Exactly once, and in order with FIFO.
        Assert.Equal(real.Count, real.Distinct().Count());
        if (fifo)
        {
            Assert.Equal(real.Order(), real);
        }
    }

    private static byte[] Payload(ulong seq)
    {
        var bytes = new byte[(int)(seq % 7 == 0 ? 300 + (seq % 2000) : seq % 40)];
        Array.Fill(bytes, (byte)seq);
        return bytes;
    }

    /// <summary>What a stream should do, stated plainly over a sorted dictionary: the window is [low, low + maxHeld) with
    /// low one past the anchor or the purge point (before the anchor: the held packets may span at most maxHeld); NAKs and
    /// pulls stop at its end, and stability at its end less the reserve.</summary>
    private sealed class StreamModel(bool fifo, ulong maxHeld, ulong reserve, Func<ulong, bool> accepts)
    {
        private readonly HashSet<ulong> _early = new();
        private bool _blocked;

        public SortedDictionary<ulong, byte[]> Held { get; } = new();
        public List<ulong> Log { get; } = new();
        public ulong Delivered { get; private set; }
        public ulong MaxSeen { get; private set; }
        public ulong Low { get; private set; }
        public bool Anchored { get; private set; }
        public long Overflows { get; private set; }

        public bool Received(ulong seq) => seq <= Delivered ? seq > 0 : Held.ContainsKey(seq);

        public bool Add(ulong seq, byte[] payload)
        {
            if (seq == 0 || Received(seq))
            {
                return false;
            }

            bool fits = Anchored
                ? seq - Low < maxHeld
                : Held.Count == 0 || Math.Max(seq, Held.Keys.Last()) - Math.Min(seq, Held.Keys.First()) < maxHeld;
            if (!fits)
            {
                Overflows++;
                return false; // not seen either: only a forged or misconfigured sender sends beyond the window
            }

            MaxSeen = Math.Max(MaxSeen, seq);
            Held[seq] = payload;
            if (!fifo && Anchored && seq > Delivered + 1)
            {
                Early(seq);
            }

            InOrder();
            return true;
        }

        public void Anchor(ulong start)
        {
            Anchored = true;
            Delivered = start;
            MaxSeen = Math.Max(MaxSeen, start);
            Low = start + 1;
            foreach (var seq in Held.Keys.ToList())
            {
                if (seq <= start || seq - start > maxHeld)
                {
                    Overflows += seq > start ? 1 : 0;
                    Held.Remove(seq);
                }
            }

            InOrder();
            HeldEarly();
        }

        public void Purge(ulong upTo)
        {
            ulong end = Math.Min(upTo, Delivered);
            foreach (var seq in Held.Keys.Where(k => k <= end).ToList())
            {
                Held.Remove(seq);
            }

            if (Anchored)
            {
                Low = Math.Max(Low, end + 1);
            }
        }

        public void Resume()
        {
            _blocked = false;
            InOrder();
            HeldEarly();
        }

        public ulong CachedUpTo(int partitions, int mine, ulong horizon)
        {
            ulong p = (ulong)partitions;
            ulong limit = Math.Min(Math.Max(horizon, MaxSeen), Low + maxHeld - 1 - reserve); // never where the sender could overrun the window
            for (ulong seq = Delivered + 1; seq <= limit; seq++)
            {
                if (seq % p == (ulong)mine && !Held.ContainsKey(seq))
                {
                    return seq - 1;
                }
            }

            return limit;
        }

        public void CachedMissing(ulong cutoff, int partitions, int mine, NakSet into)
        {
            cutoff = Math.Min(cutoff, Low + maxHeld - 1); // only what the window can take
            ulong p = (ulong)partitions;
            for (ulong seq = Delivered + 1; seq <= cutoff; seq++)
            {
                if (seq % p == (ulong)mine && !Held.ContainsKey(seq))
                {
                    into.AppendCoarsening(seq / p, seq / p);
                }
            }
        }

        public void OtherMissing(ulong limit, int partitions, int mine, NakSet[] into)
        {
            limit = Math.Min(limit, Low + maxHeld - 1);
            ulong p = (ulong)partitions;
            for (ulong seq = Delivered + 1; seq <= limit; seq++)
            {
                if (seq % p != (ulong)mine && !Held.ContainsKey(seq))
                {
                    into[seq % p].AppendCoarsening(seq / p, seq / p);
                }
            }
        }

        private void InOrder()
        {
            while (Anchored && !_blocked && Held.ContainsKey(Delivered + 1))
            {
                if (!_early.Remove(Delivered + 1))
                {
                    if (!accepts(Delivered + 1))
                    {
                        _blocked = true;
                        return;
                    }

                    Log.Add(Delivered + 1);
                }

                Delivered++;
            }
        }

        private void HeldEarly()
        {
            if (fifo || !Anchored)
            {
                return;
            }

            foreach (var seq in Held.Keys.Where(k => k > Delivered).ToList())
            {
                Early(seq);
            }
        }

        private void Early(ulong seq)
        {
            if (_blocked || _early.Contains(seq))
            {
                return;
            }

            if (!accepts(seq))
            {
                _blocked = true;
                return;
            }

            _early.Add(seq);
            Log.Add(seq);
        }
    }

    /// <summary>Records what a stream borrows and gives back, as the node's own sender would see it.</summary>
    private sealed class Lender : IPacketLender
    {
        public readonly List<ulong> Lent = new();
        public readonly List<ulong> GivenBack = new();
        public readonly Dictionary<ulong, byte[]> Buffers = new();

        public void Lend(ulong seq, byte[] buffer)
        {
            Lent.Add(seq);
            Buffers.Add(seq, buffer);
        }

        public void GiveBack(ulong seq, byte[] buffer)
        {
            Assert.Same(Buffers[seq], buffer);
            GivenBack.Add(seq);
        }
    }

    [Fact]
    public void A_lent_packet_is_held_in_the_lenders_buffer_and_given_back_once_when_released()
    {
        var lender = new Lender();
        var pool = new PacketPool(16);
        var stream = new SenderStream(1, Deliver, pool: pool);
        stream.Anchor(0);
        var datagrams = new Dictionary<ulong, byte[]>();
        foreach (ulong seq in new ulong[] { 1, 3, 2 })
        {
            var datagram = new byte[40];
            datagram.AsSpan(8, 4).Fill((byte)seq); // a header of 8 bytes, then the payload
            datagrams[seq] = datagram;
            Assert.True(stream.Add(seq, new LentPacket(datagram, 8, 4, lender)));
        }

        Assert.False(stream.Add(2, new LentPacket(new byte[40], 8, 4, lender))); // a duplicate is neither held nor lent
        Assert.Equal([1UL, 3, 2], lender.Lent);
        Assert.Equal([1UL, 2, 3], _delivered);
        Assert.True(stream.TryGet(3, out var held));
        Assert.True(held.Overlaps(datagrams[3].AsSpan(8, 4)));     // the lender's buffer itself, not a copy
        Assert.Equal(3, pool.HeldPackets);                          // counted as held all the same
        Assert.Equal(12, pool.HeldBytes);
        Assert.Equal(0, pool.Allocated);                            // and no buffer of the pool's was taken for them
        Assert.Empty(lender.GivenBack);

        stream.Purge(2);
        Assert.Equal([1UL, 2], lender.GivenBack);
        Assert.Equal(1, stream.ReleaseAll());
        Assert.Equal([1UL, 2, 3], lender.GivenBack);                // each exactly once
        Assert.Equal(0, pool.HeldPackets);
        Assert.Equal(0, pool.Free);                                 // a lent buffer never enters the pool
    }
}
