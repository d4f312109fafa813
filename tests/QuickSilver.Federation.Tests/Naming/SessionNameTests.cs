using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Tests.Naming;

public class SessionNameTests
{
    [Fact]
    public void ParsesTheSeedsShapeWithFlowsAndParameters()
    {
        var name = SessionName.Parse("bfed://7/224.5.6.7/8888/8889/?content=RTP&single-source=true&metric=latency");
        Assert.Equal(new IslandId(7), name.Owner);
        Assert.Equal("224.5.6.7", name.NativeName);
        Assert.Equal(["8888", "8889"], name.Flows);
        Assert.Equal(RouteMetric.Latency, name.Metric);
        Assert.False(name.MultiSource);
        Assert.Equal("bfed://7/224.5.6.7/8888/8889/?content=RTP&single-source=true&metric=latency", name.Text);
        Assert.Equal(name, SessionName.Parse(name.Text));
    }

    [Fact]
    public void DefaultsToHopsAndOneWayAndReadsMultiSource()
    {
        var plain = SessionName.Parse("bfed://1/news/data");
        Assert.Equal(RouteMetric.Hops, plain.Metric);
        Assert.False(plain.MultiSource);
        Assert.Equal("bfed://1/news/data/", plain.Text);
        Assert.True(SessionName.Parse("bfed://1/chat/x/?multi-source=true").MultiSource);
        Assert.True(SessionName.Parse("bfed://1/chat/x/?single-source=false").MultiSource);
    }

    [Theory]
    [InlineData("", "empty")]
    [InlineData("http://1/a/b", "must start with 'bfed://'")]
    [InlineData("bfed://1/a", "at least one flow")]
    [InlineData("bfed://x/a/b", "owner island must be a number")]
    [InlineData("bfed://0/a/b", "owner island must be a number")]
    [InlineData("bfed://4294967296/a/b", "owner island must be a number")]
    [InlineData("bfed://1//b", "native name is empty")]
    [InlineData("bfed://1/a//c", "flow 1 is empty")]
    [InlineData("bfed://1/a/b c", "flow 1 'b c'")]
    [InlineData("bfed://1/a/b/b", "distinct")]
    [InlineData("bfed://1/a/b/?metric", "not name=value")]
    [InlineData("bfed://1/a/b/?metric=fast", "metric must be hops, latency or bandwidth")]
    [InlineData("bfed://1/a/b/?multi-source=yes", "multi-source must be true or false")]
    [InlineData("bfed://1/a/b/?x=1&", "not name=value")]
    public void RefusesMalformedNamesWithAClearError(string text, string expected)
    {
        Assert.False(SessionName.TryParse(text, out var name, out var error));
        Assert.Null(name);
        Assert.Contains(expected, error, StringComparison.Ordinal);
        var e = Assert.Throws<FormatException>(() => SessionName.Parse(text));
        Assert.Equal(error, e.Message);
    }

    [Fact]
    public void RefusesOverlongNamesAndTooManyFlows()
    {
        Assert.False(SessionName.TryParse("bfed://1/" + new string('a', 2000) + "/f", out _, out var error));
        Assert.Contains("longer than 1024", error, StringComparison.Ordinal);
        Assert.False(SessionName.TryParse("bfed://1/a/" + string.Join('/', Enumerable.Range(0, 17)), out _, out error));
        Assert.Contains("at most 16 flows", error, StringComparison.Ordinal);
    }
}
