using System.Diagnostics;
using QuickSilver.Core.Diagnostics;

namespace QuickSilver;

/// <summary>
/// The names a telemetry pipeline subscribes to: the meters (<see cref="MeterNames"/>; OpenTelemetry's
/// <c>AddMeter</c>, <c>dotnet-counters --counters</c>) and the activity source (<see cref="ActivitySourceName"/>;
/// OpenTelemetry's <c>AddSource</c>) that traces publishing and delivery when <see cref="QuickSilverNodeOptions.Tracing"/> is on.
/// </summary>
public static class QuickSilverTelemetry
{
    /// <summary>The activity source of publish ("qs.publish", producer) and deliver ("qs.deliver", consumer) activities.</summary>
    public const string ActivitySourceName = "QuickSilver";

    /// <summary>The core's meter (packets, bytes, drops by reason, batches, downcalls).</summary>
    public const string CoreMeterName = CoreCounters.MeterName;

    /// <summary>The QSM meter (rate control, retransmissions, token rounds, repairs, datagram security).</summary>
    public const string QsmMeterName = QsmCounters.MeterName;

    /// <summary>The AER meter (NAKs, repairs, repair-cache bytes, NCA's window, drops by reason; docs/aer.md).</summary>
    public const string AerMeterName = AerMeter.MeterName;

    /// <summary>Every meter a node publishes.</summary>
    public static IReadOnlyList<string> MeterNames { get; } = [CoreMeterName, QsmMeterName, AerMeterName];

    internal static readonly ActivitySource Source = new(ActivitySourceName);

    /// <summary>Starts a publish or deliver activity when tracing is on and a listener samples it; null otherwise (the
    /// common case costs one flag test and, with tracing on, one listener check).</summary>
    internal static Activity? Start(bool tracing, string name, ActivityKind kind, string group, int bytes)
    {
        if (!tracing || !Source.HasListeners())
        {
            return null;
        }

        var activity = Source.StartActivity(name, kind);
        if (activity is not null)
        {
            activity.SetTag("messaging.system", "quicksilver");
            activity.SetTag("messaging.destination.name", group);
            activity.SetTag("messaging.message.body.size", bytes);
        }

        return activity;
    }
}
