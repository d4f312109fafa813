using System.Globalization;
using ScottPlot;

namespace QuickSilver.BenchmarkOutput;

/// <summary>How a chart places its x values.</summary>
public enum XScale
{
    /// <summary>Proportional to the value.</summary>
    Linear,

    /// <summary>Proportional to log2 of the value (positive values only), one tick per value shown: 1, 4, 16... groups.</summary>
    Log2,

    /// <summary>Evenly spaced, one tick per distinct value shown, in increasing order.</summary>
    Categorical,
}

/// <summary>Measured series are drawn solid with filled markers; the paper's reported values dashed with open markers.</summary>
public enum SeriesStyle
{
    Measured,
    Paper,
}

/// <summary>One line of a chart. Points whose x or y is NaN are left out. A series with an empty label has no legend
/// entry and takes the previous series' colour (the second edge of a band, say).</summary>
public sealed record ChartSeries(string Label, IReadOnlyList<double> X, IReadOnlyList<double> Y, SeriesStyle Style = SeriesStyle.Measured, bool RightAxis = false)
{
    public IEnumerable<(double X, double Y)> Points => X.Zip(Y).Where(p => !double.IsNaN(p.First) && !double.IsNaN(p.Second));
}

/// <summary>
/// A line chart drawn with ScottPlot and saved as PNG: labelled axes (units in the labels), a legend, y from zero,
/// an optional right axis for a second quantity. The one plotting path of the benchmark runners.
/// </summary>
public sealed class LineChart(string title, string xLabel, string yLabel)
{
    public string Title { get; } = title;

    public string XLabel { get; } = xLabel;

    public string YLabel { get; } = yLabel;

    /// <summary>Label of the right axis; used when a series has <see cref="ChartSeries.RightAxis"/>.</summary>
    public string? RightLabel { get; init; }

    public XScale XScale { get; init; } = XScale.Linear;

    /// <summary>A note under the title (e.g. where the paper's values come from).</summary>
    public string? Subtitle { get; init; }

    public List<ChartSeries> Series { get; } = [];

    /// <summary>Where the legend goes inside the data area; null (the default) puts it below the plot, where it hides nothing.</summary>
    public Alignment? LegendAt { get; init; }

    public LineChart Add(ChartSeries series)
    {
        Series.Add(series);
        return this;
    }

    /// <summary>Where an x value is drawn, given every x value the chart shows.</summary>
    public double Position(double x, IReadOnlyList<double> allX) => XScale switch
    {
        XScale.Log2 => Math.Log2(x),
        XScale.Categorical => IndexOf(allX, x),
        _ => x,
    };

    /// <summary>The distinct x values of every series, in increasing order.</summary>
    public IReadOnlyList<double> AllX() => [.. Series.SelectMany(s => s.Points).Select(p => p.X).Distinct().Order()];

    public void SavePng(string path, int width = 900, int height = 600)
    {
        if (XScale == XScale.Log2 && AllX().Any(x => x <= 0))
        {
            throw new InvalidOperationException($"Chart '{Title}': a log2 x axis needs positive x values.");
        }

        var allX = AllX();
        using var plot = new Plot();
        int colour = 0;
        bool legend = false;
        foreach (var series in Series)
        {
            var points = series.Points.ToList();
            if (points.Count == 0)
            {
                continue;
            }

            var scatter = plot.Add.Scatter(points.Select(p => Position(p.X, allX)).ToArray(), points.Select(p => p.Y).ToArray());
            scatter.LegendText = series.Label;
            legend |= series.Label.Length > 0;
            colour += series.Label.Length == 0 && colour > 0 ? 0 : 1;
            scatter.Color = plot.Add.Palette.GetColor(colour - 1);
            scatter.LineWidth = 2;
            scatter.MarkerSize = points.Count > 60 ? 0 : 8;
            if (series.Style == SeriesStyle.Paper)
            {
                scatter.LinePattern = LinePattern.Dashed;
                scatter.MarkerShape = MarkerShape.OpenSquare;
                scatter.MarkerSize = 10;
            }

            if (series.RightAxis)
            {
                scatter.Axes.YAxis = plot.Axes.Right;
            }
        }

        if (XScale != XScale.Linear && allX.Count > 0)
        {
            plot.Axes.Bottom.SetTicks([.. allX.Select(x => Position(x, allX))], [.. allX.Select(x => x.ToString("0.##", CultureInfo.InvariantCulture))]);
            double lo = Position(allX[0], allX), hi = Position(allX[^1], allX);
            double pad = Math.Max(0.5, (hi - lo) * 0.05);
            plot.Axes.SetLimitsX(lo - pad, hi + pad);
        }

        plot.Axes.SetLimitsY(0, Top(false), plot.Axes.Left);
        if (Series.Any(s => s.RightAxis))
        {
            plot.Axes.SetLimitsY(0, Top(true), plot.Axes.Right);
            plot.Axes.Right.Label.Text = RightLabel ?? "";
        }

        plot.Title(Subtitle is null ? Title : Title + "\n" + Subtitle);
        plot.XLabel(XLabel);
        plot.YLabel(YLabel);
        if (!legend)
        {
            plot.HideLegend(); // an empty legend panel below the plot would take the whole of a small image
        }
        else if (LegendAt is { } inside)
        {
            plot.ShowLegend(inside);
        }
        else
        {
            plot.ShowLegend(Edge.Bottom);
        }
        plot.SavePng(path, width, height);
    }

    /// <summary>The top of an axis: 10 % above its largest value (1 when it has none).</summary>
    private double Top(bool right)
    {
        double max = Series.Where(s => s.RightAxis == right).SelectMany(s => s.Points).Select(p => p.Y).DefaultIfEmpty(0).Max();
        return max > 0 ? max * 1.12 : 1;
    }

    private static int IndexOf(IReadOnlyList<double> values, double x)
    {
        for (int i = 0; i < values.Count; i++)
        {
            if (values[i] == x)
            {
                return i;
            }
        }

        throw new ArgumentException($"x = {x} is not among the chart's values.", nameof(x));
    }
}
