using QuickSilver.Core.Alarms;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>
/// The source of an AER session (§4.1, §4.2). It registers a pull feed with the transport; each pull first sends a
/// queued repair, then, when NCA's window (<see cref="NcaWindow"/>) has room, the next payload pulled from the
/// application's <see cref="IAerFeed"/>, numbered from 1 and cached (<see cref="RepairCache"/>, bounded in bytes) for
/// repairs. Every <see cref="AerOptions.SpmInterval"/> it multicasts an SPM. A NAK is answered with the packet: subcast
/// to the configured children (plus the NAKer), or re-multicast to the group when no children are configured, at most
/// once per <see cref="AerOptions.RepairHoldoff"/>. NCA: it keeps the CSMs of its children, nominates the worst receiver
/// (highest g = T·√p), asks it for per-packet ACKs and runs the window over them; a nominee that leaves, stops
/// answering (<see cref="AerOptions.NomineeFailureTimeouts"/> timeouts in a row) or is overtaken by a worse receiver is
/// replaced. With no nominee it sends at <see cref="AerOptions.UnnominatedRate"/>.
/// </summary>
public sealed class AerSender : AerRole, IDatagramFeed
{
    private readonly IAerFeed _feed;
    private readonly NetAddress[]? _children;
    private readonly Queue<(long Seq, NetAddress To)> _repairs = new();
    private readonly HoldoffTable _repairHoldoff = new();
    private readonly NomineeSelection _selection;
    private readonly Alarm _spmAlarm;
    private readonly Alarm _csmAlarm;
    private readonly Alarm _rtoAlarm;
    private readonly Alarm _trickleAlarm;
    private IFeedChannel? _channel;
    private RttEstimator _rtt;
    private long _seq;
    private long _spmSeq;
    private NetAddress? _nominee;
    private uint _epoch;
    private double _nomineeG;
    private int _consecutiveTimeouts;
    private int _backoff = 1;
    private TimeSpan _lastActivity;
    private TimeSpan _nextTrickle;

    internal AerSender(AerLayer layer, uint session, NetAddress group, IAerFeed feed, IReadOnlyList<NetAddress>? children) : base(layer, session, group)
    {
        _feed = feed ?? throw new ArgumentNullException(nameof(feed));
        if (children is not null && children.Count > Options.MaxChildren)
        {
            throw new ArgumentException($"A source takes at most AerOptions.MaxChildren ({Options.MaxChildren}) children, got {children.Count}.", nameof(children));
        }

        _children = children?.ToArray();
        Cache = new RepairCache(Options.SourceCacheBytes);
        _selection = new NomineeSelection(Options.MaxCsmEntries, Options.CsmTimeout);
        Window = new NcaWindow(Options.InitialThreshold, Options.MaxWindow);
        _rtt = NewRtt();
        _spmAlarm = new Alarm(_ => OnSpmTimer());
        _csmAlarm = new Alarm(_ => OnCsmTimer());
        _rtoAlarm = new Alarm(_ => OnRto());
        _trickleAlarm = new Alarm(_ => _channel?.Signal());
    }

    public RepairCache Cache { get; }

    public NcaWindow Window { get; }

    /// <summary>The last sequence number sent.</summary>
    public long HighestSent => _seq;

    public NetAddress? Nominee => _nominee;

    /// <summary>Every nominee in order (diagnostics and tests).</summary>
    public List<NetAddress> NomineeHistory { get; } = new();

    /// <summary>The largest payload a pull may write.</summary>
    public int MaxPayload => Transport.MaxDatagramSize - AerWire.DataHeaderSize;

    /// <summary>The application has payloads again: pull. Core thread (a downcall from other threads).</summary>
    public void Signal() => _channel?.Signal();

    internal override void Start()
    {
        _channel = Transport.RegisterFeed(this);
        _nextTrickle = Now;
        Scheduler.Schedule(_spmAlarm, Now);
        Scheduler.ScheduleAfter(_csmAlarm, Options.CsmInterval);
    }

    private protected override void OnStop()
    {
        if (_nominee is { } old)
        {
            SendNominate(old, stop: true);
        }

        Scheduler.Cancel(_spmAlarm);
        Scheduler.Cancel(_csmAlarm);
        Scheduler.Cancel(_rtoAlarm);
        Scheduler.Cancel(_trickleAlarm);
        _channel?.Dispose();
        Cache.Clear();
    }

    public int Pull(Span<byte> buffer, out NetAddress to)
    {
        to = Group;
        if (Stopped)
        {
            return 0;
        }

        while (_repairs.TryDequeue(out var repair))
        {
            int n = Cache.CopyTo(repair.Seq, buffer);
            if (n > 0)
            {
                AerWire.SetRepair(buffer, repair: true);
                to = repair.To;
                Counters.RepairsSent++;
                return n;
            }

            Counters.Unrecoverable++; // evicted since it was asked for
        }

        var now = Now;
        bool nominated = Options.CongestionControl && _nominee is not null;
        if (nominated && !Window.CanSend)
        {
            return 0; // an ACK or a timeout signals the feed again
        }

        if (Options.CongestionControl && !nominated && now < _nextTrickle)
        {
            Scheduler.Schedule(_trickleAlarm, _nextTrickle);
            return 0;
        }

        int length = _feed.Pull(buffer[AerWire.DataHeaderSize..]);
        if (length <= 0)
        {
            return 0;
        }

        length = Math.Min(length, buffer.Length - AerWire.DataHeaderSize);
        long seq = ++_seq;
        int total = AerWire.WriteDataHeader(buffer, new AerData(Session, seq, now.Ticks, Repair: false), length);
        long before = Cache.Evictions;
        Cache.Add(seq, buffer[..total]);
        Counters.CacheEvictions += Cache.Evictions - before;
        Counters.DataSent++;
        if (nominated)
        {
            Window.OnSent(seq);
            _lastActivity = now;
            ArmRto();
        }
        else if (Options.CongestionControl)
        {
            var step = TimeSpan.FromTicks((long)(TimeSpan.TicksPerSecond / Options.UnnominatedRate));
            _nextTrickle = (_nextTrickle > now ? _nextTrickle : now) + step;
        }

        return total;
    }

    private protected override void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now)
    {
        switch (header.Type)
        {
            case AerWire.NakType:
                if (!AerWire.TryReadNak(header, datagram, out var nak) || nak.Downstream || nak.Seq > _seq)
                {
                    Layer.Malformed(from, header.Type);
                }
                else
                {
                    OnNak(from, nak.Seq, now);
                }

                break;
            case AerWire.CsmType:
                if (!AerWire.TryReadCsm(header, datagram, out var csm))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (!_selection.OnCsm(from, csm, now))
                {
                    Counters.Drops.Increment(Core.Diagnostics.DropReason.ReceiveBufferFull);
                }
                else if (csm.Leaving && csm.Receiver == _nominee)
                {
                    _nominee = null;
                    Reconsider(now);
                }

                break;
            case AerWire.AckType:
                if (!AerWire.TryReadAck(header, datagram, out _, out uint epoch, out long seq, out long echo))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (from != _nominee || epoch != _epoch)
                {
                    NotAMember(); // a former nominee that has not heard it was replaced
                }
                else
                {
                    OnAck(seq, echo, now);
                }

                break;
            case AerWire.ProbeType:
                if (!AerWire.TryReadProbe(header, datagram, out _, out long ticks, out bool reply))
                {
                    Layer.Malformed(from, header.Type);
                }
                else if (reply)
                {
                    NotForThisNode();
                }
                else
                {
                    SendProbe(from, ticks, reply: true);
                }

                break;
            default:
                NotForThisNode();
                break;
        }
    }

    private void OnNak(NetAddress from, long seq, TimeSpan now)
    {
        Counters.NaksReceived++;
        if (!Cache.Contains(seq))
        {
            Counters.Unrecoverable++; // the SPMs tell receivers where repairs start
            return;
        }

        if (!_repairHoldoff.TryStart(seq, now, Options.RepairHoldoff))
        {
            return;
        }

        if (_children is null)
        {
            Enqueue(seq, Group); // §4.1: the sender re-multicasts the requested packet
        }
        else
        {
            bool fromChild = false;
            foreach (var child in _children)
            {
                Enqueue(seq, child);
                fromChild |= child == from;
            }

            if (!fromChild)
            {
                Enqueue(seq, from); // a receiver whose repair server failed
            }
        }

        _channel?.Signal();
    }

    private void Enqueue(long seq, NetAddress to)
    {
        if (_repairs.Count >= Options.RepairQueueLimit)
        {
            Counters.RepairQueueFull++;
            return;
        }

        _repairs.Enqueue((seq, to));
    }

    private void OnAck(long seq, long echoTicks, TimeSpan now)
    {
        Counters.AcksReceived++;
        if (echoTicks <= now.Ticks && echoTicks > 0)
        {
            _rtt.Sample(now - TimeSpan.FromTicks(echoTicks));
        }

        var result = Window.OnAck(seq);
        if (result == NcaEvent.None)
        {
            return;
        }

        _consecutiveTimeouts = 0;
        _backoff = 1;
        _lastActivity = now;
        ArmRto();
        if (Window.CanSend)
        {
            _channel?.Signal();
        }
    }

    private void ArmRto()
    {
        if (Window.InFlight == 0)
        {
            Scheduler.Cancel(_rtoAlarm);
            return;
        }

        Scheduler.Schedule(_rtoAlarm, _lastActivity + _rtt.Rto * _backoff);
    }

    private void OnRto()
    {
        if (_nominee is not { } nominee || Window.InFlight == 0)
        {
            return;
        }

        var now = Now;
        Window.OnTimeout();
        _consecutiveTimeouts++;
        _backoff = Math.Min(_backoff * 2, 64);
        if (_consecutiveTimeouts >= Options.NomineeFailureTimeouts)
        {
            // The nominee stopped answering (crashed, or cut off): pass it over and pick the next worst.
            _selection.Exclude(nominee, now + Options.CsmTimeout);
            _nominee = null;
            Reconsider(now);
        }
        else
        {
            SendNominate(nominee, stop: false); // the nomination may have been lost
        }

        _lastActivity = now;
        _channel?.Signal();
    }

    private void OnSpmTimer()
    {
        var lowest = Cache.Lowest ?? _seq + 1;
        var spm = new SourcePathMessage(Session, Local, Local, 0, ++_spmSeq, _seq, Math.Min(lowest, _seq + 1), 0);
        int n = AerWire.WriteSpm(Layer.Scratch, spm);
        Layer.Send(Group, n);
        Counters.SpmsSent++;
        Scheduler.ScheduleAfter(_spmAlarm, Options.SpmInterval);
    }

    private void OnCsmTimer()
    {
        var now = Now;
        Reconsider(now);
        if (_nominee is { } nominee)
        {
            SendNominate(nominee, stop: false); // renews the nomination before it lapses
        }

        Scheduler.ScheduleAfter(_csmAlarm, Options.CsmInterval);
    }

    /// <summary>§4.2.1: the nominee is the worst receiver; move only when the worst is clearly worse, or the nominee is gone.</summary>
    private void Reconsider(TimeSpan now)
    {
        if (!Options.CongestionControl)
        {
            return;
        }

        var worst = _selection.Worst(now);
        if (_nominee is { } current)
        {
            // The nominee's CSM may no longer reach us (its repair server forwards only the worst below it, and that
            // alternates between near-equal receivers): keep the g last seen for it, and move only for a clearly worse one.
            if (_selection.Find(current) is { } k)
            {
                _nomineeG = k.G;
            }

            if (worst is not { } w || w.Receiver == current || w.G <= _nomineeG * Options.NomineeSwitchRatio)
            {
                return;
            }
        }

        if (worst is not { } next)
        {
            if (_nominee is { } gone)
            {
                SendNominate(gone, stop: true);
                _nominee = null;
            }

            return;
        }

        if (next.Receiver == _nominee)
        {
            return;
        }

        if (_nominee is { } old)
        {
            SendNominate(old, stop: true);
        }

        _nominee = next.Receiver;
        _nomineeG = next.G;
        _epoch++;
        NomineeHistory.Add(next.Receiver);
        Counters.NomineeChanges++;
        Window.Reset(_seq + 1);
        _rtt = NewRtt();
        _consecutiveTimeouts = 0;
        _backoff = 1;
        Scheduler.Cancel(_rtoAlarm);
        SendNominate(next.Receiver, stop: false);
        _channel?.Signal();
    }

    private void SendNominate(NetAddress to, bool stop)
    {
        int n = AerWire.WriteNominate(Layer.Scratch, Session, _epoch, stop);
        Layer.Send(to, n);
    }

    private RttEstimator NewRtt() => new(Options.InitialRto, Options.RtoMin, Options.RtoMax);

    public override string Describe() =>
        $"source s{Session}: sent {_seq}, cache {Cache.Count} pkts/{Cache.Bytes} B, repairs queued {_repairs.Count}, nominee {_nominee?.ToString() ?? "none"}, W {Window.W:0.##}, thresh {Window.Thresh:0.##}, in flight {Window.InFlight}";
}
