namespace QuickSilver.Aer.Tests;

/// <summary>The window's transitions against the seed's rules (§4.2.2), one rule per test, then a randomized comparison
/// with a brute-force reference model of the same rules.</summary>
public sealed class NcaWindowTests
{
    private static NcaWindow Window(double thresh = 64, int max = 1024) => new(thresh, max);

    private static void SendAll(NcaWindow w)
    {
        while (w.CanSend)
        {
            w.OnSent(w.HighestSent + 1);
        }
    }

    [Fact]
    public void Slow_start_adds_one_per_ack_below_the_threshold()
    {
        var w = Window();
        Assert.Equal(1, w.W);
        Assert.Equal(64, w.Thresh);
        w.OnSent(1);
        Assert.False(w.CanSend);
        Assert.Equal(NcaEvent.SlowStart, w.OnAck(1));
        Assert.Equal(2, w.W);
        SendAll(w);
        Assert.Equal(3, w.HighestSent);
        w.OnAck(2);
        w.OnAck(3);
        Assert.Equal(4, w.W);
    }

    [Fact]
    public void Congestion_avoidance_adds_one_over_w_at_or_above_the_threshold()
    {
        var w = Window(thresh: 2);
        w.OnSent(1);
        Assert.Equal(NcaEvent.SlowStart, w.OnAck(1)); // 1 < 2
        Assert.Equal(2, w.W);
        SendAll(w);
        Assert.Equal(NcaEvent.CongestionAvoidance, w.OnAck(2));
        Assert.Equal(2.5, w.W, 9);
        Assert.Equal(NcaEvent.CongestionAvoidance, w.OnAck(3));
        Assert.Equal(2.5 + 1 / 2.5, w.W, 9);
    }

    [Fact]
    public void A_packet_is_lost_after_acks_for_three_later_packets_and_the_window_halves()
    {
        var w = Window();
        for (int i = 1; i <= 7; i++)
        {
            w.OnSent(i);
            w.OnAck(i);
        }

        Assert.Equal(8, w.W);
        SendAll(w); // 8..15
        Assert.Equal(15, w.HighestSent);
        Assert.Equal(NcaEvent.SlowStart, w.OnAck(9));
        Assert.Equal(NcaEvent.SlowStart, w.OnAck(10));
        Assert.Equal(0, w.Losses); // two later ACKs are not enough
        Assert.Equal(NcaEvent.Loss, w.OnAck(11));
        Assert.Equal(1, w.Losses);
        Assert.Equal(11 / 2.0, w.W, 9); // W was 11 after three more slow-start ACKs
        Assert.Equal(11 / 2.0, w.Thresh, 9);
        Assert.Equal(15, w.RecoverPoint);
    }

    [Fact]
    public void At_most_one_reduction_per_window()
    {
        var w = Window();
        for (int i = 1; i <= 7; i++)
        {
            w.OnSent(i);
            w.OnAck(i);
        }

        SendAll(w); // 8..15; 8 and 12 will be lost
        w.OnAck(9);
        w.OnAck(10);
        Assert.Equal(NcaEvent.Loss, w.OnAck(11));
        double after = w.W;
        w.OnAck(13);
        w.OnAck(14);
        Assert.Equal(NcaEvent.LossIgnored, w.OnAck(15)); // 12 was sent before the reduction
        Assert.Equal(2, w.Losses);
        Assert.Equal(1, w.Reductions);
        Assert.True(w.W > after); // only the increases of three ACKs (congestion avoidance: W ≥ Thresh)

        // A loss of a packet sent after the reduction reduces again.
        SendAll(w);
        long first = w.RecoverPoint + 1;
        Assert.True(w.HighestSent >= first + 3);
        w.OnAck(first + 1);
        w.OnAck(first + 2);
        Assert.Equal(NcaEvent.Loss, w.OnAck(first + 3));
        Assert.Equal(2, w.Reductions);
    }

    [Fact]
    public void Timeout_halves_the_threshold_and_restarts_at_one()
    {
        var w = Window();
        for (int i = 1; i <= 9; i++)
        {
            w.OnSent(i);
            w.OnAck(i);
        }

        Assert.Equal(10, w.W);
        SendAll(w);
        Assert.Equal(10, w.InFlight);
        w.OnTimeout();
        Assert.Equal(5, w.Thresh);
        Assert.Equal(1, w.W);
        Assert.Equal(0, w.InFlight);
        Assert.Equal(NcaEvent.None, w.OnAck(12)); // written off
        Assert.True(w.CanSend);
    }

    [Fact]
    public void The_window_never_drops_below_one_and_never_exceeds_its_maximum()
    {
        var w = Window(max: 4);
        for (int i = 1; i <= 10; i++)
        {
            w.OnSent(i);
            w.OnAck(i);
        }

        Assert.Equal(4, w.W);
        var v = Window();
        v.OnTimeout();
        v.OnTimeout();
        Assert.Equal(1, v.W);
        Assert.Equal(1, v.Thresh);
    }

    [Fact]
    public void Duplicate_and_unknown_acks_change_nothing()
    {
        var w = Window();
        w.OnSent(1);
        w.OnAck(1);
        Assert.Equal(NcaEvent.None, w.OnAck(1));
        Assert.Equal(NcaEvent.None, w.OnAck(99));
        Assert.Equal(NcaEvent.None, w.OnAck(0));
        Assert.Equal(2, w.W);
    }

    [Fact]
    public void Sending_beyond_the_window_is_refused()
    {
        var w = Window();
        w.OnSent(1);
        Assert.Throws<InvalidOperationException>(() => w.OnSent(2));
        Assert.Throws<ArgumentException>(() => w.OnSent(5));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    public void Matches_a_brute_force_model_of_the_rules_under_random_acks(int seed)
    {
        var random = new Random(seed);
        var w = new NcaWindow(8, 64);
        var model = new ReferenceWindow(8, 64);
        for (int step = 0; step < 20_000; step++)
        {
            int action = random.Next(10);
            if (action < 4 && w.CanSend)
            {
                Assert.True(model.CanSend);
                w.OnSent(w.HighestSent + 1);
                model.Sent(model.Highest + 1);
            }
            else if (action < 9)
            {
                // ACK one of the recent packets, mostly in order, sometimes not at all (lost) or twice.
                long seq = Math.Max(1, w.HighestSent - random.Next(6));
                w.OnAck(seq);
                model.Ack(seq);
            }
            else if (random.Next(20) == 0)
            {
                w.OnTimeout();
                model.Timeout();
            }

            Assert.Equal(model.W, w.W, 9);
            Assert.Equal(model.Thresh, w.Thresh, 9);
            Assert.Equal(model.InFlight, w.InFlight);
            Assert.Equal(model.Reductions, w.Reductions);
        }

        Assert.True(w.Reductions > 10 && w.Timeouts > 0, $"the run exercised {w.Reductions} reductions and {w.Timeouts} timeouts");
    }

    /// <summary>The same rules, written the slow obvious way: a dictionary of packet states and a full scan per ACK.</summary>
    private sealed class ReferenceWindow(double thresh, int max)
    {
        private readonly Dictionary<long, int> _state = new(); // 0 out, 1 acked, 2 lost
        private long _recover;

        public double W { get; private set; } = 1;
        public double Thresh { get; private set; } = thresh;
        public long Highest { get; private set; }
        public long Reductions { get; private set; }
        public int InFlight => _state.Values.Count(s => s == 0);
        public bool CanSend => InFlight < Math.Min((int)Math.Floor(W), max);

        public void Sent(long seq)
        {
            Highest = seq;
            _state[seq] = 0;
        }

        public void Ack(long seq)
        {
            if (!_state.TryGetValue(seq, out int s) || s != 0)
            {
                return;
            }

            _state[seq] = 1;
            W = Math.Min(max, W < Thresh ? W + 1 : W + 1 / W);
            foreach (var u in _state.Keys.Order().ToList())
            {
                if (_state[u] == 0 && _state.Count(kv => kv.Key > u && kv.Value == 1) >= 3)
                {
                    _state[u] = 2;
                    if (u > _recover)
                    {
                        Thresh = Math.Max(1, W / 2);
                        W = Math.Max(1, W / 2);
                        _recover = Highest;
                        Reductions++;
                    }
                }
            }

            // Forget settled packets below the lowest outstanding one (the real window slides past them too).
            long low = _state.Where(kv => kv.Value == 0).Select(kv => kv.Key).DefaultIfEmpty(long.MaxValue).Min();
            foreach (var k in _state.Keys.Where(k => k < low && _state[k] != 0).ToList())
            {
                _state.Remove(k);
            }
        }

        public void Timeout()
        {
            Thresh = Math.Max(1, W / 2);
            W = 1;
            foreach (var k in _state.Keys.ToList())
            {
                if (_state[k] == 0)
                {
                    _state[k] = 2;
                }
            }

            _recover = Highest;
        }
    }
}
