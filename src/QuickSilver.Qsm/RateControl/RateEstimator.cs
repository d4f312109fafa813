namespace QuickSilver.Qsm.RateControl;

/// <summary>
/// A k-sample moving average of an event rate over fixed intervals Δ (QSM §2.4): receivers use it for μ_rec^(i), the
/// rate of new, previously unseen packets; senders for μ'_snd, their actual sending rate. The owner calls
/// <see cref="Count"/> per event and <see cref="CloseSample"/> every Δ (from an alarm). No allocation after construction.
/// </summary>
internal sealed class RateEstimator
{
    private readonly double[] _samples;
    private readonly double _intervalSeconds;
    private long _current;
    private int _next;
    private int _filled;
    private double _sum;

    public RateEstimator(int samples, TimeSpan interval)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(samples, 1);
        if (interval <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(nameof(interval), interval, "The sample interval must be positive.");
        }

        _samples = new double[samples];
        _intervalSeconds = interval.TotalSeconds;
    }

    /// <summary>The smoothed rate in events per second (0 until the first sample closes).</summary>
    public double Rate => _filled == 0 ? 0 : _sum / _filled;

    /// <summary>Events counted in the sample that is still open.</summary>
    public long Pending => _current;

    public void Count(long events = 1) => _current += events;

    /// <summary>Ends the current interval: its rate becomes the newest sample, replacing the oldest once k are held.</summary>
    public void CloseSample()
    {
        double rate = _current / _intervalSeconds;
        _current = 0;
        if (_filled == _samples.Length)
        {
            _sum -= _samples[_next];
        }
        else
        {
            _filled++;
        }

        _samples[_next] = rate;
        _sum += rate;
        _next = (_next + 1) % _samples.Length;
    }
}
