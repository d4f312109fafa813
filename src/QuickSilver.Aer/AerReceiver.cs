using System.Buffers;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>
/// An AER receiver (§4.1): takes the source's multicast and repairs from its upstream, hands payloads to the
/// application in sequence order, and NAKs what is missing to its nearest upstream repair server through a
/// <see cref="NakScheduler"/> (random wait, suppression by a NAK subcast from upstream, retransmission timer). Losses
/// show as gaps in the sequence numbers or as SPMs announcing packets it has not seen. For NCA (§4.2) it estimates its
/// loss rate p (<see cref="LossRateWindow"/>) and round trip T to the source (the SPM's path round trip plus its own
/// probe round trip to its upstream), unicasts a CSM upstream every <see cref="AerOptions.CsmInterval"/>, and ACKs every
/// packet while the source nominates it. Holds at most <see cref="AerOptions.ReceiveWindowPackets"/> packets.
/// </summary>
public sealed class AerReceiver : AerRole
{
    private readonly NetAddress _source;
    private readonly DeliverHandler _deliver;
    private readonly SourcePathTracker _tracker;
    private readonly NakScheduler _naks;
    private readonly LossRateWindow _loss;
    private readonly byte[]?[] _slots;
    private readonly int[] _lengths;
    private readonly Alarm _csmAlarm;
    private RttEstimator _upRtt;
    private NetAddress _rttTarget;
    private long _next = 1;
    private long _known;
    private long _scanned;
    private uint _epoch;
    private TimeSpan _nominatedUntil;
    private bool _stopped;

    internal AerReceiver(AerLayer layer, uint session, NetAddress group, NetAddress source, DeliverHandler deliver) : base(layer, session, group)
    {
        _source = source;
        _deliver = deliver ?? throw new ArgumentNullException(nameof(deliver));
        _tracker = new SourcePathTracker(source, Options.SpmTimeout);
        _naks = new NakScheduler(Scheduler, layer.Random, Options.ReceiveWindowPackets, SendNakUpstream) { DelayMax = Options.ReceiverNakDelayMax, RetryTimeout = Options.NakRetryMin, Expired = () => Counters.NakTimeouts++ };
        _loss = new LossRateWindow(Options.LossWindowPackets);
        _slots = new byte[]?[Options.ReceiveWindowPackets];
        _lengths = new int[Options.ReceiveWindowPackets];
        _csmAlarm = new Alarm(_ => OnCsmTimer());
        _upRtt = NewRtt();
    }

    /// <summary>The next sequence number to deliver (every one below it was delivered or written off).</summary>
    public long NextToDeliver => _next;

    public bool IsNominee => _epoch != 0 && Now < _nominatedUntil;

    public double LossRate => _loss.LossRate;

    public NetAddress CurrentUpstream => _tracker.Upstream(Now).Address;

    public int PendingNaks => _naks.Count;

    /// <summary>Reports each repaired packet's time from loss detection to repair (for measurements).</summary>
    public Action<TimeSpan>? RepairLatency
    {
        get => _naks.RepairLatency;
        set => _naks.RepairLatency = value;
    }

    internal override void Start()
    {
        Transport.JoinGroup(Group);
        Scheduler.ScheduleAfter(_csmAlarm, TimeSpan.FromTicks((long)(Layer.Random.NextDouble() * Options.CsmInterval.Ticks)));
    }

    internal override void Stop()
    {
        if (_stopped)
        {
            return;
        }

        _stopped = true;
        var up = _tracker.Upstream(Now).Address;
        SendCsm(up, new CongestionStateMessage(Session, Local, 0, 0, Leaving: true));
        if (up != _source)
        {
            SendCsm(_source, new CongestionStateMessage(Session, Local, 0, 0, Leaving: true));
        }

        Scheduler.Cancel(_csmAlarm);
        _naks.Clear();
        Transport.LeaveGroup(Group);
        for (int i = 0; i < _slots.Length; i++)
        {
            if (_slots[i] is { } buffer)
            {
                ArrayPool<byte>.Shared.Return(buffer);
                _slots[i] = null;
            }
        }
    }

    internal override void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        if (_stopped)
        {
            return;
        }

        var now = Now;
        switch (header.Type)
        {
            case AerWire.DataType:
                if (!AerWire.TryReadData(header, datagram, out var data, out var payload))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!_tracker.IsUpstream(from, now))
                {
                    NotAMember();
                }
                else
                {
                    OnData(data, payload);
                }

                break;
            case AerWire.SpmType:
                if (!AerWire.TryReadSpm(header, datagram, out var spm))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!_tracker.OnSpm(from, spm, now))
                {
                    NotAMember();
                }
                else
                {
                    if (_tracker.LowestAvailable > _next)
                    {
                        SkipTo(_tracker.LowestAvailable);
                    }

                    Raise(_tracker.HighestSeq);
                }

                break;
            case AerWire.NakType:
                if (!AerWire.TryReadNak(header, datagram, out var nak))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!nak.Downstream || !_tracker.IsUpstream(from, now))
                {
                    NotAMember();
                }
                else if (!Options.NakSuppression)
                {
                    _naks.ResetConsecutiveTimeouts(); // not suppressed, but the upstream is alive and fetching
                }
                else if (nak.Seq >= _next && nak.Seq < _next + _slots.Length && _slots[Slot(nak.Seq)] is null)
                {
                    if (_naks.Suppress(nak.Seq))
                    {
                        Counters.NaksSuppressed++;
                    }
                }

                break;
            case AerWire.NominateType:
                if (!AerWire.TryReadNominate(header, datagram, out _, out uint epoch, out bool stop))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (from != _source)
                {
                    NotAMember();
                }
                else if (stop)
                {
                    if (epoch == _epoch)
                    {
                        _epoch = 0;
                    }
                }
                else if (epoch >= _epoch)
                {
                    _epoch = epoch;
                    _nominatedUntil = now + Options.NominationLifetime;
                }

                break;
            case AerWire.ProbeType:
                if (!AerWire.TryReadProbe(header, datagram, out _, out long ticks, out bool reply))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!reply || from != _rttTarget || ticks > now.Ticks)
                {
                    NotForThisNode();
                }
                else
                {
                    _upRtt.Sample(now - TimeSpan.FromTicks(ticks));
                    SetRetryTimers(now);
                }

                break;
            default:
                NotForThisNode();
                break;
        }
    }

    private void OnData(in AerData data, ReadOnlySpan<byte> payload)
    {
        long seq = data.Seq;
        if (data.Repair)
        {
            Counters.RepairsReceived++;
        }
        else
        {
            _loss.OnArrival(seq);
        }

        if (seq < _next || (seq < _next + _slots.Length && _slots[Slot(seq)] is not null))
        {
            Counters.Duplicates++;
            return;
        }

        if (seq >= _next + _slots.Length)
        {
            Counters.WindowOverflow++;
            Raise(seq);
            return;
        }

        var buffer = ArrayPool<byte>.Shared.Rent(Math.Max(1, payload.Length));
        payload.CopyTo(buffer);
        _slots[Slot(seq)] = buffer;
        _lengths[Slot(seq)] = payload.Length;
        _naks.Received(seq, data.Repair);
        if (!data.Repair && IsNominee)
        {
            int n = AerWire.WriteAck(Layer.Scratch, Session, _epoch, seq, data.SentTicks);
            Layer.Send(_source, n);
            Counters.AcksSent++;
        }

        DeliverInOrder();
        Raise(seq);
    }

    private void DeliverInOrder()
    {
        while (_slots[Slot(_next)] is { } buffer)
        {
            int i = Slot(_next);
            _slots[i] = null;
            long seq = _next++;
            Counters.Delivered++;
            try
            {
                _deliver(seq, buffer.AsSpan(0, _lengths[i]));
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }
    }

    /// <summary>The source can no longer repair anything below <paramref name="lowest"/>: deliver what is here, write off the rest.</summary>
    private void SkipTo(long lowest)
    {
        long end = Math.Min(lowest, _next + _slots.Length);
        while (_next < end)
        {
            if (_slots[Slot(_next)] is not null)
            {
                DeliverInOrder();
                continue;
            }

            Counters.Unrecoverable++;
            _naks.Received(_next, repair: false);
            _next++;
        }

        if (_next < lowest)
        {
            Counters.Unrecoverable += lowest - _next;
            _next = lowest;
        }

        _naks.ForgetBelow(_next);
        DeliverInOrder();
    }

    /// <summary>Packets up to <paramref name="highest"/> exist: start NAKs for the missing ones within the window.</summary>
    private void Raise(long highest)
    {
        if (highest > _known)
        {
            _known = highest;
        }

        long limit = Math.Min(_known, _next + _slots.Length - 1);
        for (long s = Math.Max(_scanned + 1, _next); s <= limit; s++)
        {
            if (_slots[Slot(s)] is null && !_naks.Missing(s))
            {
                break;
            }

            _scanned = s;
        }
    }

    private void SendNakUpstream(long seq)
    {
        var now = Now;
        var up = _tracker.Upstream(now);
        if (_naks.ConsecutiveTimeouts >= Options.UpstreamFailureNaks && up.Depth > 0)
        {
            // The repair server above stopped repairing: pass it over, NAK the next one up (in the end the source).
            _tracker.Blacklist(up.Address, now + Options.UpstreamBlacklist);
            _naks.ResetConsecutiveTimeouts();
            Counters.UpstreamFailovers++;
            up = _tracker.Upstream(now);
        }

        SendNak(up.Address, seq, downstream: false);
        Counters.NaksSent++;
    }

    private void OnCsmTimer()
    {
        var now = Now;
        var up = _tracker.Upstream(now);
        if (up.Address != _rttTarget)
        {
            _rttTarget = up.Address;
            _upRtt = NewRtt();
        }

        SendProbe(up.Address, now.Ticks, reply: false);
        if (_upRtt.HasSample)
        {
            int rtt = (int)Math.Min(int.MaxValue, (long)up.PathRttMicros + Micros(_upRtt.Smoothed));
            SendCsm(up.Address, new CongestionStateMessage(Session, Local, _loss.LossRate, rtt, Leaving: false));
        }

        // Packets the window holds back may have become NAKable as it moved.
        Raise(_known);
        Scheduler.ScheduleAfter(_csmAlarm, Options.CsmInterval);
    }

    /// <summary>NAK timers: a NAK answered by the upstream takes a round trip to it; one the upstream is fetching from
    /// further up (we were suppressed) takes the round trip from the source (the SPMs' path round trip plus ours).</summary>
    private void SetRetryTimers(TimeSpan now)
    {
        var up = _tracker.Upstream(now);
        var retry = TimeSpan.FromTicks((long)(_upRtt.Smoothed.Ticks * Options.NakRetryRttFactor));
        _naks.RetryTimeout = retry > Options.NakRetryMin ? retry : Options.NakRetryMin;
        var full = TimeSpan.FromTicks((long)((_upRtt.Smoothed.Ticks + up.PathRttMicros * 10L) * Options.NakRetryRttFactor));
        _naks.SuppressedRetryTimeout = full > _naks.RetryTimeout ? full : _naks.RetryTimeout;
    }

    private RttEstimator NewRtt() => new(Options.InitialRto, TimeSpan.FromMilliseconds(1), Options.RtoMax);

    private int Slot(long seq) => (int)(seq % _slots.Length);

    public override string Describe() =>
        $"receiver s{Session}: next {_next}, known {_known}, naks {_naks.Count}, upstream {_tracker.Upstream(Now).Address}, p {_loss.LossRate:0.###}, nominee {IsNominee}";
}
