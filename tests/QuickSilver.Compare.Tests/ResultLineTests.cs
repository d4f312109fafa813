namespace QuickSilver.Compare.Tests;

public sealed class ResultLineTests
{
    [Fact]
    public void A_formatted_line_parses_back()
    {
        string line = ResultLine.Format("receiver", ("received", 42L), ("loss", 0.05));
        var fields = ResultLine.TryParse(line)!;

        Assert.Equal("RESULT role=receiver received=42 loss=0.05", line);
        Assert.Equal("receiver", fields["role"]);
        Assert.Equal(42, fields.Long("received"));
        Assert.Null(ResultLine.TryParse("READY"));
    }

    [Fact]
    public void A_pass_with_a_short_receiver_says_how_many_were_lost()
    {
        var point = new ExperimentPoint(2, 1, 100, 0, 1000, Warmup: 200);
        var receivers = new[]
        {
            ResultLine.TryParse("RESULT role=receiver received=1200 measured=1000 first_measured_us=1500000 last_us=3000000")!,
            ResultLine.TryParse("RESULT role=receiver received=1100 measured=900 first_measured_us=1000000 last_us=2000000")!,
        };
        var result = PassResult.From(Systems.RawUdp, point, 1_000_000, receivers, "");

        Assert.False(result.AllArrived);
        Assert.Equal(2.0, result.Seconds); // the sender's first measured send to the latest last arrival
        Assert.Equal(900, result.MinMeasured);
        Assert.Equal(450, result.MessagesPerSecond);
        Assert.Contains("lost 100 of 1200", result.Note, StringComparison.Ordinal);
        Assert.Contains("1 receiver(s) printed no result", PassResult.From(Systems.RawUdp, point, 1_000_000, receivers[..1], "").Note, StringComparison.Ordinal);
    }
}
