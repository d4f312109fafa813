using System.Globalization;
using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Compare.Output;

/// <summary>Draws one experiment as a PNG (QuickSilver.BenchmarkOutput's ScottPlot chart): measured messages/s at the
/// slowest receiver per system against the experiment's parameter, one evenly spaced tick per measured value (so
/// 1..256 groups read like the paper's log axis).</summary>
internal static class PlotOut
{
    public static LineChart Chart(Experiment experiment, IReadOnlyList<PassResult> results)
    {
        var point = experiment.Points[0];
        var chart = new LineChart($"{experiment.Name}: throughput over loopback", experiment.XLabel, "messages/s (measured, slowest receiver)")
        {
            XScale = XScale.Categorical,
            Subtitle = string.Create(CultureInfo.InvariantCulture, $"{point.Warmup:N0} warm-up + {point.Messages:N0} measured messages a point"),
        };
        foreach (var system in results.Select(r => r.System).Distinct())
        {
            var mine = results.Where(r => r.System == system && r.Seconds > 0).ToList();
            chart.Add(new ChartSeries(system, [.. mine.Select(r => experiment.X(r.Point))], [.. mine.Select(r => r.MessagesPerSecond)]));
        }

        return chart;
    }

    public static void Write(string path, Experiment experiment, IReadOnlyList<PassResult> results, int width = 900, int height = 600)
        => Chart(experiment, results).SavePng(path, width, height);
}
