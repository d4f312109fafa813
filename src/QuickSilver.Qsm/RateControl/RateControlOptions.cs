using QuickSilver.Core;

namespace QuickSilver.Qsm.RateControl;

/// <summary>
/// Parameters of QSM's rate control (§2.4). Paper defaults where it gives them (k = 10, Δ = 1 s, ρ = 0.5);
/// the rest (λ, μ_min, the credit sizes, α's bounds) are QuickSilver's choices, documented in docs/qsm.md.
/// </summary>
public sealed record RateControlOptions
{
    /// <summary>k: samples in the receive-rate moving average.</summary>
    public int Samples { get; init; } = 10;

    /// <summary>Δ: length of one rate sample.</summary>
    public TimeSpan SampleInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>λ: growth coefficient in μ_snd = max(μ_min, (1 + λ) μ_rec). The paper gives none; 0.5 is ours: with
    /// μ_rec a 10-sample moving average of 1 s samples, a greedy sender's rate grows only about 1.7 % a second at
    /// λ = 0.1 and about 8 % at 0.5 (docs/qsm.md).</summary>
    public double Growth { get; init; } = 0.5;

    /// <summary>Loss fraction (of the worst member, over its last k samples) above which the sender stops growing and
    /// backs off to (1 − loss)·μ_rec. Ours, beyond the paper (docs/qsm.md); 1 turns it off.</summary>
    public double LossThreshold { get; init; } = 0.02;

    /// <summary>μ_min: packets per second a sender may always use (and starts with).</summary>
    public double MinRate { get; init; } = 1000;

    /// <summary>ρ: inertia of the adaptive adjustment α ← α + ρ (μ_snd / μ'_snd − 1).</summary>
    public double Inertia { get; init; } = 0.5;

    /// <summary>Bounds of α, the multiplier the credit scheme applies to μ_snd.</summary>
    public double MinAlpha { get; init; } = 0.5;

    public double MaxAlpha { get; init; } = 4;

    /// <summary>C: size of the credit pool (the largest burst).</summary>
    public double Credits { get; init; } = 200;

    /// <summary>C_low: below this many credits a refill timer is set.</summary>
    public double CreditsLow { get; init; } = 50;

    /// <summary>C_high: refills aim for this level.</summary>
    public double CreditsHigh { get; init; } = 150;

    /// <summary>Δ_max: most credits one refill may add, to limit burstiness.</summary>
    public double MaxRefill { get; init; } = 50;

    public void Validate()
    {
        OptionChecks.InRange(Samples, 1, 1000, $"RateControlOptions.{nameof(Samples)}");
        OptionChecks.Positive(SampleInterval, $"RateControlOptions.{nameof(SampleInterval)}");
        OptionChecks.InRange(Growth, 0, 10, $"RateControlOptions.{nameof(Growth)}");
        OptionChecks.InRange(LossThreshold, 0, 1, $"RateControlOptions.{nameof(LossThreshold)}");
        OptionChecks.InRange(MinRate, 1, 1e9, $"RateControlOptions.{nameof(MinRate)}");
        OptionChecks.InRange(Inertia, 0, 10, $"RateControlOptions.{nameof(Inertia)}");
        OptionChecks.InRange(MinAlpha, 0.01, 100, $"RateControlOptions.{nameof(MinAlpha)}");
        OptionChecks.InRange(MaxAlpha, MinAlpha, 100, $"RateControlOptions.{nameof(MaxAlpha)}");
        OptionChecks.InRange(Credits, 1, 1e9, $"RateControlOptions.{nameof(Credits)}");
        OptionChecks.InRange(CreditsHigh, 1, Credits, $"RateControlOptions.{nameof(CreditsHigh)}");
        OptionChecks.InRange(CreditsLow, 0, CreditsHigh, $"RateControlOptions.{nameof(CreditsLow)}");
        OptionChecks.InRange(MaxRefill, 1, Credits, $"RateControlOptions.{nameof(MaxRefill)}");
    }
}
