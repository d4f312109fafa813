using System.Globalization;
using QuickSilver.BenchmarkOutput;

namespace QuickSilver.Compare.Output;

/// <summary>One experiment's results as CSV (QuickSilver.BenchmarkOutput's writer: invariant culture, RFC 4180 quoting).
/// <c>warmup</c> and <c>messages</c> are the untimed and the measured counts; <c>min_received</c>/<c>max_received</c>
/// count both (the delivery check), <c>min_measured</c> only the measured ones (the throughput's numerator).
/// <c>sender_cpu_us_per_msg</c>/<c>receiver_cpu_us_per_msg</c>: QuickSilver's process CPU per measured message (empty for
/// the other systems); <c>receiver_working_set_mib</c>: QuickSilver's largest receiver resident set at the end;
/// <c>runs_msgs_per_sec</c>: with <c>--repeat</c>, every run's rate, the row being the median run.</summary>
internal static class CsvOut
{
    public static readonly IReadOnlyList<string> Columns =
    [
        "experiment", "system", "receivers", "groups", "size_bytes", "loss", "warmup", "messages", "min_received", "max_received",
        "min_measured", "all_arrived", "seconds", "msgs_per_sec", "mb_per_sec", "sender_cpu_us_per_msg", "receiver_cpu_us_per_msg",
        "receiver_working_set_mib", "runs_msgs_per_sec", "note",
    ];

    public static string Header => string.Join(',', Columns);

    public static CsvTable Table(string experiment, IEnumerable<PassResult> results)
    {
        var table = new CsvTable(Columns);
        foreach (var r in results)
        {
            var p = r.Point;
            table.Add([.. new object[]
            {
                experiment, r.System, p.Receivers, p.Groups, p.Size, p.Loss, p.Warmup, p.Messages, r.MinReceived, r.MaxReceived,
                r.MinMeasured, r.AllArrived, Math.Round(r.Seconds, 6), Math.Round(r.MessagesPerSecond, 1), Math.Round(r.MegabytesPerSecond, 3),
                Cpu(r.SenderCpuMicros, r.CpuMicrosPerMessage.Sender), Cpu(r.ReceiverCpuMicros, r.CpuMicrosPerMessage.Receiver),
                r.ReceiverWorkingSetMb > 0 ? r.ReceiverWorkingSetMb : "",
                string.Join(' ', r.Runs.Select(rate => Math.Round(rate).ToString(CultureInfo.InvariantCulture))), r.Note,
            }.Select(CsvTable.Cell)]);
        }

        return table;
    }

    private static object Cpu(long measured, double perMessage) => measured > 0 ? Math.Round(perMessage, 4) : "";

    public static string Format(string experiment, IEnumerable<PassResult> results) => Table(experiment, results).Format();

    public static void Write(string path, string experiment, IEnumerable<PassResult> results) => Table(experiment, results).Write(path);
}
