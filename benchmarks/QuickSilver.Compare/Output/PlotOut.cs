using System.Globalization;
using ScottPlot;

namespace QuickSilver.Compare.Output;

/// <summary>Draws one experiment as a PNG with ScottPlot: messages/s per system against the experiment's parameter,
/// one evenly spaced tick per measured value (so 1..256 groups read like the paper's log axis).</summary>
internal static class PlotOut
{
    public static void Write(string path, Experiment experiment, IReadOnlyList<PassResult> results, int width = 900, int height = 540)
    {
        var xs = experiment.Points.Select(experiment.X).Distinct().Order().ToArray();
        var plot = new Plot();
        try
        {
            foreach (var system in results.Select(r => r.System).Distinct())
            {
                var mine = results.Where(r => r.System == system && r.Seconds > 0).ToList();
                if (mine.Count == 0)
                {
                    continue;
                }

                var positions = mine.Select(r => (double)Array.IndexOf(xs, experiment.X(r.Point))).ToArray();
                var scatter = plot.Add.Scatter(positions, mine.Select(r => r.MessagesPerSecond).ToArray());
                scatter.LegendText = system;
                scatter.MarkerSize = 8;
                scatter.LineWidth = 2;
            }

            plot.Axes.Bottom.SetTicks(Enumerable.Range(0, xs.Length).Select(i => (double)i).ToArray(),
                xs.Select(x => x.ToString("0.##", CultureInfo.InvariantCulture)).ToArray());
            plot.Axes.SetLimitsX(-0.5, xs.Length - 0.5);
            plot.Axes.SetLimitsY(0, Math.Max(1, results.Select(r => r.MessagesPerSecond).DefaultIfEmpty(1).Max()) * 1.1);
            plot.Title($"{experiment.Name}: throughput");
            plot.XLabel(experiment.XLabel);
            plot.YLabel("messages/s (slowest receiver)");
            plot.ShowLegend(Alignment.UpperRight);
            plot.SavePng(path, width, height);
        }
        finally
        {
            plot.Dispose();
        }
    }
}
