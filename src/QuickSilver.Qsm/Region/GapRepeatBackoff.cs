namespace QuickSilver.Qsm.Region;

/// <summary>
/// When a report that names an open gap is repeated (<see cref="ReceiverStatus"/>): first
/// <see cref="RegionOptions.GapReportInterval"/> after the gap was last reported with the position it has now, then
/// twice as long each time the position has not moved, up to <see cref="RegionOptions.StatusInterval"/>; progress
/// starts it again from the first interval. A resend that was lost is still asked for again within a millisecond, but a
/// member whose gaps stay open (its receive queue overflowing, the sender's resends queued behind new data) stops
/// adding a report every millisecond to the load that keeps them open: without it, a window larger than the receive
/// queues turned 71- and 250-member simulated regions into a storm of repeats (docs/qsm.md, "Flow control").
/// </summary>
internal struct GapRepeatBackoff
{
    private ulong _position;
    private TimeSpan _interval;
    private TimeSpan _due;
    private TimeSpan _pulledAt; // when it was last pulled from its caching partition (GapPullDue)
    private int _pulls;

    /// <summary>Whether the report of a gap after <paramref name="position"/> goes again at <paramref name="now"/>; if so
    /// the next repeat is scheduled.</summary>
    public bool Due(ulong position, TimeSpan now, TimeSpan first, TimeSpan cap)
    {
        if (_interval == TimeSpan.Zero || position != _position)
        {
            _position = position;
            _interval = first;
            _due = now + first;
            _pulledAt = now;
            _pulls = 0;
            return true;
        }

        if (now < _due)
        {
            return false;
        }

        _interval = _interval * 2 < cap ? _interval * 2 : cap;
        _due = now + _interval;
        return true;
    }

    /// <summary>Whether the gap after <paramref name="position"/>, reported at least <paramref name="after"/> ago and not
    /// pulled within the last <paramref name="after"/>, should now be pulled straight from a replica of its caching
    /// partition; if so, counts the pull (<paramref name="attempt"/>: 0 for the first, to pick a different replica each
    /// time).</summary>
    public bool GapPullDue(ulong position, TimeSpan now, TimeSpan after, out int attempt)
    {
        attempt = _pulls;
        if (_interval == TimeSpan.Zero || position != _position || now - _pulledAt < after)
        {
            return false;
        }

        _pulledAt = now;
        _pulls++;
        return true;
    }

    /// <summary>When the next repeat falls due (<see cref="TimeSpan.MaxValue"/> before the first).</summary>
    public readonly TimeSpan NextDue => _interval == TimeSpan.Zero ? TimeSpan.MaxValue : _due;

    /// <summary>The gap closed, or a new view: the next gap starts from the first interval.</summary>
    public void Reset() => this = default;
}
