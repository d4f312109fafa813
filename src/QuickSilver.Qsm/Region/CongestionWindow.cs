namespace QuickSilver.Qsm.Region;

/// <summary>
/// The sender's congestion window in receiver-window mode (<see cref="RegionOptions.CongestionControl"/>, docs/qsm.md
/// "Congestion control"): a cap, in bytes beyond the slowest partition's reported position, under the receivers' own
/// windows. A receiver's window says what it will buffer; this says what it really takes: a window larger than a
/// receiver's socket queue (or a receiver whose CPU falls behind) overflows the queue on every burst, and the repairs
/// that follow cost more than the burst gained.
/// </summary>
/// <remarks>
/// <para>The signal is explicit, like ECN: a member whose receive queue dropped datagrams for being full (the kernel's
/// count, <c>SO_MEMINFO</c> on Linux; the simulated node's queue) sets the <i>overflowed</i> flag on its next report of
/// each stream, and partition leaders pass it on. Loss alone is not a signal: in a group every packet is lost by some
/// member far more often than by any one (1 % random loss at 25 members is 22 % of packets), and a controller that cut
/// on loss closed its window under random loss (121 against 4,095 messages a second, in simulation).</para>
/// <para>A <b>round</b> is a round trip: it ends when the slowest partition's position passes the bytes that had been
/// sent when it began. <b>Open start</b> (the default): the window starts at its ceiling, so until a receiver
/// overflows only the receivers' windows limit the sender (a window smaller than what reports clock, with members
/// reporting every eighth of their own window, would hold a lone message for a status interval). <b>Fast start</b>
/// (with <see cref="RegionOptions.InitialCongestionWindowBytes"/> set): from there the window doubles every round in
/// which the sender used it up, until the first overflow. <b>Decrease</b>: a round with an overflow signal sets it to
/// half of what was in flight (or half of itself, if less), once per round, never below the floor. <b>Recovery</b>:
/// after that, a round without one in which the window was used up grows it by an eighth, up to the ceiling.</para>
/// </remarks>
internal sealed class CongestionWindow
{
    private readonly ulong _min;
    private readonly ulong _max;
    private bool _fastStart = true;
    private ulong _roundEnd;
    private bool _roundOverflowed;
    private bool _roundLimited;

    /// <param name="initial">The starting window; 0 starts open (at <paramref name="max"/>), with no fast start.</param>
    public CongestionWindow(ulong initial, ulong min, ulong max)
    {
        _min = min;
        _max = Math.Max(min, max);
        _fastStart = initial > 0;
        Window = initial == 0 ? _max : Math.Clamp(initial, _min, _max);
    }

    /// <summary>Bytes the sender may have beyond the slowest partition's position.</summary>
    public ulong Window { get; private set; }

    /// <summary>Rounds that ended with an overflow signal (each halved the window once).</summary>
    public long Decreases { get; private set; }

    /// <summary>Overflow signals received (reports with the flag).</summary>
    public long Signals { get; private set; }

    /// <summary>Whether the window is still doubling (no overflow seen yet).</summary>
    public bool InFastStart => _fastStart;

    /// <summary>A report said some receiver's queue overflowed.</summary>
    public void OnOverflow()
    {
        Signals++;
        _roundOverflowed = true;
    }

    /// <summary>The sender wanted to send and the window stopped it (only then may it grow).</summary>
    public void OnLimited() => _roundLimited = true;

    /// <summary>The slowest partition's position is now at <paramref name="position"/> bytes of the stream, of
    /// <paramref name="sent"/> sent: ends the round if it passed the round's end.</summary>
    public void OnProgress(ulong position, ulong sent)
    {
        if (position < _roundEnd)
        {
            return;
        }

        if (_roundOverflowed)
        {
            _fastStart = false;
            Decreases++;
            ulong inFlight = sent > position ? sent - position : 0;
            Window = Math.Max(_min, Math.Min(Window, Math.Max(inFlight, _min)) / 2);
        }
        else if (_roundLimited)
        {
            ulong grown = _fastStart ? Window * 2 : Window + Math.Max(Window / 8, 1);
            Window = Math.Min(_max, grown);
        }

        _roundEnd = Math.Max(sent, position + 1);
        _roundOverflowed = false;
        _roundLimited = false;
    }
}
