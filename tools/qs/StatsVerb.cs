using System.CommandLine;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.Text.Json;
using Microsoft.Diagnostics.NETCore.Client;
using Microsoft.Diagnostics.Tracing;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>One instrument's latest reading in <c>qs stats</c>: the cumulative value of a counter (and its rate over the
/// last refresh interval), or a gauge's last value; tags as "key=value,…" (the core's name, the node's address, a drop reason).</summary>
internal sealed record StatReading(string Meter, string Instrument, string Tags, string? Unit, double Value, double? Rate);

/// <summary>
/// <c>qs stats --pid N</c>: reads a running process's QuickSilver counters ("QuickSilver.Core" and "QuickSilver.Qsm"
/// meters) the way dotnet-counters does: an EventPipe session on the runtime's System.Diagnostics.Metrics event source,
/// over the process's diagnostics socket. Any .NET process running a node works (qs node, the samples, an application);
/// nothing in the node listens for it. Collects for --seconds, then prints each instrument's latest reading.
/// </summary>
internal static class StatsVerb
{
    private const string MetricsProvider = "System.Diagnostics.Metrics";

    public static Command Create(Option<bool> json)
    {
        var pid = new Option<int?>("--pid") { Description = "Process id of the running node (without it: lists the .NET processes that can be read)" };
        var seconds = Cli.Int("--seconds", "How long to collect; readings refresh once a second", 3, 2, 600);
        var meters = new Option<string[]>("--meter") { Description = "Meters to read; repeat for several", DefaultValueFactory = _ => [.. QuickSilverTelemetry.MeterNames] };
        var command = new Command("stats", "Read a running node's counters (its QuickSilver meters) over EventPipe, as dotnet-counters does.")
        {
            pid, seconds, meters,
        };
        command.SetAction((parse, cancellationToken) => parse.GetValue(pid) is { } id
            ? RunAsync(id, parse.GetValue(seconds), parse.GetValue(meters)!, parse.GetValue(json), cancellationToken)
            : Task.FromResult(List(parse.GetValue(json))));
        return command;
    }

    private static int List(bool json)
    {
        var processes = DiagnosticsClient.GetPublishedProcesses()
            .Where(id => id != Environment.ProcessId)
            .Select(id => (Id: id, Name: NameOf(id)))
            .ToList();
        if (json)
        {
            Console.WriteLine(JsonSerializer.Serialize(processes.Select(p => new { pid = p.Id, name = p.Name })));
        }
        else
        {
            Console.WriteLine("Give --pid; .NET processes that can be read:");
            foreach (var (id, name) in processes)
            {
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"  {id,8}  {name}"));
            }
        }

        return Cli.BadOptions;
    }

    private static string NameOf(int pid)
    {
        try
        {
            using var process = System.Diagnostics.Process.GetProcessById(pid);
            return process.ProcessName;
        }
        catch (ArgumentException)
        {
            return "?";
        }
    }

    private static async Task<int> RunAsync(int pid, int seconds, string[] meters, bool json, CancellationToken cancellationToken)
    {
        var readings = await ReadAsync(pid, TimeSpan.FromSeconds(seconds), meters, cancellationToken);
        if (readings is null)
        {
            return 1;
        }

        if (json)
        {
            Console.WriteLine(JsonSerializer.Serialize(readings.Select(r => new { meter = r.Meter, instrument = r.Instrument, tags = r.Tags, unit = r.Unit, value = r.Value, rate = r.Rate })));
        }
        else if (readings.Count == 0)
        {
            Console.WriteLine($"Process {pid} published no readings of {string.Join(", ", meters)} in {seconds} s (no QuickSilver node in it?).");
        }
        else
        {
            foreach (var r in readings)
            {
                string rate = r.Rate is { } perSecond ? string.Create(CultureInfo.InvariantCulture, $"  ({perSecond:N1}/s)") : "";
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"{r.Instrument,-30} {r.Value,18:N2} {r.Unit,-10} {r.Tags}{rate}"));
            }
        }

        return readings.Count == 0 ? 1 : 0;
    }

    /// <summary>The latest reading of every instrument of <paramref name="meters"/> in process <paramref name="pid"/>,
    /// sorted by instrument and tags; null (with a message on stderr) when the process cannot be read.</summary>
    internal static async Task<List<StatReading>?> ReadAsync(int pid, TimeSpan duration, IReadOnlyList<string> meters, CancellationToken cancellationToken)
    {
        string sessionId = Guid.NewGuid().ToString();
        var provider = new EventPipeProvider(MetricsProvider, EventLevel.Informational, keywords: 0x2 /* time-series values */, new Dictionary<string, string>
        {
            ["SessionId"] = sessionId,
            ["Metrics"] = string.Join(';', meters),
            ["RefreshInterval"] = "1",
            ["MaxTimeSeries"] = "1000",
            ["MaxHistograms"] = "10",
        });
        EventPipeSession session;
        try
        {
            session = await new DiagnosticsClient(pid).StartEventPipeSessionAsync([provider], requestRundown: false, circularBufferMB: 16, cancellationToken);
        }
        catch (Exception e) when (e is ServerNotAvailableException or UnsupportedCommandException or ServerErrorException)
        {
            await Console.Error.WriteLineAsync($"Cannot read process {pid}: {e.Message}");
            return null;
        }

        var latest = new Dictionary<(string, string), StatReading>();
        using (session)
        {
            using var source = new EventPipeEventSource(session.EventStream);
            source.Dynamic.All += e =>
            {
                if (e.ProviderName != MetricsProvider || e.PayloadByName("sessionId") as string != sessionId)
                {
                    return;
                }

                (double Value, double? Rate)? reading = e.EventName switch
                {
                    "CounterRateValuePublished" or "UpDownCounterRateValuePublished" => (Number(e.PayloadByName("value")), Number(e.PayloadByName("rate")) is var rate && double.IsFinite(rate) ? rate : null),
                    "GaugeValuePublished" => (Number(e.PayloadByName("lastValue")), null),
                    _ => null,
                };
                if (reading is { } r && e.PayloadByName("instrumentName") is string instrument)
                {
                    string tags = e.PayloadByName("tags") as string ?? "";
                    lock (latest)
                    {
                        latest[(instrument, tags)] = new StatReading((string)e.PayloadByName("meterName"), instrument, tags,
                            e.PayloadByName("unit") as string is { Length: > 0 } unit ? unit : null, r.Value, r.Rate);
                    }
                }
            };
            var processing = Task.Run(source.Process, CancellationToken.None);
            try
            {
                await Task.Delay(duration, cancellationToken);
            }
            finally
            {
                await session.StopAsync(CancellationToken.None);
                await processing;
            }
        }

        lock (latest)
        {
            return [.. latest.Values.OrderBy(r => r.Meter, StringComparer.Ordinal).ThenBy(r => r.Instrument, StringComparer.Ordinal).ThenBy(r => r.Tags, StringComparer.Ordinal)];
        }
    }

    private static double Number(object? value) => value switch
    {
        double d => d,
        string s => double.TryParse(s, NumberStyles.Float, CultureInfo.InvariantCulture, out var parsed) ? parsed : double.NaN,
        IConvertible c => c.ToDouble(CultureInfo.InvariantCulture),
        _ => double.NaN,
    };
}
