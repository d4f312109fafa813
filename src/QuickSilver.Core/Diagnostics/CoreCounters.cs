using System.Diagnostics.Metrics;

namespace QuickSilver.Core.Diagnostics;

/// <summary>
/// The counters of one core. Written on the core thread with plain increments of fields read through
/// <see cref="Volatile"/> by observers; published as observable instruments on the "QuickSilver.Core" meter so
/// <c>dotnet-counters monitor --counters QuickSilver.Core</c> shows them, tagged with the core's name.
/// </summary>
public sealed class CoreCounters : IDisposable
{
    public const string MeterName = "QuickSilver.Core";

    private readonly Meter _meter;
    internal long PacketsIn;
    internal long BytesIn;
    internal long PacketsOut;
    internal long BytesOut;
    internal long IoBatches;
    internal long IoEvents;
    internal long AlarmBatches;
    internal long AlarmsFired;
    internal long DowncallsRun;
    internal long SendErrors;
    internal long UpcallFaults;

    public CoreCounters(string coreName, Func<int> downcallQueueDepth)
    {
        ArgumentNullException.ThrowIfNull(downcallQueueDepth);
        _meter = new Meter(MeterName);
        var tag = new KeyValuePair<string, object?>("core", coreName);
        _meter.CreateObservableCounter("qs.packets.in", () => new Measurement<long>(Read(ref PacketsIn), tag), "{packet}");
        _meter.CreateObservableCounter("qs.bytes.in", () => new Measurement<long>(Read(ref BytesIn), tag), "By");
        _meter.CreateObservableCounter("qs.packets.out", () => new Measurement<long>(Read(ref PacketsOut), tag), "{packet}");
        _meter.CreateObservableCounter("qs.bytes.out", () => new Measurement<long>(Read(ref BytesOut), tag), "By");
        _meter.CreateObservableCounter("qs.drops", ObserveDrops, "{packet}", "Packets dropped, by reason");
        _meter.CreateObservableCounter("qs.io.batches", () => new Measurement<long>(Read(ref IoBatches), tag));
        _meter.CreateObservableCounter("qs.io.events", () => new Measurement<long>(Read(ref IoEvents), tag), null, "I/O events handled; divide by qs.io.batches for the mean batch size");
        _meter.CreateObservableCounter("qs.alarm.batches", () => new Measurement<long>(Read(ref AlarmBatches), tag));
        _meter.CreateObservableCounter("qs.alarms.fired", () => new Measurement<long>(Read(ref AlarmsFired), tag), null, "Alarms fired; divide by qs.alarm.batches for the mean batch size");
        _meter.CreateObservableCounter("qs.downcalls", () => new Measurement<long>(Read(ref DowncallsRun), tag));
        _meter.CreateObservableGauge("qs.downcall.queue.depth", () => new Measurement<int>(downcallQueueDepth(), tag));
        _meter.CreateObservableCounter("qs.send.errors", () => new Measurement<long>(Read(ref SendErrors), tag));
        _meter.CreateObservableCounter("qs.upcall.faults", () => new Measurement<long>(Read(ref UpcallFaults), tag), null, "Exceptions thrown by handlers and alarms, caught by the core");

        IEnumerable<Measurement<long>> ObserveDrops()
        {
            foreach (var reason in Enum.GetValues<DropReason>())
            {
                yield return new Measurement<long>(Drops[reason], tag, new KeyValuePair<string, object?>("reason", reason.ToString()));
            }
        }
    }

    public DropCounters Drops { get; } = new();

    public long PacketsReceived => Read(ref PacketsIn);
    public long BytesReceived => Read(ref BytesIn);
    public long PacketsSent => Read(ref PacketsOut);
    public long BytesSent => Read(ref BytesOut);
    public long IoBatchCount => Read(ref IoBatches);
    public long IoEventCount => Read(ref IoEvents);
    public long AlarmBatchCount => Read(ref AlarmBatches);
    public long AlarmsFiredCount => Read(ref AlarmsFired);
    public long DowncallCount => Read(ref DowncallsRun);
    public long SendErrorCount => Read(ref SendErrors);
    public long UpcallFaultCount => Read(ref UpcallFaults);

    private static long Read(ref long field) => Volatile.Read(ref field);

    public void Dispose() => _meter.Dispose();
}
