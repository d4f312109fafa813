namespace QuickSilver.Compare.Tests;

/// <summary>The injected-loss option the comparison added to QuickSilverNodeOptions.</summary>
public sealed class NodeOptionsTests
{
    [Theory]
    [InlineData(-0.01)]
    [InlineData(1.5)]
    [InlineData(double.NaN)]
    public void InjectedLossRate_outside_0_to_1_is_refused_by_name(double rate)
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new QuickSilverNodeOptions { InjectedLossRate = rate }.Validate());
        Assert.Contains("InjectedLossRate", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void InjectedLossRate_defaults_to_none()
    {
        var options = new QuickSilverNodeOptions { InjectedLossRate = 0.05 };
        options.Validate();
        Assert.Equal(0, new QuickSilverNodeOptions().InjectedLossRate);
    }
}
