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

    private static PassResult? Find(IReadOnlyList<PassResult> results, string system, ExperimentPoint point)
        => results.FirstOrDefault(r => r.System == system && r.Point == point.Lossless);

    private static string Rate(PassResult? r) => r is null || r.Seconds <= 0 ? "n/a" : r.MessagesPerSecond.ToString("N0", CultureInfo.InvariantCulture);

    private static string Ratio(PassResult qs, PassResult? other)
        => other is null || other.MessagesPerSecond <= 0 || qs.MessagesPerSecond <= 0
            ? "n/a"
            : (qs.MessagesPerSecond / other.MessagesPerSecond).ToString("0.00", CultureInfo.InvariantCulture);
}
