namespace QuickSilver.Aer;

/// <summary>
/// When a repair or a NAK subcast for a packet was last sent, so it is not repeated within a hold-off interval
/// (<see cref="AerOptions.RepairHoldoff"/>). A fixed array indexed by sequence number modulo its size: no allocation,
/// and an old entry overwritten by a newer packet only forgets a hold-off (one extra send), never blocks one.
/// </summary>
internal sealed class HoldoffTable(int size = 4096)
{
    private readonly long[] _seqs = new long[size];
    private readonly TimeSpan[] _times = new TimeSpan[size];

    /// <summary>True (and records <paramref name="now"/>) when <paramref name="seq"/> was not sent within <paramref name="holdoff"/>.</summary>
    public bool TryStart(long seq, TimeSpan now, TimeSpan holdoff)
    {
        int i = (int)((ulong)seq % (ulong)_seqs.Length);
        if (_seqs[i] == seq && now - _times[i] < holdoff)
        {
            return false;
        }

        _seqs[i] = seq;
        _times[i] = now;
        return true;
    }
}
