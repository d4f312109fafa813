namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// How many repair packets a page gets when it is sent: the WebBase facility's variable redundancy, one per cent of
/// the page's packets per client requesting it, rounded down, capped at 120 % of the page (seed 001, §2.4 and §4,
/// Table 1: "0.01R (up to 1.20)").
/// </summary>
/// <remarks>
/// <para>repair = min(⌊R · k · <see cref="PercentPerRequester"/> / 100⌋, ⌊k · <see cref="CapPercent"/> / 100⌋, 255 − k)
/// for a page of k source packets requested by R clients when it is sent. With the paper's defaults and its
/// 30,000-byte pages of 60 packets: one client adds nothing, two add the 61st packet (the paper's own example),
/// fifteen add nine, three times what five add (its other example), and from 120 clients on the cap holds at 72,
/// "no page requires more than 132 packets". The arithmetic is in integers: 0.01 · R · k in floating point rounds
/// down one short for some products (for R = 29, k = 100 a double gives 28.999999999999996, and the answer is 29).</para>
/// <para>The last term keeps n = k + repair within the code's 255 packets; with 500-byte packets it first binds above
/// the paper's largest page: 58,000 bytes is 116 packets, and 116 + ⌊1.2 · 116⌋ = 255 exactly, which is why the seed
/// says that page size is "a limit imposed by error correction as used".</para>
/// <para>Where the seed is ambiguous, this rule decides: k is the page's own packet count (a short last page of a
/// file gets 1 % of its own packets per client, and its own 120 % cap, not the full page's); R counts the clients
/// requesting the page at the moment it is scheduled to go out (the seed's "at the time the item is sent"), which
/// the caller supplies.</para>
/// </remarks>
public sealed class RedundancyRule
{
    /// <summary>The paper's rule: 1 % per requesting client, capped at 120 %.</summary>
    public static RedundancyRule Paper { get; } = new();

    /// <summary>Repair packets added per requesting client, as a percentage of the page's packets (paper: 1, i.e. 0.01).</summary>
    public int PercentPerRequester { get; init; } = 1;

    /// <summary>The most repair packets a page gets, as a percentage of its packets (paper: 120, i.e. 1.2).</summary>
    public int CapPercent { get; init; } = 120;

    /// <summary>Throws if an option is out of range, naming it.</summary>
    /// <exception cref="ArgumentOutOfRangeException">A negative percentage.</exception>
    public void Validate()
    {
        if (PercentPerRequester < 0)
        {
            throw new ArgumentOutOfRangeException(nameof(PercentPerRequester), PercentPerRequester, "RedundancyRule.PercentPerRequester must not be negative.");
        }

        if (CapPercent < 0)
        {
            throw new ArgumentOutOfRangeException(nameof(CapPercent), CapPercent, "RedundancyRule.CapPercent must not be negative.");
        }
    }

    /// <summary>The repair packets for a page of <paramref name="sourcePackets"/> packets that
    /// <paramref name="requesters"/> clients are waiting for.</summary>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="sourcePackets"/> is not in [1, 255], or
    /// <paramref name="requesters"/> is negative.</exception>
    public int RepairCount(int sourcePackets, int requesters)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(sourcePackets, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(sourcePackets, ReedSolomon.MaxPackets);
        ArgumentOutOfRangeException.ThrowIfNegative(requesters);
        long wanted = (long)requesters * sourcePackets * PercentPerRequester / 100;
        long cap = (long)sourcePackets * CapPercent / 100;
        return (int)Math.Min(Math.Min(wanted, cap), ReedSolomon.MaxPackets - sourcePackets);
    }
}
