using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>
/// What a receiver and a repair server share toward the source (§4.1, §4.1.1): the group membership; the
/// <see cref="SourcePathTracker"/> that admits data and SPMs only from the current upstream path; the
/// <see cref="NakScheduler"/> for the role's own losses, whose NAKs go to the nearest upstream (passing over one that
/// stopped repairing) and which a NAK subcast by that upstream suppresses; and, every <see cref="AerOptions.CsmInterval"/>,
/// a probe of the round trip to the upstream, whose reply sets the NAK timers. The role (<see cref="AerReceiver"/>,
/// <see cref="RepairServer"/>) keeps what differs and is called back for it. (A base class between <see cref="AerRole"/>
/// and the two would have to be public, as they are; this keeps the public types as they were.) Core thread only.
/// </summary>
internal sealed class UpstreamLink
{
    private readonly AerLayer _layer;
    private readonly AerRole _role;
    private readonly Func<long, bool> _suppressible;
    private readonly Action<TimeSpan, (NetAddress Address, int Depth, int PathRttMicros)> _onCsmTimer;
    private readonly Alarm _csmAlarm;
    private NetAddress _rttTarget;

    /// <param name="nakUpstream">The scheduler's NAK callback (at least <see cref="NakUpstream"/>).</param>
    /// <param name="suppressible">Whether a downstream NAK from the upstream for this packet suppresses ours (we lack it).</param>
    /// <param name="onCsmTimer">The role's part of each CSM tick, after the probe, before the next tick is scheduled.</param>
    internal UpstreamLink(AerLayer layer, AerRole role, NetAddress source, int nakCapacity, TimeSpan nakDelayMax, Action<long> nakUpstream,
        Func<long, bool> suppressible, Action<TimeSpan, (NetAddress Address, int Depth, int PathRttMicros)> onCsmTimer)
    {
        _layer = layer;
        _role = role;
        _suppressible = suppressible;
        _onCsmTimer = onCsmTimer;
        Tracker = new SourcePathTracker(source, Options.SpmTimeout);
        Naks = new NakScheduler(Scheduler, layer.Random, nakCapacity, nakUpstream) { DelayMax = nakDelayMax, RetryTimeout = Options.NakRetryMin, Expired = () => Counters.NakTimeouts++ };
        _csmAlarm = new Alarm(_ => OnCsmTimer());
        Rtt = NewRtt();
    }

    public SourcePathTracker Tracker { get; }

    public NakScheduler Naks { get; }

    /// <summary>The round trip to the current upstream (reset when the upstream changes).</summary>
    public RttEstimator Rtt { get; private set; }

    private AerOptions Options => _layer.Options;

    private AerCounters Counters => _layer.Counters;

    private IAlarmScheduler Scheduler => _layer.Context.Scheduler;

    public void Start()
    {
        _layer.Context.Transport.JoinGroup(_role.Group);
        Scheduler.ScheduleAfter(_csmAlarm, TimeSpan.FromTicks((long)(_layer.Random.NextDouble() * Options.CsmInterval.Ticks)));
    }

    public void Stop()
    {
        Scheduler.Cancel(_csmAlarm);
        Naks.Clear();
        _layer.Context.Transport.LeaveGroup(_role.Group);
    }

    /// <summary>Reads a data packet and admits it only from the upstream path (counting an admitted repair); counts it
    /// dropped otherwise.</summary>
    public bool AdmitData(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now, out AerData data, out ReadOnlySpan<byte> payload)
    {
        if (!AerWire.TryReadData(header, datagram, out data, out payload))
        {
            _layer.Malformed(from, header.Type);
            return false;
        }

        if (!Tracker.IsUpstream(from, now))
        {
            _role.NotAMember();
            return false;
        }

        if (data.Repair)
        {
            Counters.RepairsReceived++;
        }

        return true;
    }

    /// <summary>Reads an SPM and lets the tracker take it; counts it dropped when malformed or refused.</summary>
    public bool AdmitSpm(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now, out SourcePathMessage spm)
    {
        if (!AerWire.TryReadSpm(header, datagram, out spm))
        {
            _layer.Malformed(from, header.Type);
            return false;
        }

        if (!Tracker.OnSpm(from, spm, now))
        {
            _role.NotAMember();
            return false;
        }

        return true;
    }

    /// <summary>A NAK subcast by the upstream: it is fetching <paramref name="seq"/>, so ours for it waits (§4.1).</summary>
    public void OnDownstreamNak(NetAddress from, long seq, TimeSpan now)
    {
        if (!Tracker.IsUpstream(from, now))
        {
            _role.NotAMember();
        }
        else if (!Options.NakSuppression)
        {
            Naks.ResetConsecutiveTimeouts(); // not suppressed, but the upstream is alive and fetching
        }
        else if (_suppressible(seq) && Naks.Suppress(seq))
        {
            Counters.NaksSuppressed++;
        }
    }

    /// <summary>Reads a probe and takes a reply to ours; true for a probe request (from below), which is the role's to
    /// answer or drop.</summary>
    public bool AdmitProbeRequest(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now, out long ticks)
    {
        if (!AerWire.TryReadProbe(header, datagram, out _, out ticks, out bool reply))
        {
            _layer.Malformed(from, header.Type);
            return false;
        }

        if (reply)
        {
            OnProbeReply(from, ticks, now);
            return false;
        }

        return true;
    }

    /// <summary>A reply to our probe of the upstream: a round-trip sample, which resets the NAK timers.</summary>
    private void OnProbeReply(NetAddress from, long ticks, TimeSpan now)
    {
        if (from == _rttTarget && ticks <= now.Ticks)
        {
            Rtt.Sample(now - TimeSpan.FromTicks(ticks));
            SetRetryTimers(now);
        }
        else
        {
            _role.NotForThisNode();
        }
    }

    /// <summary>NAKs <paramref name="seq"/> to the nearest upstream, passing over one whose NAKs kept timing out.</summary>
    public void NakUpstream(long seq, TimeSpan now)
    {
        var up = Tracker.Upstream(now);
        if (Naks.ConsecutiveTimeouts >= Options.UpstreamFailureNaks && up.Depth > 0)
        {
            // The repair server above stopped repairing: pass it over, NAK the next one up (in the end the source).
            Tracker.Blacklist(up.Address, now + Options.UpstreamBlacklist);
            Naks.ResetConsecutiveTimeouts();
            Counters.UpstreamFailovers++;
            up = Tracker.Upstream(now);
        }

        _role.SendNak(up.Address, seq, downstream: false);
        Counters.NaksSent++;
    }

    private void OnCsmTimer()
    {
        var now = Scheduler.Now;
        var up = Tracker.Upstream(now);
        if (up.Address != _rttTarget)
        {
            _rttTarget = up.Address;
            Rtt = NewRtt();
        }

        _role.SendProbe(up.Address, now.Ticks, reply: false);
        _onCsmTimer(now, up);
        Scheduler.ScheduleAfter(_csmAlarm, Options.CsmInterval);
    }

    /// <summary>NAK timers: a NAK answered by the upstream takes a round trip to it; one the upstream is fetching from
    /// further up (we were suppressed) takes the round trip from the source (the SPMs' path round trip plus ours).</summary>
    private void SetRetryTimers(TimeSpan now)
    {
        var up = Tracker.Upstream(now);
        var retry = TimeSpan.FromTicks((long)(Rtt.Smoothed.Ticks * Options.NakRetryRttFactor));
        Naks.RetryTimeout = retry > Options.NakRetryMin ? retry : Options.NakRetryMin;
        var full = TimeSpan.FromTicks((long)((Rtt.Smoothed.Ticks + up.PathRttMicros * 10L) * Options.NakRetryRttFactor));
        Naks.SuppressedRetryTimeout = full > Naks.RetryTimeout ? full : Naks.RetryTimeout;
    }

    private RttEstimator NewRtt() => new(Options.InitialRto, TimeSpan.FromMilliseconds(1), Options.RtoMax);
}
