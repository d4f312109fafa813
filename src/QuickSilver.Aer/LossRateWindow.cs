namespace QuickSilver.Aer;

/// <summary>
/// A receiver's loss-rate estimate p over a fixed-size sliding window of packets (NCA §4.2.1): each original
/// transmission that arrives, or that a later one shows to be missing, is one outcome; p is the missing fraction of the
/// last <c>size</c> outcomes. Packets that arrive out of order after being counted missing stay counted missing.
/// </summary>
public sealed class LossRateWindow
{
    private readonly bool[] _lost;
    private int _next;
    private int _filled;
    private int _lostCount;
    private long _highest;

    public LossRateWindow(int size)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(size, 1);
        _lost = new bool[size];
    }

    public double LossRate => _filled == 0 ? 0 : (double)_lostCount / _filled;

    /// <summary>An original transmission of <paramref name="seq"/> arrived.</summary>
    public void OnArrival(long seq)
    {
        if (seq <= _highest)
        {
            return;
        }

        long gap = Math.Min(seq - _highest - 1, _lost.Length);
        if (_highest == 0)
        {
            gap = 0; // the first packet heard starts the window
        }

        for (long i = 0; i < gap; i++)
        {
            Record(true);
        }

        Record(false);
        _highest = seq;
    }

    private void Record(bool lost)
    {
        if (_filled == _lost.Length)
        {
            if (_lost[_next])
            {
                _lostCount--;
            }
        }
        else
        {
            _filled++;
        }

        _lost[_next] = lost;
        if (lost)
        {
            _lostCount++;
        }

        _next = (_next + 1) % _lost.Length;
    }
}
