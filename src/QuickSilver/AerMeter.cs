using System.Diagnostics.Metrics;
using QuickSilver.Aer;
using QuickSilver.Core.Diagnostics;

namespace QuickSilver;

/// <summary>
/// A node's AER counters on the "QuickSilver.Aer" meter (<c>dotnet-counters monitor --counters QuickSilver.Aer</c>,
/// docs/aer.md "Meters"): what the node's AER layer did across its sessions (<see cref="AerCounters"/>: data, SPMs,
/// NAKs sent, received, suppressed and subcast, repairs, CSMs, ACKs, drops by reason) and, per session, the repair
/// cache's bytes (source and repair servers) and NCA's window (source). Observers read from any thread the counters'
/// plain fields and a copy-on-write array of the node's roles, both written by the core thread; a value may be one
/// update old.
/// </summary>
internal sealed class AerMeter : IDisposable
{
    public const string MeterName = "QuickSilver.Aer";

    private readonly Meter _meter;
    private readonly bool _ownsMeter;
    private readonly AerCounters _counters;
    private readonly KeyValuePair<string, object?> _node;
    private volatile bool _disposed;
    private volatile AerRole[] _roles = [];

    public AerMeter(string node, AerCounters counters, IMeterFactory? meterFactory = null)
    {
        _ownsMeter = meterFactory is null;
        _meter = meterFactory?.Create(MeterName) ?? new Meter(MeterName);
        _counters = counters;
        _node = new KeyValuePair<string, object?>("node", node);
        Counter("qs.aer.data.sent", c => c.DataSent, "{packet}", "Data packets the source multicast (first transmissions)");
        Counter("qs.aer.spms.sent", c => c.SpmsSent, "{packet}", "SPMs sent: the source's, and those a repair server rewrote and subcast");
        Counter("qs.aer.naks.sent", c => c.NaksSent, "{packet}", "NAKs sent upstream");
        Counter("qs.aer.naks.suppressed", c => c.NaksSuppressed, "{packet}", "NAKs not sent because the upstream's NAK subcast covered them");
        Counter("qs.aer.naks.timeouts", c => c.NakTimeouts, "{timeout}", "NAK timers that expired unanswered (each a new loss)");
        Counter("qs.aer.naks.received", c => c.NaksReceived, "{packet}", "NAKs received from children (repair server, source)");
        Counter("qs.aer.naks.subcast", c => c.NakSubcasts, "{packet}", "NAKs a repair server subcast downstream to suppress its children's");
        Counter("qs.aer.repairs.sent", c => c.RepairsSent, "{packet}", "Repairs sent from a cache");
        Counter("qs.aer.repairs.forwarded", c => c.RepairsForwarded, "{packet}", "Repairs a repair server forwarded where a NAK was pending");
        Counter("qs.aer.repairs.received", c => c.RepairsReceived, "{packet}", "Repairs received");
        Counter("qs.aer.duplicates", c => c.Duplicates, "{packet}", "Data packets received twice");
        Counter("qs.aer.delivered", c => c.Delivered, "{message}", "Messages delivered in order to the application");
        Counter("qs.aer.unrecoverable", c => c.Unrecoverable, "{packet}", "Packets skipped because no cache above holds them any more");
        Counter("qs.aer.cache.evictions", c => c.CacheEvictions, "{packet}", "Packets evicted from a repair cache at its byte bound");
        Counter("qs.aer.csms.sent", c => c.CsmsSent, "{packet}", "Congestion state messages sent (§4.2.1)");
        Counter("qs.aer.acks.sent", c => c.AcksSent, "{packet}", "ACKs sent as NCA's nominee");
        Counter("qs.aer.acks.received", c => c.AcksReceived, "{packet}", "ACKs the source took from its nominee");
        Counter("qs.aer.nominee.changes", c => c.NomineeChanges, "{change}", "Nominees the source chose or replaced");
        Counter("qs.aer.upstream.failovers", c => c.UpstreamFailovers, "{failover}", "Times a node passed over an upstream repair server that stopped repairing");
        Counter("qs.aer.window_overflow", c => c.WindowOverflow, "{packet}", "Packets beyond a receiver's window, dropped and NAKed later");
        Counter("qs.aer.repair_queue_full", c => c.RepairQueueFull, "{packet}", "Repairs refused at RepairQueueLimit");
        _meter.CreateObservableCounter("qs.aer.dropped", ObserveDrops, "{packet}", "AER datagrams dropped, by reason (Malformed, NotAMember, NotForThisNode)");
        Session("qs.aer.cache.bytes", static role => role switch
        {
            AerSender s => s.Cache.Bytes,
            RepairServer r => r.Cache.Bytes,
            _ => null,
        }, "By", "Bytes in the session's repair cache (the source's or this node's repair server's)");
        Session("qs.aer.nca.window", static role => role is AerSender s ? s.Window.W : null, "{packet}", "NCA's congestion window W at the source (§4.2.2)");
        Session("qs.aer.nca.threshold", static role => role is AerSender s ? s.Window.Thresh : null, "{packet}", "NCA's slow-start threshold at the source (§4.2.2)");
        Session("qs.aer.nca.in_flight", static role => role is AerSender s ? s.Window.InFlight : null, "{packet}", "Packets the source has sent and its nominee not yet ACKed");

        void Counter(string name, Func<AerCounters, long> read, string unit, string description)
            => _meter.CreateObservableCounter(name, () => _disposed ? [] : new[] { new Measurement<long>(read(_counters), _node) }, unit, description);

        void Session(string name, Func<AerRole, double?> read, string unit, string description)
            => _meter.CreateObservableGauge(name, () => ObserveSessions(read), unit, description);
    }

    /// <summary>Core thread: the node's roles changed (a group joined or left, repair servers started).</summary>
    public void SetRoles(AerRole[] roles) => _roles = roles;

    private IEnumerable<Measurement<long>> ObserveDrops()
    {
        if (_disposed)
        {
            yield break;
        }

        foreach (var reason in Enum.GetValues<DropReason>())
        {
            if (_counters.Drops[reason] is > 0 and var count)
            {
                yield return new Measurement<long>(count, _node, new KeyValuePair<string, object?>("reason", reason.ToString()));
            }
        }
    }

    private IEnumerable<Measurement<double>> ObserveSessions(Func<AerRole, double?> read)
    {
        foreach (var role in _disposed ? [] : _roles)
        {
            if (read(role) is { } value)
            {
                yield return new Measurement<double>(value, _node, new KeyValuePair<string, object?>("session", (long)role.Session),
                    new KeyValuePair<string, object?>("role", Role(role)));
            }
        }
    }

    private static string Role(AerRole role) => role switch
    {
        AerSender => "source",
        RepairServer => "repair-server",
        _ => "receiver",
    };

    /// <summary>Stops reporting; disposes the meter unless a factory owns it.</summary>
    public void Dispose()
    {
        _disposed = true;
        _roles = [];
        if (_ownsMeter)
        {
            _meter.Dispose();
        }
    }
}
