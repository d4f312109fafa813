namespace QuickSilver.Aer;

/// <summary>
/// A smoothed round-trip estimate and the retransmission timeout derived from it (Jacobson/Karels, as TCP New Reno
/// uses, which the seed names for NCA's timeout: "based on a smoothed estimate of the round-trip time"): SRTT ← 7/8·SRTT
/// + 1/8·R, RTTVAR ← 3/4·RTTVAR + 1/4·|SRTT − R|, RTO = SRTT + 4·RTTVAR, clamped.
/// </summary>
public sealed class RttEstimator(TimeSpan initialRto, TimeSpan rtoMin, TimeSpan rtoMax)
{
    private double _srtt;
    private double _rttvar;

    public bool HasSample { get; private set; }

    public TimeSpan Smoothed => HasSample ? TimeSpan.FromTicks((long)_srtt) : TimeSpan.Zero;

    public TimeSpan Rto
    {
        get
        {
            if (!HasSample)
            {
                return initialRto;
            }

            var rto = TimeSpan.FromTicks((long)(_srtt + 4 * _rttvar));
            return rto < rtoMin ? rtoMin : rto > rtoMax ? rtoMax : rto;
        }
    }

    public void Sample(TimeSpan rtt)
    {
        if (rtt < TimeSpan.Zero)
        {
            return;
        }

        double r = rtt.Ticks;
        if (!HasSample)
        {
            _srtt = r;
            _rttvar = r / 2;
            HasSample = true;
            return;
        }

        _rttvar = 0.75 * _rttvar + 0.25 * Math.Abs(_srtt - r);
        _srtt = 0.875 * _srtt + 0.125 * r;
    }
}
