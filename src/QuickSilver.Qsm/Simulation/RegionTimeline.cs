namespace QuickSilver.Qsm.Simulation;

/// <summary>
/// Virtual-time records of a <see cref="RegionCluster"/> run: when each packet was first transmitted, how often it
/// was transmitted, which members got it from the first multicast, and from these the two latencies the QSM paper
/// reports. Recovery latency (Fig. 19) = delivery time at a member − first transmission, for packets that member did
/// not get from the first multicast. ACK latency (Fig. 20) = the time the sender's collective ACK first covers a
/// packet − its first transmission. Only packets first transmitted inside [<see cref="MeasureFrom"/>,
/// <see cref="MeasureUntil"/>) are sampled.
/// </summary>
internal sealed class RegionTimeline
{
    private readonly Dictionary<uint, SendLog> _sends = new();
    private readonly Dictionary<(int Member, uint Sender), GrowableBits>? _originals;

    internal RegionTimeline(bool trackRecovery)
    {
        if (trackRecovery)
        {
            _originals = new();
        }
    }

    public TimeSpan MeasureFrom { get; set; } = TimeSpan.MaxValue;

    public TimeSpan MeasureUntil { get; set; } = TimeSpan.MaxValue;

    /// <summary>Delivery time − first transmission, for packets a member missed on the first multicast.</summary>
    public LatencySamples Recovery { get; } = new();

    /// <summary>Sender's ACK time − first transmission.</summary>
    public LatencySamples Ack { get; } = new();

    /// <summary>Deliveries (member × packet) of sampled packets, repaired or not: the denominator of the repair rate.</summary>
    public long SampledDeliveries { get; private set; }

    /// <summary>Transmissions of a packet after its first (NAK or timeout retransmissions by the sender).</summary>
    public long SenderRetransmissions { get; private set; }

    internal void OnTransmit(uint sender, ulong seq, TimeSpan now)
    {
        if (!_sends.TryGetValue(sender, out var log))
        {
            _sends[sender] = log = new SendLog();
        }

        if (log.Record(seq, now))
        {
            SenderRetransmissions++;
        }
    }

    /// <summary>A data datagram reached <paramref name="member"/> straight from its sender.</summary>
    internal void OnArrivalFromSender(int member, uint sender, ulong seq)
    {
        if (_originals is null || !_sends.TryGetValue(sender, out var log) || log.Transmissions(seq) != 1)
        {
            return; // retransmitted before this copy arrived: it cannot be told from the original, count it repaired
        }

        if (!_originals.TryGetValue((member, sender), out var bits))
        {
            _originals[(member, sender)] = bits = new GrowableBits();
        }

        bits.Set(seq);
    }

    internal void OnDelivered(int member, uint sender, ulong seq, TimeSpan now)
    {
        if (_originals is null || !TrySampled(sender, seq, out var sent))
        {
            return;
        }

        SampledDeliveries++;
        if (!_originals.TryGetValue((member, sender), out var bits) || !bits.Get(seq))
        {
            Recovery.Add(now - sent);
        }
    }

    internal void OnAcknowledged(uint sender, ulong before, ulong after, TimeSpan now)
    {
        for (ulong seq = before + 1; seq <= after; seq++)
        {
            if (TrySampled(sender, seq, out var sent))
            {
                Ack.Add(now - sent);
            }
        }
    }

    private bool TrySampled(uint sender, ulong seq, out TimeSpan sent)
    {
        sent = default;
        return _sends.TryGetValue(sender, out var log) && log.TryFirst(seq, out sent) && sent >= MeasureFrom && sent < MeasureUntil;
    }

    private sealed class SendLog
    {
        private readonly List<TimeSpan> _first = new();
        private readonly List<byte> _count = new();

        /// <summary>Records a transmission; true if it was a retransmission.</summary>
        public bool Record(ulong seq, TimeSpan now)
        {
            while ((ulong)_first.Count < seq)
            {
                _first.Add(TimeSpan.MinValue);
                _count.Add(0);
            }

            int i = (int)(seq - 1);
            if (_count[i] == 0)
            {
                _first[i] = now;
            }

            _count[i] = (byte)Math.Min(255, _count[i] + 1);
            return _count[i] > 1;
        }

        public int Transmissions(ulong seq) => seq >= 1 && seq <= (ulong)_count.Count ? _count[(int)(seq - 1)] : 0;

        public bool TryFirst(ulong seq, out TimeSpan sent)
        {
            sent = seq >= 1 && seq <= (ulong)_first.Count ? _first[(int)(seq - 1)] : TimeSpan.MinValue;
            return sent != TimeSpan.MinValue;
        }
    }
}
