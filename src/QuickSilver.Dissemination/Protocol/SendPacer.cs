namespace QuickSilver.Dissemination.Protocol;

/// <summary>
/// Paces the server's data channels: one datagram per packet interval of each channel's cap, stretched to what the
/// server's core actually sends when it cannot keep the caps. A server asked for more than its core does (an uncapped
/// <c>qs files serve</c> on a busy machine) used to fall further and further behind the schedule it had announced,
/// seconds behind on a 200 MB run, so clients NAKed pages still queued at the server and the pages went out twice
/// (docs/dissemination.md, "Pacing to the achieved rate").
/// </summary>
/// <remarks>
/// Every data send is reported with the time it was due. Lateness up to <see cref="ServerOptions.MaxSendLag"/> is caught
/// up (a core descheduled for a few milliseconds sends what was due in a burst). Past it the channel <em>slips</em>:
/// the pacer takes the interval the core achieved over its window (every channel's datagrams since the last slip or
/// change, in the time since), gives each busy channel an equal share of it plus 5 % (so the schedule can be kept
/// again), and tells the channel to forgive its debt, moving its schedule, and the pages queued on it, later by the
/// lateness. One core sends every channel, so the rate is measured for all of them together: a channel measured alone
/// would take the core's whole rate for itself while it bursts. While the channels keep their schedules (within a
/// quarter of the limit) the interval shrinks back toward the cap every <see cref="ProbeAfter"/>: by 3 % first, then by
/// twice the last step, up to half, so the rate follows a core that frees up. Pages are announced at <see cref="Interval"/>, so a page's announced duration is what
/// its sending really takes.
/// </remarks>
internal sealed class SendPacer
{
    /// <summary>Time on schedule after which the interval shrinks toward the cap again.</summary>
    public static readonly TimeSpan ProbeAfter = TimeSpan.FromMilliseconds(100);

    /// <summary>The first probe after a slip shortens the interval by this fraction; each further probe on schedule
    /// doubles the fraction, up to <see cref="MaxProbeStep"/>: gentle near the rate that last slipped, fast far from it
    /// (a window that held a long descheduling of a loaded machine's process measures far less than the core does once
    /// it runs again: 0.2 MB/s a channel was seen; the rate is back within about a second).</summary>
    private const double FirstProbeStep = 0.03;

    private const double MaxProbeStep = 0.5;
    private double _probeStep = FirstProbeStep;

    /// <summary>Sends in a window before its rate is trusted (fewer: the debt is forgiven, the rate kept).</summary>
    private const int MinSample = 16;

    private readonly long _nominal;
    private readonly TimeSpan _maxLag;
    private readonly TimeSpan _tolerance;
    private readonly Func<int> _busyChannels;
    private double _interval;
    private TimeSpan _windowStart;
    private long _windowPackets;
    private TimeSpan _lastSent;

    /// <param name="nominal">A channel's packet interval at its cap.</param>
    /// <param name="maxLag"><see cref="ServerOptions.MaxSendLag"/>.</param>
    /// <param name="busyChannels">Channels with pages to send now (they share the core).</param>
    public SendPacer(TimeSpan nominal, TimeSpan maxLag, Func<int> busyChannels)
    {
        _nominal = nominal.Ticks;
        _interval = nominal.Ticks;
        _maxLag = maxLag;
        _tolerance = maxLag / 4;
        _busyChannels = busyChannels;
    }

    /// <summary>A channel's interval between datagrams now: its cap's, or longer while the core is short.</summary>
    public TimeSpan Interval => TimeSpan.FromTicks((long)Math.Ceiling(_interval));

    /// <summary>Times a channel fell more than <see cref="ServerOptions.MaxSendLag"/> behind.</summary>
    public long Slips { get; private set; }

    /// <summary>Schedule debt forgiven over all slips.</summary>
    public TimeSpan Forgiven { get; private set; }

    /// <summary>A channel starts sending after the server was idle: the measurement window starts at <paramref name="now"/>.</summary>
    public void Resume(TimeSpan now)
    {
        if (_busyChannels() == 0)
        {
            StartWindow(now);
        }
    }

    /// <summary>A datagram due at <paramref name="due"/> went out at <paramref name="now"/>. Returns the debt to forgive:
    /// zero, or the lateness when it passed the limit (the channel moves its schedule later by it).</summary>
    public TimeSpan OnSent(TimeSpan due, TimeSpan now)
    {
        var forgive = Account(due, now);
        _lastSent = now;
        return forgive;
    }

    private TimeSpan Account(TimeSpan due, TimeSpan now)
    {
        _windowPackets++;
        var late = now - due;
        if (late <= _tolerance)
        {
            // On schedule (a real core's alarms are always a little late): probe back toward the cap.
            if (_interval > _nominal && now - _windowStart >= ProbeAfter)
            {
                _interval = Math.Max(_nominal, _interval * (1 - _probeStep));
                _probeStep = Math.Min(MaxProbeStep, _probeStep * 2);
                StartWindow(now);
            }

            return TimeSpan.Zero;
        }

        if (late <= _maxLag)
        {
            return TimeSpan.Zero; // caught up in bursts
        }

        // Behind past the limit: the core sent this window's datagrams in this window's time, and no faster. The rate
        // is measured up to the send before this one: the gap just before this send may be one long stall of the
        // process (a loaded machine deschedules it for tens of milliseconds), which the forgiven debt already covers
        // and which says nothing of how fast the core sends once it runs; counted in, a 60 ms stall in an 80 ms window
        // cut the rate to a quarter (docs/dissemination.md, "The pacer read a stall as a slow core"). A core that is simply slow falls
        // behind send by send, so leaving out the last gap changes nothing for it. A window too short to tell (one
        // long pause of the core) forgives the debt and keeps the rate.
        long before = _windowPackets - 1;
        var elapsed = _lastSent - _windowStart;
        if (before >= MinSample && elapsed >= _maxLag)
        {
            double perChannel = elapsed.Ticks / (double)before * Math.Max(1, _busyChannels());
            _interval = Math.Max(_nominal, Math.Max(_interval, perChannel * 1.05));
        }

        StartWindow(now); // measured or not: the next window starts after the stall, so it never holds it
        _probeStep = FirstProbeStep;
        Slips++;
        Forgiven += late;
        return late;
    }

    private void StartWindow(TimeSpan now)
    {
        _windowStart = now;
        _windowPackets = 0;
    }
}
