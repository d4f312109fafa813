using QuickSilver.Core.Alarms;

namespace QuickSilver.Qsm.RateControl;

/// <summary>
/// A sender's rate control for one region (QSM §2.4). Inputs: μ_rec from the region's ACKs (formula 1 is computed by
/// the region, divided by the number of senders); outputs: whether a packet may be sent now.
/// <list type="bullet">
/// <item>Target: μ_snd = max(μ_min, (1 + λ) μ_rec) (formula 2).</item>
/// <item>Credits: each packet takes one credit from a pool of size C and may go only while credit is positive. Below
/// C_low a timer τ = min(C_high − c, Δ_max) / f(α) is set (formula 4); when it fires, ΔT·f(α) credits are added, ΔT being
/// the time that actually elapsed, and the timer is set again until C_high is reached.</item>
/// <item>Adaptive adjustment: every Δ, α ← α + ρ (μ_snd / μ'_snd − 1) (formula 3), with f(α) = α μ_snd the rate the
/// credits refill at and μ'_snd the measured sending rate; α stays within [MinAlpha, MaxAlpha].</item>
/// </list>
/// I/O-free: time and timers come from the <see cref="IAlarmScheduler"/>. When credit returns after running out,
/// <see cref="CreditAvailable"/> fires so the owner can re-activate its feed.
/// </summary>
internal sealed class RateController
{
    private readonly IAlarmScheduler _scheduler;
    private readonly RateControlOptions _options;
    private readonly RateEstimator _sent;
    private readonly Alarm _refill;
    private readonly Alarm _sample;
    private double _credits;
    private TimeSpan _lastRefill;
    private bool _waiting;

    public RateController(IAlarmScheduler scheduler, RateControlOptions? options = null)
    {
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _options = options ?? new RateControlOptions();
        _options.Validate();
        _sent = new RateEstimator(_options.Samples, _options.SampleInterval);
        _credits = _options.Credits;
        Alpha = 1;
        TargetRate = _options.MinRate;
        _refill = new Alarm(_ => Refill());
        _sample = new Alarm(_ => Sample());
        _scheduler.ScheduleAfter(_sample, _options.SampleInterval);
    }

    /// <summary>μ_rec last reported by the region (packets/s), or 0 before the first report.</summary>
    public double ReceiverRate { get; private set; }

    /// <summary>μ_snd: the rate this sender aims for.</summary>
    public double TargetRate { get; private set; }

    /// <summary>α of formula (3).</summary>
    public double Alpha { get; private set; }

    /// <summary>μ'_snd: the measured sending rate.</summary>
    public double ActualRate => _sent.Rate;

    public double Credits => _credits;

    /// <summary>Raised when a sender that ran out of credit may send again.</summary>
    public event Action? CreditAvailable;

    /// <summary>
    /// Applies a new μ_rec: formula (2), μ_snd = max(μ_min, (1+λ)·μ_rec), while the region's worst member loses at most
    /// <see cref="RateControlOptions.LossThreshold"/> of the packets; above it (an extension to the paper, docs/qsm.md),
    /// μ_snd = max(μ_min, (1 − loss)·μ_rec): no growth, and a back-off in proportion to the loss.
    /// </summary>
    public void OnReceiverRate(double receiverRate, double loss = 0)
    {
        if (!double.IsFinite(receiverRate) || receiverRate < 0 || !(loss >= 0 && loss <= 1))
        {
            return; // a malformed report changes nothing
        }

        ReceiverRate = receiverRate;
        ReportedLoss = loss;
        double factor = loss > _options.LossThreshold ? 1 - loss : 1 + _options.Growth;
        TargetRate = Math.Max(_options.MinRate, factor * receiverRate);
    }

    /// <summary>The worst member's loss fraction from the region's last ACK.</summary>
    public double ReportedLoss { get; private set; }

    /// <summary>Takes one credit if one is available. Returns false when the sender must wait for <see cref="CreditAvailable"/>.</summary>
    public bool TryConsume()
    {
        if (_credits <= 0)
        {
            _waiting = true;
            ArmRefill();
            return false;
        }

        _credits -= 1;
        _sent.Count();
        if (_credits < _options.CreditsLow)
        {
            ArmRefill();
        }

        return true;
    }

    private double RefillRate => Alpha * TargetRate;

    private void ArmRefill()
    {
        if (_refill.IsScheduled)
        {
            return;
        }

        double wanted = Math.Min(_options.CreditsHigh - _credits, _options.MaxRefill);
        var tau = TimeSpan.FromSeconds(Math.Max(wanted, 1) / RefillRate);
        _lastRefill = _scheduler.Now;
        _scheduler.ScheduleAfter(_refill, tau);
    }

    private void Refill()
    {
        var now = _scheduler.Now;
        double elapsed = (now - _lastRefill).TotalSeconds;
        _credits = Math.Min(_options.Credits, _credits + (elapsed * RefillRate));
        if (_credits < _options.CreditsHigh)
        {
            ArmRefill();
        }

        if (_waiting && _credits > 0)
        {
            _waiting = false;
            CreditAvailable?.Invoke();
        }
    }

    private void Sample()
    {
        bool busy = _sent.Pending > 0 || _waiting;
        _sent.CloseSample();
        double actual = _sent.Rate;

        // Adjust α only while the sender is actually trying to send; an idle sender's low rate says nothing about f.
        if (busy && actual > 0)
        {
            Alpha = Math.Clamp(Alpha + (_options.Inertia * ((TargetRate / actual) - 1)), _options.MinAlpha, _options.MaxAlpha);
        }

        _scheduler.ScheduleAfter(_sample, _options.SampleInterval);
    }
}
