using QuickSilver.Compare.RawUdp;

namespace QuickSilver.Compare.Tests;

/// <summary>The warm-up phase: W untimed messages before the M measured ones, the same for every system.</summary>
public sealed class WarmupTests
{
    [Theory]
    [InlineData(0, 10, 1)]
    [InlineData(7, 10, 3)]
    [InlineData(20_000, 20_000, 256)]
    [InlineData(5, 3, 16)]
    public void Group_shares_are_the_round_robin_split_of_all_messages(long warmup, long messages, int groups)
    {
        var point = new ExperimentPoint(2, groups, 100, 0, messages, warmup);
        var share = new long[groups];
        for (long i = 0; i < point.Total; i++)
        {
            share[i % groups]++;
        }

        Assert.Equal(share, Enumerable.Range(0, groups).Select(point.Share));
    }

    [Fact]
    public void Every_point_of_a_plan_gets_the_warmup_and_the_modes_default()
    {
        Assert.All(Plan.Create(quick: true).SelectMany(e => e.Points), p => Assert.Equal((Plan.QuickWarmup, Plan.QuickMessages), (p.Warmup, p.Messages)));
        Assert.All(Plan.Create(quick: false).SelectMany(e => e.Points), p => Assert.Equal((Plan.FullWarmup, Plan.FullMessages), (p.Warmup, p.Messages)));
        Assert.All(Plan.Create(quick: true, messages: 50, warmup: 0).SelectMany(e => e.Points), p => Assert.Equal((0L, 50L), (p.Warmup, p.Messages)));
    }

    [Theory]
    [InlineData("--warmup", "-1")]
    [InlineData("--warmup", "many")]
    [InlineData("--messages", "0")]
    [InlineData("--timeout", "0")]
    [InlineData("--qs-min-rate", "-5")]
    public async Task A_bad_option_exits_with_2_and_names_the_option(string option, string value)
    {
        var error = new StringWriter();
        int code = await CliChecks.InvokeAsync(Cli.Build(), ["--quick", option, value], error);

        Assert.Equal(CliChecks.UsageError, code);
        Assert.Contains(option, error.ToString(), StringComparison.Ordinal);
    }

    [Fact]
    public void The_counter_keeps_the_earliest_measured_and_the_latest_arrival_and_the_pass_times_from_the_senders_measured_start()
    {
        var count = new ArrivalCounter();
        count.Arrived(measured: false, 100);
        count.Arrived(measured: true, 300);
        count.Arrived(measured: true, 250); // a second socket's thread recorded an earlier arrival late
        count.Arrived(measured: false, 280);
        Assert.Equal(5, count.Arrived(measured: true, 900));

        Assert.Equal((5L, 3L, 250L, 900L), (count.Received, count.Measured, count.FirstMeasuredMicros, count.LastMicros));
        var fields = ResultLine.TryParse(count.ResultLine(5))!;
        var result = PassResult.From(Systems.RawUdp, new ExperimentPoint(1, 1, 100, 0, Messages: 3, Warmup: 2), 200, [fields], "");
        Assert.True(result.AllArrived);
        Assert.Equal(3 / 700e-6, result.MessagesPerSecond, 6);
        Assert.Equal(0, PassResult.From(Systems.RawUdp, result.Point, 0, [fields], "").Seconds); // no measured send: no rate
    }

    [Fact]
    public void Raw_udp_options_carry_the_warmup_to_the_child_processes()
    {
        var options = new UdpPassOptions { Messages = 30, Warmup = 12 };
        var back = UdpPassOptions.FromArgs(new RoleArgs(options.ToArgs()));

        Assert.Equal((12L, 30L, 42L), (back.Warmup, back.Messages, back.Total));
        Assert.Throws<ArgumentOutOfRangeException>(() => (options with { Warmup = -1 }).Validate());
    }
}
