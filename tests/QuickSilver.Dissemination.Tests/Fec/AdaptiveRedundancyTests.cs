using QuickSilver.Dissemination.Fec;

namespace QuickSilver.Dissemination.Tests.Fec;

public class AdaptiveRedundancyTests
{
    private static AdaptiveRedundancy Make(int halfLife = 2_000) => new(new AdaptiveRedundancyOptions { HalfLife = halfLife }, RedundancyRule.Paper);

    /// <summary>Feeds the estimator what a server would see: clients losing each of n = k + m packets with probability
    /// p, silent when they lost at most m, NAKing the packets still lacking otherwise.</summary>
    private static void Feed(AdaptiveRedundancy rule, Random random, double p, int k, int m, int clients, int transmissions)
    {
        for (int t = 0; t < transmissions; t++)
        {
            int silent = 0;
            for (int c = 0; c < clients; c++)
            {
                int lost = 0;
                for (int i = 0; i < k + m; i++)
                {
                    lost += random.NextDouble() < p ? 1 : 0;
                }

                if (lost > m)
                {
                    rule.ObserveNak(k + m, m, lost - m);
                }
                else
                {
                    silent++;
                }
            }

            rule.ObserveSilent(k + m, m, silent);
        }
    }

    [Fact]
    public void NothingReportedMeansNoRepair()
    {
        var rule = Make();
        Assert.Equal(0, rule.RepairCount(40, 4));
        Feed(rule, new Random(1), 0, 40, 0, 4, 500);
        Assert.Equal(0.0, rule.LossEstimate);
        Assert.Equal(0, rule.RepairCount(40, 4));
        Assert.Equal(0, rule.RepairCount(60, 1_000));
    }

    [Fact]
    public void UncensoredLossIsEstimatedAndBuysRepair()
    {
        var rule = Make();
        Feed(rule, new Random(2), 0.02, 40, 0, 4, 500);
        Assert.InRange(rule.LossEstimate, 0.015, 0.027);
        int m = rule.RepairCount(40, 4);
        Assert.InRange(m, 1, 4);
        Assert.True(rule.RepairCount(40, 100) >= m, "more requesters never get fewer repair packets");
    }

    /// <summary>Silences at m &gt; 0 only say "lost at most m"; counting them as "lost nothing" would put the estimate
    /// near 0.005 here (only the excess over m shows), and the redundancy would collapse.</summary>
    [Fact]
    public void CensoredSilencesDoNotBiasTheEstimateTowardsZero()
    {
        var rule = Make();
        Feed(rule, new Random(3), 0.05, 40, 3, 4, 1_000);
        Assert.InRange(rule.LossEstimate, 0.035, 0.07);
        Assert.True(rule.RepairCount(40, 4) >= 3);
    }

    [Fact]
    public void OldLossIsForgottenWhenNothingIsLostAnyMore()
    {
        var rule = Make(halfLife: 100);
        Feed(rule, new Random(4), 0.05, 40, 0, 4, 200);
        int m = rule.RepairCount(40, 4);
        Assert.True(m > 0);
        Feed(rule, new Random(5), 0, 40, m, 4, 1_000);
        Assert.Equal(0.0, rule.LossEstimate);
        Assert.Equal(0, rule.RepairCount(40, 4));
    }

    [Fact]
    public void TheSeedsCapBoundsTheRepair()
    {
        var rule = new AdaptiveRedundancy(new AdaptiveRedundancyOptions { NakCostPackets = 1_000 }, new RedundancyRule { CapPercent = 10 });
        Feed(rule, new Random(6), 0.1, 40, 0, 4, 200);
        Assert.Equal(4, rule.RepairCount(40, 4));          // ⌊40 · 10 / 100⌋
        var wide = new AdaptiveRedundancy(new AdaptiveRedundancyOptions { NakCostPackets = 1_000 }, RedundancyRule.Paper);
        Feed(wide, new Random(7), 0.1, 40, 0, 4, 200);
        Assert.True(wide.RepairCount(250, 4) <= 5);        // 255 − k
        Assert.True(wide.RepairCount(40, 4) <= 48);        // ⌊1.2 · 40⌋
    }

    [Fact]
    public void HostileObservationsAreIgnored()
    {
        var rule = Make();
        rule.ObserveNak(300, 0, 5);     // more than 255 packets
        rule.ObserveNak(40, 0, 0);      // a NAK lacking nothing
        rule.ObserveNak(40, 10, 35);    // lost more than were sent
        rule.ObserveNak(44, 4, 40);     // the whole page: not listening, not packet loss
        rule.ObserveSilent(40, 40, 4);  // repair not below packets
        rule.ObserveSilent(40, 0, -1);
        Assert.Equal(0.0, rule.LossEstimate);
    }

    [Fact]
    public void OptionsAreValidatedByName()
    {
        Assert.Equal("NakCostPackets", Assert.Throws<ArgumentOutOfRangeException>(() => new AdaptiveRedundancyOptions { NakCostPackets = -1 }.Validate()).ParamName);
        Assert.Equal("ResolveAfter", Assert.Throws<ArgumentOutOfRangeException>(() => new AdaptiveRedundancyOptions { ResolveAfter = TimeSpan.Zero }.Validate()).ParamName);
        Assert.Equal("HalfLife", Assert.Throws<ArgumentOutOfRangeException>(() => new AdaptiveRedundancyOptions { HalfLife = 0 }.Validate()).ParamName);
    }
}
