namespace QuickSilver.Qsm.Simulation;

/// <summary>
/// Virtual-time records of a <see cref="RegionCluster"/> run: when each packet was first transmitted, how often it
/// was transmitted, which members got it from the first multicast, and from these the two latencies the QSM paper
/// reports. Recovery latency (Fig. 19) = delivery time at a member − first transmission, for packets that member did
/// not get from the first multicast; recovery at arrival = the time the first copy of such a packet reached the member
/// (a push or pull from a peer, or the sender's retransmission) − first transmission, which does not wait for the
/// gaps before it to close (the paper, §3.9, measures this one). ACK latency (Fig. 20) = the time the sender's collective ACK first covers a
/// packet − its first transmission. Only packets first transmitted inside [<see cref="MeasureFrom"/>,
/// <see cref="MeasureUntil"/>) are sampled.
/// </summary>
internal sealed class RegionTimeline
{
    private readonly Dictionary<uint, SendLog> _sends = new();
    private readonly Dictionary<(int Member, uint Sender), GrowableBits>? _originals;
    private readonly Dictionary<(int Member, uint Sender), GrowableBits>? _arrived;

    internal RegionTimeline(bool trackRecovery)
    {
        if (trackRecovery)
        {
            _originals = new();
            _arrived = new();
            _highest = new();
            _detected = new();
        }
    }

    public TimeSpan MeasureFrom { get; set; } = TimeSpan.MaxValue;

    public TimeSpan MeasureUntil { get; set; } = TimeSpan.MaxValue;

    /// <summary>Delivery time − first transmission, for packets a member missed on the first multicast.</summary>
    public LatencySamples Recovery { get; } = new();

    /// <summary>First arrival at a member − first transmission, for sampled packets that member did not get from the
    /// first multicast (as <see cref="Recovery"/>, but when the repaired copy arrived, not when it was delivered).</summary>
    public LatencySamples RecoveryAtArrival { get; } = new();

    /// <summary><see cref="RecoveryAtArrival"/> by where the repaired copy came from: the sender's retransmission (on a
    /// collective NAK, a receiver's report or the timeout), a peer of the member's own partition (a push or pull on the
    /// ring, for a packet of the member's class), or another partition (a pull of a packet cached elsewhere).</summary>
    public LatencySamples ArrivalFromSender { get; } = new();

    /// <inheritdoc cref="ArrivalFromSender"/>
    public LatencySamples ArrivalFromRing { get; } = new();

    /// <inheritdoc cref="ArrivalFromSender"/>
    public LatencySamples ArrivalFromOtherPartition { get; } = new();

    /// <summary>For each repair at arrival whose packet a flow status named missing: the first such status at the sender
    /// − the packet's first transmission (how long the sender took to hear of the loss, from any member).</summary>
    public LatencySamples SenderLearnt { get; } = new();

    /// <summary>Sender's ACK time − first transmission.</summary>
    public LatencySamples Ack { get; } = new();

    /// <summary>Deliveries (member × packet) of sampled packets, repaired or not: the denominator of the repair rate.</summary>
    public long SampledDeliveries { get; private set; }

    /// <summary>Transmissions of a packet after its first (NAK or timeout retransmissions by the sender).</summary>
    public long SenderRetransmissions { get; private set; }

    /// <summary>The stages of each sampled repair at arrival (<see cref="RepairStages"/>), for <see cref="RepairBreakdown"/>.</summary>
    private readonly List<RepairStages> _repairs = new();
    private readonly Dictionary<(int Member, uint Sender), ulong>? _highest;
    private readonly Dictionary<(int Member, uint Sender, ulong Seq), TimeSpan>? _detected;

    /// <summary>A sender's flow status named <paramref name="seq"/> missing: the first such time per packet is when the
    /// sender learnt of its loss (from any member).</summary>
    internal void OnRepairAsked(uint sender, ulong seq, TimeSpan now)
    {
        if (_sends.TryGetValue(sender, out var log))
        {
            log.Ask(seq, now);
        }
    }

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

    /// <summary>A data datagram of <paramref name="sender"/>'s stream reached <paramref name="member"/>, straight from
    /// the sender (<paramref name="fromSender"/>) or from a peer; <paramref name="ownClass"/>: the member's partition
    /// caches it (packet i by partition i mod p).</summary>
    internal void OnArrival(int member, uint sender, ulong seq, bool fromSender, TimeSpan now, bool ownClass = true)
    {
        if (_originals is null || _arrived is null || !_sends.TryGetValue(sender, out var log))
        {
            return;
        }

        // A member detects a gap when a later packet arrives: the packets between its highest and this one are missing.
        var key = (member, sender);
        ulong highest = _highest!.GetValueOrDefault(key);
        if (seq > highest)
        {
            if (highest > 0)
            {
                for (ulong missing = highest + 1; missing < seq; missing++)
                {
                    if (TrySampled(sender, missing, out _))
                    {
                        _detected!.TryAdd((member, sender, missing), now);
                    }
                }
            }

            _highest![key] = seq;
        }

        // Retransmitted before this copy arrived: it cannot be told from the original, count it repaired.
        bool original = fromSender && log.Transmissions(seq) == 1;
        if (original)
        {
            Bits(_originals, member, sender).Set(seq);
        }

        if (!TrySampled(sender, seq, out var sent))
        {
            return;
        }

        var arrived = Bits(_arrived, member, sender);
        if (arrived.Get(seq))
        {
            return; // a duplicate: only the first copy counts
        }

        arrived.Set(seq);
        if (!original)
        {
            TimeSpan? detected = _detected!.Remove((member, sender, seq), out var at) ? at - sent : null;
            var asked = log.Asked(seq, sent);
            _repairs.Add(new RepairStages(now - sent, detected, asked, log.FirstResend(seq, sent),
                log.LastTransmit(seq) - sent, log.Transmissions(seq), fromSender ? 0 : ownClass ? 1 : 2));
            if (asked is { } learnt)
            {
                SenderLearnt.Add(learnt);
            }

            RecoveryAtArrival.Add(now - sent);
            (fromSender ? ArrivalFromSender : ownClass ? ArrivalFromRing : ArrivalFromOtherPartition).Add(now - sent);
        }
    }

    private static GrowableBits Bits(Dictionary<(int Member, uint Sender), GrowableBits> map, int member, uint sender)
    {
        if (!map.TryGetValue((member, sender), out var bits))
        {
            map[(member, sender)] = bits = new GrowableBits();
        }

        return bits;
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

    /// <summary>
    /// Where the repairs' time went, for all of them and for the slowest 10 % and 1 % (by recovery at arrival): the mean
    /// time from the first send to the member detecting the gap (a later packet arrived), to the sender first hearing the
    /// packet named missing (by any member's report, through the aggregation), to its first resend, to the transmission
    /// whose copy arrived, and to the arrival; the share of repairs whose packet was sent three or more times by then (a
    /// resend lost again, or asked again), and the share that came from a peer rather than the sender.
    /// </summary>
    public string RepairBreakdown()
    {
        if (_repairs.Count == 0)
        {
            return "no repairs";
        }

        _repairs.Sort((a, b) => a.Recovery.CompareTo(b.Recovery));
        var parts = new List<string>();
        foreach (var (name, from) in new[] { ("all", 0.0), ("slowest 10 %", 0.9), ("slowest 1 %", 0.99) })
        {
            var slice = _repairs.Skip((int)(from * _repairs.Count)).ToList();
            double Mean(Func<RepairStages, TimeSpan?> stage)
            {
                var known = slice.Select(stage).Where(t => t is not null).Select(t => t!.Value.TotalMilliseconds).ToList();
                return known.Count == 0 ? double.NaN : known.Average();
            }

            parts.Add(string.Create(System.Globalization.CultureInfo.InvariantCulture,
                $"{name} ({slice.Count}, from {slice[0].Recovery.TotalMilliseconds:F0} ms): detected {Mean(r => r.Detected):F1}, sender asked {Mean(r => r.Asked):F1}, " +
                $"first resend {Mean(r => r.FirstResend):F1}, copy sent {Mean(r => r.CopySent):F1}, arrived {Mean(r => r.Recovery):F1} ms; " +
                $"sent 3+ times {100.0 * slice.Count(r => r.Transmissions >= 3) / slice.Count:F1} %, never asked {100.0 * slice.Count(r => r.Asked is null) / slice.Count:F1} %, " +
                $"from a peer {100.0 * slice.Count(r => r.Source != 0) / slice.Count:F1} %"));
        }

        return string.Join(" | ", parts);
    }

    /// <summary>One repair at arrival, each time from the packet's first send.</summary>
    private readonly record struct RepairStages(TimeSpan Recovery, TimeSpan? Detected, TimeSpan? Asked, TimeSpan? FirstResend, TimeSpan CopySent,
        int Transmissions, int Source);

    private sealed class SendLog
    {
        private readonly List<TimeSpan> _first = new();
        private readonly List<byte> _count = new();
        private readonly List<TimeSpan> _last = new();
        private readonly List<TimeSpan> _second = new();
        private readonly List<TimeSpan> _asked = new();

        public void Ask(ulong seq, TimeSpan now)
        {
            if (seq >= 1 && seq <= (ulong)_asked.Count && _asked[(int)(seq - 1)] == TimeSpan.MinValue)
            {
                _asked[(int)(seq - 1)] = now;
            }
        }

        public TimeSpan? Asked(ulong seq, TimeSpan sent) => At(_asked, seq) is { } t ? t - sent : null;

        public TimeSpan? FirstResend(ulong seq, TimeSpan sent) => At(_second, seq) is { } t ? t - sent : null;

        public TimeSpan LastTransmit(ulong seq) => At(_last, seq) ?? TimeSpan.Zero;

        private static TimeSpan? At(List<TimeSpan> times, ulong seq) =>
            seq >= 1 && seq <= (ulong)times.Count && times[(int)(seq - 1)] != TimeSpan.MinValue ? times[(int)(seq - 1)] : null;

        /// <summary>Records a transmission; true if it was a retransmission.</summary>
        public bool Record(ulong seq, TimeSpan now)
        {
            while ((ulong)_first.Count < seq)
            {
                _first.Add(TimeSpan.MinValue);
                _count.Add(0);
                _last.Add(TimeSpan.MinValue);
                _second.Add(TimeSpan.MinValue);
                _asked.Add(TimeSpan.MinValue);
            }

            int i = (int)(seq - 1);
            if (_count[i] == 0)
            {
                _first[i] = now;
            }
            else if (_count[i] == 1)
            {
                _second[i] = now;
            }

            _last[i] = now;

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
