using System.Globalization;
using System.Text;

namespace QuickSilver.Compare.Output;

/// <summary>Writes one experiment's results as CSV (invariant culture, RFC 4180 quoting for the note).</summary>
internal static class CsvOut
{
    public const string Header = "experiment,system,receivers,groups,size_bytes,loss,messages,min_received,max_received,all_arrived,seconds,msgs_per_sec,mb_per_sec,note";

    public static string Format(string experiment, IEnumerable<PassResult> results)
    {
        var text = new StringBuilder(Header).Append('\n');
        foreach (var r in results)
        {
            var p = r.Point;
            text.Append(CultureInfo.InvariantCulture,
                $"{Quote(experiment)},{Quote(r.System)},{p.Receivers},{p.Groups},{p.Size},{p.Loss},{p.Messages},{r.MinReceived},{r.MaxReceived},")
                .Append(r.AllArrived ? "true" : "false")
                .Append(CultureInfo.InvariantCulture, $",{r.Seconds:0.######},{r.MessagesPerSecond:0.#},{r.MegabytesPerSecond:0.###},{Quote(r.Note)}\n");
        }

        return text.ToString();
    }

    public static void Write(string path, string experiment, IEnumerable<PassResult> results)
        => File.WriteAllText(path, Format(experiment, results));

    public static string Quote(string field)
        => field.IndexOfAny([',', '"', '\n', '\r']) < 0 ? field : "\"" + field.Replace("\"", "\"\"", StringComparison.Ordinal) + "\"";
}
