using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Figures.Tests;

/// <summary>The shared ScottPlot chart and the Figures runner's plots drawn from its CSVs.</summary>
public sealed class PlotTests : IDisposable
{
    private static readonly byte[] PngSignature = [0x89, (byte)'P', (byte)'N', (byte)'G', 0x0D, 0x0A, 0x1A, 0x0A];
    private readonly DirectoryInfo _folder = Directory.CreateTempSubdirectory("figures-");

    /// <summary>Small CSVs with the columns the runner writes (values are test data, not measurements).</summary>
    private static readonly Dictionary<string, string> Samples = new()
    {
        ["throughput.csv"] = "nodes,msgs/s,MB/s,paper pkt/s,sender target/s,recv-queue drops,NAK resends,window s,wall s\n1,5007,0.5,9850,3007,1,2,60,1\n71,4681,0.47,6500,5922,3,4,60,21.9\n250,7594,0.76,,8385,5,6,57 (cut),242.1\n",
        ["partition_size.csv"] = "nodes,R,partitions,msgs/s,vs R=5 %,recv-queue drops,window s,wall s\n25,1,25,5898,136,1,60,10\n25,5,5,4342,100,1,60,6\n25,25,1,4000,92,1,60,6\n71,1,71,7000,150,1,60,50\n71,5,14,4681,100,1,60,22\n",
        ["token_interval.csv"] = "token interval s,msgs/s,recovery ms,recovery rounds,repaired %,ACK ms,window s,wall s\n0.25,2730,12507,50.03,9.34,5097,60,6.1\n1,4342,6565,6.57,6.71,2898,60,6.2\n",
        ["senders.csv"] = "senders,total msgs/s,vs 1 sender %,paper %,recv-queue drops,window s,wall s\n1,4342,100,,1,60,6\n10,5000,115,80,1,60,20\n",
        ["recovery_latency.csv"] = "nodes,loss per link,recovery ms,recovery rounds,paper rounds,median ms,repaired %,msgs/s,NAK resends,timeout resends,window s,wall s\n25,0.005,8988,8.99,2.5,9130,6.21,5016,1,0,60,10\n71,0.005,12324,12.32,2.5,14042,7.02,5685,1,0,60,31.8\n",
        ["ack_latency.csv"] = "nodes,ACK ms,ACK rounds,paper rounds,max ms,window s\n1,,,~1,,60\n25,2898,2.9,~1,8122,60\n",
        ["rate_over_time.csv"] = "nodes,virtual s,delivered to all/s,sender target/s,min receiver rate/s,sender actual/s,recv-queue drops/s\n25,1,2150,2000,0,2150,0\n25,2,3129,3225,2150,2640,0\n71,1,2000,2000,0,2000,0\n",
        ["groups.csv"] = "groups,msgs/s,MB/s,vs 1 group %,packets sent,joins settled at s,window s,wall s\n1,39390,3.94,100,277596,0.1,60,13.4\n256,37768,3.78,96,284642,0.1,60,10\n1024,did not settle,,,,,,\n",
    };

    public void Dispose() => _folder.Delete(recursive: true);

    private static void AssertPng(string path)
    {
        var bytes = File.ReadAllBytes(path);
        Assert.True(bytes.Length > 1000, $"{path}: {bytes.Length} bytes");
        Assert.Equal(PngSignature, bytes[..8]);
    }

    [Fact]
    public void Every_experiment_csv_gets_a_chart_with_labelled_axes_and_a_measured_series()
    {
        Assert.Equal(Samples.Keys.Order(), FigurePlots.Files.Order());
        foreach (var (file, text) in Samples)
        {
            var chart = FigurePlots.Chart(file, CsvTable.Parse(text));

            Assert.NotNull(chart);
            Assert.False(string.IsNullOrWhiteSpace(chart.XLabel), file);
            Assert.False(string.IsNullOrWhiteSpace(chart.YLabel), file);
            Assert.Contains(chart.Series, s => s.Style == SeriesStyle.Measured && s.Points.Any());
        }

        Assert.Null(FigurePlots.Chart("other.csv", CsvTable.Parse("a\n1\n")));
    }

    [Theory]
    [InlineData("throughput.csv", 1)]
    [InlineData("groups.csv", 2)]
    [InlineData("partition_size.csv", 1)]
    [InlineData("senders.csv", 1)]
    [InlineData("recovery_latency.csv", 1)]
    [InlineData("ack_latency.csv", 1)]
    [InlineData("token_interval.csv", 0)]
    public void The_papers_values_are_a_separate_series_labelled_as_the_papers(string file, int expected)
    {
        var paper = FigurePlots.Chart(file, CsvTable.Parse(Samples[file]))!.Series.Where(s => s.Style == SeriesStyle.Paper).ToList();

        Assert.Equal(expected, paper.Count(s => s.Label.Length > 0));
        Assert.All(paper.Where(s => s.Label.Length > 0), s => Assert.StartsWith("paper", s.Label, StringComparison.Ordinal));
    }

    [Fact]
    public void Throughput_chart_takes_the_measured_values_from_the_csv()
    {
        var chart = FigurePlots.Chart("throughput.csv", CsvTable.Parse(Samples["throughput.csv"]))!;
        var measured = chart.Series[0];

        Assert.Equal([(1.0, 5007.0), (71, 4681), (250, 7594)], measured.Points);
        Assert.Equal([(1.0, 9850.0), (71, 6500)], chart.Series.Single(s => s.Style == SeriesStyle.Paper).Points);
    }

    [Fact]
    public void Every_sample_is_drawn_as_a_png()
    {
        foreach (var (file, text) in Samples)
        {
            string? path = FigurePlots.Write(_folder.FullName, file, CsvTable.Parse(text));

            Assert.Equal(Path.Combine(_folder.FullName, Path.ChangeExtension(file, ".png")), path);
            AssertPng(path!);
        }
    }

    [Fact]
    public void Plot_only_redraws_a_png_for_each_csv_in_the_folder()
    {
        File.WriteAllText(Path.Combine(_folder.FullName, "groups.csv"), Samples["groups.csv"]);
        File.WriteAllText(Path.Combine(_folder.FullName, "senders.csv"), Samples["senders.csv"]);
        File.WriteAllText(Path.Combine(_folder.FullName, "notes.csv"), "a\n1\n");

        var drawn = FigurePlots.RedrawAll(_folder.FullName);

        Assert.Equal(["senders.png", "groups.png"], drawn.Select(Path.GetFileName));
        Assert.All(drawn, AssertPng);
    }

    [Fact]
    public void Log2_and_categorical_axes_place_values_as_documented()
    {
        var log = new LineChart("t", "x", "y") { XScale = XScale.Log2 }.Add(new ChartSeries("s", [1, 4, 1024], [1, 2, 3]));
        var cat = new LineChart("t", "x", "y") { XScale = XScale.Categorical }.Add(new ChartSeries("s", [0.25, 2, 1], [1, 2, double.NaN]));

        Assert.Equal([0.0, 2, 10], log.AllX().Select(x => log.Position(x, log.AllX())));
        Assert.Equal([0.25, 2], cat.AllX()); // the NaN point is left out
        Assert.Equal(1, cat.Position(2, cat.AllX()));
    }

    [Fact]
    public void A_chart_with_a_right_axis_and_no_points_still_draws()
    {
        string path = Path.Combine(_folder.FullName, "empty.png");
        new LineChart("t", "x (s)", "y (msgs/s)") { RightLabel = "ms" }
            .Add(new ChartSeries("none", [double.NaN], [1], RightAxis: true))
            .SavePng(path, 320, 200);

        AssertPng(path);
    }

    [Fact]
    public void A_log2_axis_refuses_non_positive_x()
    {
        var chart = new LineChart("t", "x", "y") { XScale = XScale.Log2 }.Add(new ChartSeries("s", [0, 1], [1, 1]));
        Assert.Throws<InvalidOperationException>(() => chart.SavePng(Path.Combine(_folder.FullName, "bad.png")));
    }
}
