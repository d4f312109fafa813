using System.Globalization;
using System.Text;

namespace QuickSilver.Compare.Output;

/// <summary>QuickSilver's throughput over JGroups' and raw UDP's at the same point (the baselines run without loss, so a
/// lossy QuickSilver point is set against the lossless baselines of its configuration), as a Markdown table.</summary>
internal static class Ratios
{
    public static string Markdown(Experiment experiment, IReadOnlyList<PassResult> results)
    {
        var text = new StringBuilder();
        bool secured = results.Any(r => Systems.IsQuickSilver(r.System) && r.System != Systems.QuickSilver);
        string series = secured ? " series |" : "";
        string versusOff = secured ? " vs security off |" : "";
        text.Append(CultureInfo.InvariantCulture, $"| {experiment.XLabel} |{series} QuickSilver msg/s | JGroups msg/s | raw UDP msg/s | sockperf msg/s | QS/JGroups | QS/raw UDP | QS/sockperf |{versusOff} notes |\n");
        text.Append(secured ? "|---|---|---|---|---|---|---|---|---|---|---|\n" : "|---|---|---|---|---|---|---|---|---|\n");
        foreach (var qs in results.Where(r => Systems.IsQuickSilver(r.System)))
        {
            var jg = Find(results, Systems.JGroups, qs.Point);
            var udp = Find(results, Systems.RawUdp, qs.Point);
            var sockperf = Find(results, Systems.Sockperf, qs.Point);
            var off = results.FirstOrDefault(r => r.System == Systems.QuickSilver && r.Point == qs.Point);
            var notes = new[] { qs, jg, udp, sockperf }.OfType<PassResult>().Where(r => r.Note.Length > 0).Select(r => $"{r.System}: {r.Note}");
            text.Append(CultureInfo.InvariantCulture, $"| {experiment.X(qs.Point):0.##} |{(secured ? $" {qs.System} |" : "")} {Rate(qs)} | {Rate(jg)} | {Rate(udp)} | {Rate(sockperf)} | {Ratio(qs, jg)} | {Ratio(qs, udp)} | {Ratio(qs, sockperf)} |");
            text.Append(secured ? $" {Ratio(qs, off)} |" : "");
            text.Append(CultureInfo.InvariantCulture, $" {string.Join("; ", notes)} |\n");
        }

        return text.ToString();
    }

    /// <summary>With <c>--repeat</c>, for each QuickSilver series: every later point's rate over the experiment's first
    /// point's (loss 0 %, one group, …) in the same round, and the median of those ratios (the lower middle of an even
    /// count). Runs of one round were measured minutes apart (<see cref="Plan.Rounds"/>), so each ratio's two rates met
    /// much the same load from the machine's other tenants. Empty without repeats, and when the first point was
    /// not among <paramref name="results"/> (the runner passes only what this experiment measured: a point an earlier
    /// experiment measured is reused, but its rounds were another experiment's).</summary>
    public static string Paired(Experiment experiment, IReadOnlyList<PassResult> results)
    {
        var text = new StringBuilder();
        foreach (var series in results.Where(r => Systems.IsQuickSilver(r.System)).Select(r => r.System).Distinct())
        {
            var baseline = results.FirstOrDefault(r => r.System == series && r.Point == experiment.Points[0]);
            if (baseline is null || baseline.Runs.Count < 2)
            {
                continue;
            }

            foreach (var other in results.Where(r => r.System == series && r.Point != baseline.Point && r.Runs.Count == baseline.Runs.Count))
            {
                if (text.Length == 0)
                {
                    text.Append(CultureInfo.InvariantCulture, $"\nPaired by round: each point's rate over the {experiment.X(experiment.Points[0]):0.##} point's in the same round.\n\n");
                    text.Append(CultureInfo.InvariantCulture, $"| {experiment.XLabel} | series | ratio per round | median |\n|---|---|---|---|\n");
                }

                var ratios = other.Runs.Select((rate, round) => baseline.Runs[round] > 0 ? rate / baseline.Runs[round] : 0).ToList();
                string each = string.Join(" ", ratios.Select(r => r.ToString("0.00", CultureInfo.InvariantCulture)));
                double median = ratios.Order().ElementAt((ratios.Count - 1) / 2);
                text.Append(CultureInfo.InvariantCulture, $"| {experiment.X(other.Point):0.##} | {series} | {each} | {median:0.00} |\n");
            }
        }

        return text.ToString();
    }

    private static PassResult? Find(IReadOnlyList<PassResult> results, string system, ExperimentPoint point)
        => results.FirstOrDefault(r => r.System == system && r.Point == point.Lossless);

    private static string Rate(PassResult? r) => r is null || r.Seconds <= 0 ? "n/a" : r.MessagesPerSecond.ToString("N0", CultureInfo.InvariantCulture);

    private static string Ratio(PassResult qs, PassResult? other)
        => other is null || other.MessagesPerSecond <= 0 || qs.MessagesPerSecond <= 0
            ? "n/a"
            : (qs.MessagesPerSecond / other.MessagesPerSecond).ToString("0.00", CultureInfo.InvariantCulture);
}
