using CsCheck;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Dissemination.Tests.Fec;

public class RedundancyRuleTests
{
    private static readonly RedundancyRule Paper = RedundancyRule.Paper;

    [Theory]
    [InlineData(60, 0, 0)]
    [InlineData(60, 1, 0)]      // one client: ⌊0.6⌋, nothing added
    [InlineData(60, 2, 1)]      // "at least two clients ... to add the 61st packet"
    [InlineData(60, 5, 3)]
    [InlineData(60, 15, 9)]     // "fifteen clients gets three times the redundant packets of ... five"
    [InlineData(60, 119, 71)]
    [InlineData(60, 120, 72)]   // the cap is reached at 120 clients (§4.2)
    [InlineData(60, 5000, 72)]  // "no page requires more than 132 packets"
    [InlineData(100, 29, 29)]   // 0.01 · 29 · 100 is 28.999999999999996 in floating point
    [InlineData(50, 58, 29)]    // and 0.01 · 58 · 50 too
    [InlineData(116, 1000, 139)] // 58,000 B page: 116 + 139 = 255, the code's limit
    [InlineData(117, 1000, 138)] // 1.2 · 117 = 140 would pass 255; the code's limit binds
    [InlineData(255, 1000, 0)]
    [InlineData(10, 40, 4)]     // a short last page: 1 % of its own packets per client
    [InlineData(10, 1000, 12)]  // and its own cap
    public void ThePapersRuleGivesThePapersNumbers(int k, int requesters, int expected) =>
        Assert.Equal(expected, Paper.RepairCount(k, requesters));

    [Fact]
    public void RepairGrowsWithRequestersAndStaysWithinTheCapAndTheCode() =>
        Property.ForAll(Gen.Select(Gen.Int[1, 255], Gen.Int[0, 100_000], Gen.Int[0, 300], Gen.Int[0, 300]), 3000, seed: 31, t =>
        {
            var (k, r, percent, cap) = t;
            var rule = new RedundancyRule { PercentPerRequester = percent, CapPercent = cap };
            int repair = rule.RepairCount(k, r);
            Assert.InRange(repair, 0, k * cap / 100);
            Assert.True(k + repair <= ReedSolomon.MaxPackets);
            Assert.True(rule.RepairCount(k, r + 1) >= repair);
            Assert.Equal(Math.Min(Math.Min((long)r * k * percent / 100, k * cap / 100), 255 - k), repair);
        });

    [Fact]
    public void BadOptionsAndArgumentsAreNamed()
    {
        Assert.Equal("PercentPerRequester", Assert.Throws<ArgumentOutOfRangeException>(() => new RedundancyRule { PercentPerRequester = -1 }.Validate()).ParamName);
        Assert.Equal("CapPercent", Assert.Throws<ArgumentOutOfRangeException>(() => new RedundancyRule { CapPercent = -1 }.Validate()).ParamName);
        Paper.Validate();
        Assert.Equal("sourcePackets", Assert.Throws<ArgumentOutOfRangeException>(() => Paper.RepairCount(0, 1)).ParamName);
        Assert.Equal("sourcePackets", Assert.Throws<ArgumentOutOfRangeException>(() => Paper.RepairCount(256, 1)).ParamName);
        Assert.Equal("requesters", Assert.Throws<ArgumentOutOfRangeException>(() => Paper.RepairCount(60, -1)).ParamName);
    }
}
