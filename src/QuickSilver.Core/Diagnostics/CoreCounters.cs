using System.Diagnostics.Metrics;

namespace QuickSilver.Core.Diagnostics;

/// <summary>
/// The counters of one core. Written on the core thread with plain increments of fields read through
/// <see cref="Volatile"/> by observers; published as observable instruments on the "QuickSilver.Core" meter so
/// <c>dotnet-counters monitor --counters QuickSilver.Core</c> shows them, tagged with the core's name. The meter comes
/// from the host's <see cref="IMeterFactory"/> when one is given (which owns it, and shares it between the cores of a
/// process), otherwise it is the core's own; either way, once disposed the instruments report nothing.
/// </summary>
public sealed class CoreCounters : IDisposable
{
    public const string MeterName = "QuickSilver.Core";

    private readonly Meter _meter;
    private readonly bool _ownsMeter;
    private volatile bool _disposed;
    internal long PacketsIn;
    internal long BytesIn;
    internal long PacketsOut;
    internal long BytesOut;
    internal long IoBatches;
    internal long IoEvents;
    internal long AlarmBatches;
    internal long AlarmsFired;
    internal long CoalescingNaps;
    internal long DowncallsRun;
    internal long DowncallsRefused; // any thread: Interlocked
    internal long SendErrors;
    internal long UpcallFaults;

    public CoreCounters(string coreName, Func<int> downcallQueueDepth, IMeterFactory? meterFactory = null)
    {
        ArgumentNullException.ThrowIfNull(downcallQueueDepth);
        _ownsMeter = meterFactory is null;
        _meter = meterFactory?.Create(MeterName) ?? new Meter(MeterName);
        var tag = new KeyValuePair<string, object?>("core", coreName);
        Counter("qs.packets.in", () => Read(ref PacketsIn), "{packet}");
        Counter("qs.bytes.in", () => Read(ref BytesIn), "By");
        Counter("qs.packets.out", () => Read(ref PacketsOut), "{packet}");
        Counter("qs.bytes.out", () => Read(ref BytesOut), "By");
        _meter.CreateObservableCounter("qs.drops", ObserveDrops, "{packet}", "Packets dropped, by reason");
        Counter("qs.io.batches", () => Read(ref IoBatches));
        Counter("qs.io.events", () => Read(ref IoEvents), null, "I/O events handled; divide by qs.io.batches for the mean batch size");
        Counter("qs.alarm.batches", () => Read(ref AlarmBatches));
        Counter("qs.alarms.fired", () => Read(ref AlarmsFired), null, "Alarms fired; divide by qs.alarm.batches for the mean batch size");
        Counter("qs.downcalls", () => Read(ref DowncallsRun));
        Counter("qs.io.naps", () => Read(ref CoalescingNaps), null, "Receive-coalescing sleeps (CoreOptions.ReceiveCoalescing)");
        Counter("qs.downcalls.refused", () => Read(ref DowncallsRefused), null, "Downcalls refused because the downcall queue was full (CoreOptions.DowncallQueueCapacity); the caller waits and posts again");
        _meter.CreateObservableGauge("qs.downcall.queue.depth", () => _disposed ? [] : new[] { new Measurement<int>(downcallQueueDepth(), tag) });
        Counter("qs.send.errors", () => Read(ref SendErrors));
        Counter("qs.upcall.faults", () => Read(ref UpcallFaults), null, "Exceptions thrown by handlers and alarms, caught by the core");

        void Counter(string name, Func<long> read, string? unit = null, string? description = null)
            => _meter.CreateObservableCounter(name, () => _disposed ? [] : new[] { new Measurement<long>(read(), tag) }, unit, description);

        IEnumerable<Measurement<long>> ObserveDrops()
        {
            if (_disposed)
            {
                yield break;
            }

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

    /// <summary>Times the core slept to coalesce receives (<see cref="CoreOptions.ReceiveCoalescing"/>).</summary>
    public long CoalescingNapCount => Read(ref CoalescingNaps);
    public long DowncallCount => Read(ref DowncallsRun);

    /// <summary>Downcalls <c>TryPost</c> refused because the queue was at <see cref="CoreOptions.DowncallQueueCapacity"/>
    /// (not those refused because the core stopped). Any thread.</summary>
    public long DowncallsRefusedCount => Read(ref DowncallsRefused);
    public long SendErrorCount => Read(ref SendErrors);
    public long UpcallFaultCount => Read(ref UpcallFaults);

    private static long Read(ref long field) => Volatile.Read(ref field);

    /// <summary>Stops reporting; disposes the meter unless a factory owns it (a factory's meter lives as long as the factory).</summary>
    public void Dispose()
    {
        _disposed = true;
        if (_ownsMeter)
        {
            _meter.Dispose();
        }
    }
}
