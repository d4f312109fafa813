using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Figures;

/// <summary>
/// One PNG per experiment, drawn from the experiment's CSV (so a plot can be redrawn from the committed CSVs with
/// <c>--plot-only</c>, without re-running): the measured series, and the paper's values where its text gives them
/// (<see cref="Paper"/>), dashed.
/// </summary>
internal static class FigurePlots
{
    /// <summary>The CSV files the runner writes, in its order.</summary>
    public static readonly IReadOnlyList<string> Files =
        ["throughput.csv", "partition_size.csv", "token_interval.csv", "senders.csv", "recovery_latency.csv", "ack_latency.csv", "rate_over_time.csv", "groups.csv"];

    /// <summary>The chart of <paramref name="file"/> (one of <see cref="Files"/>) from its table; null for another file.</summary>
    public static LineChart? Chart(string file, CsvTable table) => Path.GetFileName(file) switch
    {
        "throughput.csv" => Throughput(table),
        "partition_size.csv" => PartitionSize(table),
        "token_interval.csv" => TokenInterval(table),
        "senders.csv" => Senders(table),
        "recovery_latency.csv" => Recovery(table),
        "ack_latency.csv" => Ack(table),
        "rate_over_time.csv" => RateOverTime(table),
        "groups.csv" => Groups(table),
        _ => null,
    };

    /// <summary>Writes <c>folder/name.png</c> for <paramref name="file"/>; returns its path, or null when the file has no chart.</summary>
    public static string? Write(string folder, string file, CsvTable table)
    {
        if (Chart(file, table) is not { } chart)
        {
            return null;
        }

        string path = Path.Combine(folder, Path.ChangeExtension(Path.GetFileName(file), ".png"));
        chart.SavePng(path);
        return path;
    }

    /// <summary>Redraws the PNG of every CSV of <see cref="Files"/> present in <paramref name="folder"/>.</summary>
    public static IReadOnlyList<string> RedrawAll(string folder)
        => [.. Files.Where(f => File.Exists(Path.Combine(folder, f))).Select(f => Write(folder, f, CsvTable.Read(Path.Combine(folder, f)))).OfType<string>()];

    private static ChartSeries Measured(string label, CsvTable t, string x, string y, bool right = false)
        => new(label, t.Numbers(x), t.Numbers(y), SeriesStyle.Measured, right);

    private static ChartSeries Of(PaperSeries p) => new(p.Label, p.X, p.Y, SeriesStyle.Paper);

    /// <summary>The rows of <paramref name="t"/> whose <paramref name="column"/> equals <paramref name="value"/>.</summary>
    private static CsvTable Where(CsvTable t, string column, double value)
    {
        var keep = new CsvTable(t.Header);
        var values = t.Numbers(column);
        for (int i = 0; i < t.Rows.Count; i++)
        {
            if (values[i] == value)
            {
                keep.Add(t.Rows[i]);
            }
        }

        return keep;
    }

    private static LineChart Throughput(CsvTable t) => new LineChart("Throughput against region size (paper Fig. 9)", "nodes in the region (1 sender outside it)",
            "messages/s delivered to every node")
        {
            XScale = XScale.Categorical,
            Subtitle = "simulated 100 Mbit/s LAN, 100 µs receive CPU per packet, 100 B messages one per packet",
        }
        .Add(Measured("measured (simulation)", t, "nodes", "msgs/s"))
        .Add(Measured("measured: sender's target rate at the end", t, "nodes", "sender target/s"))
        .Add(Of(Paper.Fig9Throughput));

    private static LineChart PartitionSize(CsvTable t)
    {
        var chart = new LineChart("Throughput against partition size R (paper Fig. 12-13)", "R, replication factor (partitions = nodes / R, rounded down)",
            "throughput, % of R = 5 at the same size") { XScale = XScale.Categorical };
        foreach (double n in t.Numbers("nodes").Distinct())
        {
            chart.Add(Measured($"measured, {(int)n} nodes", Where(t, "nodes", n), "R", "vs R=5 %"));
        }

        return chart.Add(Of(Paper.Fig12PartitionSize));
    }

    private static LineChart TokenInterval(CsvTable t) => new LineChart("Token interval at 25 nodes (paper Fig. 15)", "token interval (s)",
            "messages/s delivered to every node")
        {
            XScale = XScale.Categorical,
            RightLabel = "mean recovery latency (ms)",
            Subtitle = "the paper's text gives no values for Fig. 15",
        }
        .Add(Measured("measured throughput (left)", t, "token interval s", "msgs/s"))
        .Add(Measured("measured recovery latency at delivery (right)", t, "token interval s", "recovery ms", right: true))
        .AddIf(t, "arrival ms", c => Measured("measured recovery latency at arrival (right)", t, "token interval s", c, right: true));

    private static LineChart Senders(CsvTable t) => new LineChart("Senders into a 25-node region (paper Fig. 16)", "senders",
            "total throughput, % of 1 sender") { XScale = XScale.Categorical, RightLabel = t.IndexOf("Jain's index") >= 0 ? "Jain's fairness index over the senders" : null }
        .Add(Measured("measured (simulation)", t, "senders", "vs 1 sender %"))
        .Add(Of(Paper.Fig16Senders))
        .AddIf(t, "Jain's index", c => Measured("measured: Jain's index (right)", t, "senders", c, right: true));

    private static LineChart Recovery(CsvTable t) => new LineChart("Recovery latency under ~1 % loss (paper Fig. 19)", "nodes in the region",
            "mean recovery latency (token rounds)")
        {
            XScale = XScale.Categorical,
            RightLabel = "packets repaired (%)",
        }
        .Add(Measured("measured at delivery (left)", t, "nodes", "recovery rounds"))
        .AddIf(t, "arrival rounds", c => Measured("measured at arrival of the repair (left)", t, "nodes", c))
        .Add(Of(Paper.Fig19Recovery))
        .Add(Measured("measured: packets repaired, % (right)", t, "nodes", "repaired %", right: true));

    private static LineChart Ack(CsvTable t) => new LineChart("ACK latency (paper Fig. 20)", "nodes in the region", "mean ACK latency (token rounds)")
        {
            XScale = XScale.Categorical,
        }
        .Add(Measured("measured (simulation)", t, "nodes", "ACK rounds"))
        .Add(Of(Paper.Fig20Ack));

    private static LineChart RateOverTime(CsvTable t)
    {
        var chart = new LineChart("Rate over time, 1 sender (paper Fig. 17)", "virtual time (s)", "messages/s");
        var seconds = t.Numbers("virtual s");
        foreach (double n in t.Numbers("nodes").Distinct())
        {
            var mine = Where(t, "nodes", n);
            chart.Add(Measured($"{(int)n} nodes: delivered to all", mine, "virtual s", "delivered to all/s"));
            chart.Add(Measured($"{(int)n} nodes: sender target", mine, "virtual s", "sender target/s"));
        }

        if (seconds.Length > 0)
        {
            double x0 = seconds.Where(s => !double.IsNaN(s)).DefaultIfEmpty(0).Min(), x1 = seconds.Where(s => !double.IsNaN(s)).DefaultIfEmpty(1).Max();
            var (low, high) = Paper.Fig17Band71;
            chart.Add(new ChartSeries(string.Create(System.Globalization.CultureInfo.InvariantCulture, $"paper, 71 nodes: swings {low:N0}-{high:N0} packets/s (§3.8 text)"), [x0, x1], [low, low], SeriesStyle.Paper));
            chart.Add(new ChartSeries("", [x0, x1], [high, high], SeriesStyle.Paper));
        }

        return chart;
    }

    private static LineChart Groups(CsvTable t) => new LineChart("Throughput against the number of groups (paper Fig. 1)",
            "groups (25 nodes in every group, 1 sender round robin)", "throughput, % of 1 group")
        {
            XScale = XScale.Log2,
            Subtitle = "simulation, whole stack (GMS, group and region layers)",
        }
        .Add(Measured("measured QuickSilver (simulation)", t, "groups", "vs 1 group %"))
        .Add(Of(Paper.Fig1Qsm))
        .Add(Of(Paper.Fig1JGroups));

    /// <summary>Adds the series <paramref name="series"/> draws from <paramref name="column"/> if the table has that column
    /// (CSVs written before it was measured have not).</summary>
    private static LineChart AddIf(this LineChart chart, CsvTable t, string column, Func<string, ChartSeries> series)
        => t.IndexOf(column) >= 0 ? chart.Add(series(column)) : chart;
}
