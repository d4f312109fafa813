using System.Globalization;
using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Compare.Output;

/// <summary>One receiver's rate over time, from the sender's first send: the end of each window (ms) and the messages a
/// second it received in it.</summary>
internal sealed record RampSeries(int Receiver, double[] Milliseconds, double[] Rate, double SteadyRate, double? MillisecondsTo90);

/// <summary>
/// Issue 11's ramp target ("90 % of the steady rate within 0.2 s of the first send; plot rate over time"): each receiver's
/// arrivals per millisecond (<see cref="ArrivalTimeline"/>) cut into windows, placed on the sender's clock (one machine:
/// the same clock), the steady rate (the median window over the middle half of the receiver's run) and the end of the
/// first window at 90 % of it or more. Written as ramp.csv, ramp.png and a paragraph of summary.md.
/// </summary>
internal static class RampOut
{
    public const int WindowMilliseconds = 10;

    public static RampSeries Analyze(int receiver, long firstSendMicros, long firstArrivalMicros, int[] perMillisecond, int window = WindowMilliseconds)
    {
        double offset = (firstArrivalMicros - firstSendMicros) / 1000.0;
        int windows = perMillisecond.Length / window; // a last partial window is left out
        var ms = new double[windows];
        var rate = new double[windows];
        for (int k = 0; k < windows; k++)
        {
            long count = 0;
            for (int i = k * window; i < (k + 1) * window; i++)
            {
                count += perMillisecond[i];
            }

            ms[k] = offset + ((k + 1) * window);
            rate[k] = count * 1000.0 / window;
        }

        double steady = windows == 0 ? 0 : Median(rate[(windows / 4)..Math.Max(windows / 4 + 1, 3 * windows / 4)]);
        double? to90 = null;
        for (int k = 0; k < windows && steady > 0; k++)
        {
            if (rate[k] >= 0.9 * steady)
            {
                to90 = ms[k];
                break;
            }
        }

        return new RampSeries(receiver, ms, rate, steady, to90);
    }

    public static void Write(string folder, IReadOnlyList<RampSeries> series, PassResult pass)
    {
        var table = new CsvTable(["receiver", "ms_since_first_send", "msgs_per_sec"]);
        foreach (var s in series)
        {
            for (int k = 0; k < s.Milliseconds.Length; k++)
            {
                table.Add([CsvTable.Cell(s.Receiver), CsvTable.Cell(Math.Round(s.Milliseconds[k], 3)), CsvTable.Cell(s.Rate[k])]);
            }
        }

        table.Write(Path.Combine(folder, "ramp.csv"));
        var chart = new LineChart("QuickSilver ramp: rate over time from the first send", "ms since the sender's first send",
            $"messages/s per {WindowMilliseconds} ms window")
        {
            Subtitle = string.Create(CultureInfo.InvariantCulture, $"{pass.Point.Receivers} receivers, {pass.Point.Size} B, {pass.Point.Total:N0} messages, no warm-up; first second shown"),
        };
        foreach (var s in series)
        {
            int shown = s.Milliseconds.TakeWhile(m => m <= 1000).Count();
            chart.Add(new ChartSeries($"receiver {s.Receiver}", s.Milliseconds[..shown], s.Rate[..shown]));
        }

        chart.SavePng(Path.Combine(folder, "ramp.png"), 900, 600);
    }

    public static string Markdown(IReadOnlyList<RampSeries> series, PassResult pass)
    {
        var lines = new List<string>
        {
            "### ramp",
            "",
            string.Create(CultureInfo.InvariantCulture, $"QuickSilver, {pass.Point.Receivers} receivers, {pass.Point.Size} B, {pass.Point.Total:N0} messages from a cold start (no warm-up); {WindowMilliseconds} ms windows; steady rate = median window over the middle half of each receiver's run. Target: 90 % of the steady rate within 200 ms of the first send."),
            "",
            "| receiver | steady rate (msgs/s) | first window at ≥ 90 % ends at (ms after the first send) |",
            "|---:|---:|---:|",
        };
        lines.AddRange(series.Select(s => string.Create(CultureInfo.InvariantCulture,
            $"| {s.Receiver} | {s.SteadyRate:N0} | {(s.MillisecondsTo90 is { } t ? t.ToString("F1", CultureInfo.InvariantCulture) : "never")} |")));
        return string.Join("\n", lines) + "\n";
    }

    private static double Median(double[] values)
    {
        var sorted = values.Order().ToArray();
        return sorted.Length == 0 ? 0 : sorted.Length % 2 == 1 ? sorted[sorted.Length / 2] : (sorted[(sorted.Length / 2) - 1] + sorted[sorted.Length / 2]) / 2;
    }
}
