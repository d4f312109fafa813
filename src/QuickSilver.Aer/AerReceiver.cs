using System.Buffers;
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
    private readonly UpstreamLink _up;
    private readonly LossRateWindow _loss;
    private readonly byte[]?[] _slots;
    private readonly int[] _lengths;
    private long _next = 1;
    private long _known;
    private long _scanned;
    private uint _epoch;
    private TimeSpan _nominatedUntil;
    private bool _held;

    internal AerReceiver(AerLayer layer, uint session, NetAddress group, NetAddress source, DeliverHandler deliver) : base(layer, session, group)
    {
        _source = source;
        _deliver = deliver ?? throw new ArgumentNullException(nameof(deliver));
        _up = new UpstreamLink(layer, this, source, Options.ReceiveWindowPackets, Options.ReceiverNakDelayMax, NakUpstream, IsMissingInWindow, OnCsmTimer);
        _loss = new LossRateWindow(Options.LossWindowPackets);
        _slots = new byte[]?[Options.ReceiveWindowPackets];
        _lengths = new int[Options.ReceiveWindowPackets];
    }

    /// <summary>The next sequence number to deliver (every one below it was delivered or written off).</summary>
    public long NextToDeliver => _next;

    public bool IsNominee => _epoch != 0 && Now < _nominatedUntil;

    public double LossRate => _loss.LossRate;

    public NetAddress CurrentUpstream => _up.Tracker.Upstream(Now).Address;

    public int PendingNaks => _up.Naks.Count;

    /// <summary>Whether in-order delivery is held (<see cref="Hold"/>) until <see cref="Resume"/>.</summary>
    public bool Held => _held;

    /// <summary>Holds in-order delivery after the current upcall: the application's queue is full. Packets keep arriving
    /// into the window (<see cref="AerOptions.ReceiveWindowPackets"/>); beyond it they are dropped and counted
    /// (<see cref="AerCounters.WindowOverflow"/>) and NAKed again once delivery resumes and the window reaches them, so
    /// a slow reader costs repairs, never a lost message or an unbounded buffer. Core thread.</summary>
    public void Hold() => _held = true;

    /// <summary>Ends a <see cref="Hold"/>: delivers what the window holds in order, and catches up with what the source
    /// stopped caching meanwhile (as an SPM would have). Core thread.</summary>
    public void Resume()
    {
        if (!_held || Stopped)
        {
            return;
        }

        _held = false;
        DeliverInOrder();
        if (!_held && _up.Tracker.LowestAvailable > _next)
        {
            SkipTo(_up.Tracker.LowestAvailable);
        }

        Raise(_known);
    }

    /// <summary>Reports each repaired packet's time from loss detection to repair (for measurements).</summary>
    public Action<TimeSpan>? RepairLatency
    {
        get => _up.Naks.RepairLatency;
        set => _up.Naks.RepairLatency = value;
    }

    internal override void Start() => _up.Start();

    private protected override void OnStop()
    {
        var up = _up.Tracker.Upstream(Now).Address;
        SendCsm(up, new CongestionStateMessage(Session, Local, 0, 0, Leaving: true));
        if (up != _source)
        {
            SendCsm(_source, new CongestionStateMessage(Session, Local, 0, 0, Leaving: true));
        }

        _up.Stop();
        for (int i = 0; i < _slots.Length; i++)
        {
            if (_slots[i] is { } buffer)
            {
                ArrayPool<byte>.Shared.Return(buffer);
                _slots[i] = null;
            }
        }
    }

    private protected override void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now)
    {
        switch (header.Type)
        {
            case AerWire.DataType:
                if (_up.AdmitData(from, header, datagram, now, out var data, out var payload))
                {
                    OnData(data, payload);
                }

                break;
            case AerWire.SpmType:
                if (_up.AdmitSpm(from, header, datagram, now, out _))
                {
                    if (_up.Tracker.LowestAvailable > _next && !_held)
                    {
                        SkipTo(_up.Tracker.LowestAvailable);
                    }

                    Raise(_up.Tracker.HighestSeq);
                }

                break;
            case AerWire.NakType:
                if (!AerWire.TryReadNak(header, datagram, out var nak))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!nak.Downstream)
                {
                    NotAMember();
                }
                else
                {
                    _up.OnDownstreamNak(from, nak.Seq, now);
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
                if (_up.AdmitProbeRequest(from, header, datagram, now, out _))
                {
                    NotForThisNode(); // a receiver has no one below it
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
        if (!data.Repair)
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
        _up.Naks.Received(seq, data.Repair);
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
        while (!_held && _slots[Slot(_next)] is { } buffer)
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
                if (_held)
                {
                    return; // the rest is skipped on Resume
                }

                continue;
            }

            Counters.Unrecoverable++;
            _up.Naks.Received(_next, repair: false);
            _next++;
        }

        if (_next < lowest)
        {
            Counters.Unrecoverable += lowest - _next;
            _next = lowest;
        }

        _up.Naks.ForgetBelow(_next);
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
            if (_slots[Slot(s)] is null && !_up.Naks.Missing(s))
            {
                break;
            }

            _scanned = s;
        }
    }

    private void NakUpstream(long seq) => _up.NakUpstream(seq, Now);

    /// <summary>A downstream NAK suppresses ours only for a packet missing within the window.</summary>
    private bool IsMissingInWindow(long seq) => seq >= _next && seq < _next + _slots.Length && _slots[Slot(seq)] is null;

    private void OnCsmTimer(TimeSpan now, (NetAddress Address, int Depth, int PathRttMicros) up)
    {
        if (_up.Rtt.HasSample)
        {
            int rtt = (int)Math.Min(int.MaxValue, (long)up.PathRttMicros + Micros(_up.Rtt.Smoothed));
            SendCsm(up.Address, new CongestionStateMessage(Session, Local, _loss.LossRate, rtt, Leaving: false));
        }

        // Packets the window holds back may have become NAKable as it moved.
        Raise(_known);
    }

    private int Slot(long seq) => (int)(seq % _slots.Length);

    public override string Describe() =>
        $"receiver s{Session}: next {_next}, known {_known}, naks {_up.Naks.Count}, upstream {_up.Tracker.Upstream(Now).Address}, p {_loss.LossRate:0.###}, nominee {IsNominee}";
}
