using System.Globalization;
using QuickSilver.BenchmarkOutput;
using QuickSilver.Compare.Output;

namespace QuickSilver.Compare.Tests;

public sealed class OutputTests
{
    private static readonly ExperimentPoint Point = new(Receivers: 2, Groups: 4, Size: 1000, Loss: 0.01, Messages: 1000, Warmup: 500);

    private static List<PassResult> Results() =>
    [
        new(Systems.QuickSilver, Point, 0.5, 1500, 1500, 1000, "injected loss 1 % at receivers")
        {
            SenderCpuMicros = 1500, ReceiverCpuMicros = 2000, ReceiverWorkingSetMb = 54, Runs = [1900.4, 2000, 2100],
        },
        new(Systems.RawUdp, Point with { Loss = 0 }, 0.25, 1490, 1500, 990, "lost 10, \"worst\""),
    ];

    [Fact]
    public void Csv_has_a_header_one_row_per_result_invariant_numbers_and_quoted_notes()
    {
        var culture = CultureInfo.CurrentCulture;
        CultureInfo.CurrentCulture = CultureInfo.GetCultureInfo("de-DE");
        try
        {
            var lines = CsvOut.Format("groups", Results()).TrimEnd('\n').Split('\n');

            Assert.Equal(CsvOut.Header, lines[0]);
            Assert.Equal(3, lines.Length);
            Assert.Equal("groups,QuickSilver,2,4,1000,0.01,500,1000,1500,1500,1000,true,0.5,2000,2,1.5,1,54,1900 2000 2100,injected loss 1 % at receivers", lines[1]);
            Assert.Equal("groups,RawUDP,2,4,1000,0,500,1000,1490,1500,990,false,0.25,3960,3.96,,,,,\"lost 10, \"\"worst\"\"\"", lines[2]);
        }
        finally
        {
            CultureInfo.CurrentCulture = culture;
        }
    }

    [Fact]
    public void Repeated_runs_report_the_median_run_with_every_rate_and_never_hide_a_loss()
    {
        var point = Point with { Loss = 0 };
        PassResult Run(double seconds, long received) => new(Systems.QuickSilver, point, seconds, received, received, 1000, "");
        var median = PassResult.Median([Run(0.5, 1500), Run(0.25, 1500), Run(1.0, 1500)]);
        Assert.Equal(2000, median.MessagesPerSecond);
        Assert.Equal([2000.0, 4000, 1000], median.Runs);

        var lossy = PassResult.Median([Run(0.5, 1500), Run(0.25, 1499), Run(1.0, 1500)]);
        Assert.False(lossy.AllArrived);
        Assert.Equal(3, lossy.Runs.Count);
    }

    [Fact]
    public void Csv_is_written_to_the_given_path()
    {
        string path = Path.Combine(Path.GetTempPath(), $"compare-{Guid.NewGuid():N}.csv");
        try
        {
            CsvOut.Write(path, "groups", Results());
            Assert.StartsWith(CsvOut.Header, File.ReadAllText(path), StringComparison.Ordinal);
        }
        finally
        {
            File.Delete(path);
        }
    }

    [Fact]
    public void Plotting_writes_a_non_empty_png()
    {
        var experiment = new Experiment("groups", "groups", p => p.Groups, [Point, Point with { Groups = 16 }]);
        string path = Path.Combine(Path.GetTempPath(), $"compare-{Guid.NewGuid():N}.png");
        try
        {
            PlotOut.Write(path, experiment, Results(), 320, 200);
            var bytes = File.ReadAllBytes(path);
            Assert.True(bytes.Length > 100);
            Assert.Equal(new byte[] { 0x89, (byte)'P', (byte)'N', (byte)'G', 0x0D, 0x0A, 0x1A, 0x0A }, bytes[..8]);
        }
        finally
        {
            File.Delete(path);
        }
    }

    [Fact]
    public void Csv_round_trips_through_the_shared_reader()
    {
        var table = CsvTable.Parse(CsvOut.Format("groups", Results()));

        Assert.Equal(CsvOut.Columns, table.Header);
        Assert.Equal(2, table.Rows.Count);
        Assert.Equal("lost 10, \"worst\"", table.Rows[1][^1]);
        Assert.Equal([2000, 3960], table.Numbers("msgs_per_sec"));
        Assert.Equal([1500, 1490], table.Numbers("min_received"));
        Assert.Equal([500, 500], table.Numbers("warmup"));
    }

    [Fact]
    public void The_chart_has_one_measured_series_per_system_at_the_experiments_x_values()
    {
        var experiment = new Experiment("groups", "groups", p => p.Groups, [Point, Point with { Groups = 16 }]);
        var chart = PlotOut.Chart(experiment, Results());

        Assert.Equal([Systems.QuickSilver, Systems.RawUdp], chart.Series.Select(s => s.Label));
        Assert.Equal([(4.0, 2000.0)], chart.Series[0].Points);
        Assert.Equal(XScale.Categorical, chart.XScale);
        Assert.Contains("messages/s", chart.YLabel, StringComparison.Ordinal);
    }

    [Fact]
    public void Ratios_set_lossy_QuickSilver_against_the_lossless_baselines()
    {
        var experiment = new Experiment("loss", "loss", p => p.Loss * 100, [Point]);
        string table = Ratios.Markdown(experiment, Results());

        Assert.Contains("| 1 | 2,000 | n/a | 3,960 | n/a | n/a | 0.51 | n/a |", table, StringComparison.Ordinal);
    }

    [Fact]
    public void Repeats_go_round_every_pass_before_the_next_round()
    {
        var order = Plan.Rounds(["0 %", "1 %", "5 %"], 3).Select(p => $"{p.Round}:{p.Pass}");
        Assert.Equal(["0:0 %", "0:1 %", "0:5 %", "1:0 %", "1:1 %", "1:5 %", "2:0 %", "2:1 %", "2:5 %"], order);
        Assert.Equal(["0:0 %", "0:1 %"], Plan.Rounds(["0 %", "1 %"], 1).Select(p => $"{p.Round}:{p.Pass}"));
    }

    [Fact]
    public void Paired_ratios_divide_each_round_by_the_first_points_run_of_that_round()
    {
        var experiment = Plan.Create(quick: false, messages: 1000, warmup: 0).Single(e => e.Name == "loss-1000B");
        PassResult Result(int point, params double[] runs) => new(Systems.QuickSilver, experiment.Points[point], 1, 1000, 1000, 1000, "") { Runs = runs };
        var results = new List<PassResult> { Result(0, 1000, 2000, 1500), Result(1, 900, 1000, 1500), Result(2, 700, 1600, 600) };

        string table = Ratios.Paired(experiment, results);
        Assert.Contains("| 1 | QuickSilver | 0.90 0.50 1.00 | 0.90 |", table);  // the median of the ratios, not a ratio of medians (1,000 / 1,500 = 0.67)
        Assert.Contains("| 5 | QuickSilver | 0.70 0.80 0.40 | 0.70 |", table);
        Assert.Equal("", Ratios.Paired(experiment, results.Skip(1).ToList())); // the first point measured elsewhere: no pairs
        Assert.Equal("", Ratios.Paired(experiment, [Result(0, 1000), Result(1, 900)])); // one run each: nothing to pair
    }
}
