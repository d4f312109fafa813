using System.Diagnostics.Metrics;
using QuickSilver.Core.Security;
using QuickSilver.Qsm.Region;

namespace QuickSilver;

/// <summary>
/// A node's QSM counters on the "QuickSilver.Qsm" meter (<c>dotnet-counters monitor --counters QuickSilver.Qsm</c>):
/// per region it sends into, the rate-control state (μ_rec, μ_snd, α, credits, reported loss; §2.4) and the sender's window and
/// retransmissions; for the region it is a member of, token rounds, repairs, pulls and collective NAKs. Observers read
/// from any thread a copy-on-write list of the node's senders and plain fields the core thread writes; a value may be
/// one update old.
/// </summary>
internal sealed class QsmCounters : IDisposable
{
    public const string MeterName = "QuickSilver.Qsm";

    private readonly Meter _meter;
    private readonly bool _ownsMeter;
    private volatile bool _disposed;
    private volatile KeyValuePair<uint, RegionSender>[] _senders = [];
    private volatile RegionMember? _member;
    private volatile RegionLayer? _regions;
    private volatile DatagramSecurityCounters? _security;

    public QsmCounters(string node, IMeterFactory? meterFactory = null)
    {
        _ownsMeter = meterFactory is null;
        _meter = meterFactory?.Create(MeterName) ?? new Meter(MeterName);
        var tag = new KeyValuePair<string, object?>("node", node);
        Sender("qs.qsm.receiver_rate", s => s.RateController.ReceiverRate, "{packet}/s", "μ_rec: the region's receive rate per sender, from its last ACK (formula 1)");
        Sender("qs.qsm.target_rate", s => s.RateController.TargetRate, "{packet}/s", "μ_snd = max(μ_min, (1+λ)·μ_rec) (formula 2)");
        Sender("qs.qsm.actual_rate", s => s.RateController.ActualRate, "{packet}/s", "μ'_snd: the measured sending rate");
        Sender("qs.qsm.reported_loss", s => s.RateController.ReportedLoss, null, "The worst member's loss fraction from the last ACK (loss damping, docs/qsm.md)");
        Sender("qs.qsm.alpha", s => s.RateController.Alpha, null, "α of the credit refill f(α) = α·μ_snd (formula 3)");
        Sender("qs.qsm.credits", s => s.RateController.Credits, "{credit}", "c: the sender's credits (formula 4)");
        Sender("qs.qsm.unacknowledged", s => s.Unacknowledged, "{packet}", "Packets the sender keeps until the region's ACK");
        Sender("qs.qsm.retransmitted.nak", s => s.RetransmittedOnNak, "{packet}", "Packets resent for a partition's collective NAK");
        Sender("qs.qsm.retransmitted.timeout", s => s.RetransmittedOnTimeout, "{packet}", "Packets resent on the sender's timeout");
        Sender("qs.qsm.retransmitted.status", s => s.RetransmittedOnStatus, "{packet}", "Packets resent because a flow report named them missing (the default flow control's repairs)");
        Sender("qs.qsm.retransmitted.lost_resend", s => s.LostResends, "{packet}", "Of those, resends sent again at once because a report showed the last one lost (docs/qsm.md, \"Flow control\")");
        Sender("qs.qsm.window.blocked", s => s.WindowBlocked, "{pull}", "Pulls refused because the receivers' window (or the congestion window) was full");
        Sender("qs.qsm.report_delay", s => s.ReportDelay.TotalMilliseconds, "ms", "Smoothed time from a packet's first send to the report that it arrived (twice it is the repair hold-off)");
        Counter("qs.qsm.token.rounds", () => _member?.RoundsCompleted ?? 0, "{round}", "Token rounds completed while this node led its region");
        Counter("qs.qsm.repairs", () => _member?.RepairsSent ?? 0, "{packet}", "Packets pushed or pulled to a peer");
        Counter("qs.qsm.pulls", () => _member?.PullsSent ?? 0, "{request}");
        Counter("qs.security.opened", () => _security?.Opened ?? 0, "{packet}", "Received datagrams verified (datagram security on)");
        _meter.CreateObservableCounter("qs.security.rejected", ObserveRejections, "{packet}", "Received datagrams dropped by datagram security, by reason");
        Counter("qs.qsm.naks", () => _member?.NaksSent ?? 0, "{request}", "Collective NAKs sent to senders");
        Counter("qs.qsm.repairs.cut", () => _member?.RepairBudgetsSpent ?? 0, "{request}", "Push or pull answers cut at RegionOptions.MaxRepairBurst (the rest asked for again next round)");
        Counter("qs.qsm.naksets.coarsened", () => _member?.MissingSetsCoarsened ?? 0, "{set}", "Missing sets merged at RegionOptions.MaxNakRanges (a superset: a few duplicate repairs)");
        Counter("qs.qsm.naksets.truncated", () => _member?.RangeSetsTruncated ?? 0, "{request}", "NAKs and pulls sent with ranges dropped at RegionOptions.MaxNakRanges");
        Counter("qs.qsm.senders.released", () => _regions?.SendersReleased ?? 0, "{sender}", "Senders released because none of the node's groups maps to their region any more");
        Counter("qs.qsm.senders.stopped", () => _regions?.SendersStopped ?? 0, "{sender}", "Retired or released senders stopped (acknowledged, drain delay over, or evicted)");
        Counter("qs.qsm.senders.evicted", () => _regions?.RetiredSendersEvicted ?? 0, "{sender}", "Retired senders stopped at the MaxRetiredSenders bound with packets unacknowledged");

        IEnumerable<Measurement<long>> ObserveRejections()
        {
            if (_disposed || _security is not { } security)
            {
                yield break;
            }

            foreach (var reason in Enum.GetValues<DatagramRejection>().Where(r => r != DatagramRejection.None))
            {
                yield return new Measurement<long>(security[reason], tag, new KeyValuePair<string, object?>("reason", reason.ToString()));
            }
        }

        void Counter(string name, Func<long> read, string? unit, string? description = null)
            => _meter.CreateObservableCounter(name, () => _disposed ? [] : new[] { new Measurement<long>(read(), tag) }, unit, description);

        void Sender(string name, Func<RegionSender, double> read, string? unit, string description)
            => _meter.CreateObservableGauge(name, () => (_disposed ? [] : _senders).Select(kv => new Measurement<double>(read(kv.Value), tag,
                new KeyValuePair<string, object?>("region", kv.Key))), unit, description);
    }

    /// <summary>Core thread: reports on <paramref name="regions"/>' member and current senders from now on: each sender
    /// from its creation until the node registers again under a new id and retires it (a new sender into the same region
    /// takes its place), so there is one series per region this node sends into, never one per id it has had.</summary>
    public void Attach(RegionLayer regions)
    {
        ArgumentNullException.ThrowIfNull(regions);
        _regions = regions;
        regions.MemberChanged += SetMember;
        regions.SenderAdded += sender => Add(sender.Region, sender);
        regions.SenderRetired += Remove;
        foreach (var sender in regions.Senders)
        {
            Add(sender.Key, sender.Value);
        }

        if (regions.Member is { } member)
        {
            SetMember(member);
        }
    }

    /// <summary>Senders reported now (one per region this node sends into).</summary>
    public int Senders => _senders.Length;

    /// <summary>Core thread: a sender was created.</summary>
    private void Add(uint region, RegionSender sender) => _senders = [.. _senders, new(region, sender)];

    /// <summary>Core thread: a sender was retired (the node registered again): it is no longer reported.</summary>
    private void Remove(RegionSender sender) => _senders = [.. _senders.Where(kv => !ReferenceEquals(kv.Value, sender))];

    /// <summary>The node stack's datagram-security counters (when security is on).</summary>
    public void SetSecurity(DatagramSecurityCounters? counters) => _security = counters;

    /// <summary>Core thread: the node's region member changed.</summary>
    public void SetMember(RegionMember member) => _member = member;

    /// <summary>Stops reporting; disposes the meter unless a factory owns it.</summary>
    public void Dispose()
    {
        _disposed = true;
        _senders = [];
        if (_ownsMeter)
        {
            _meter.Dispose();
        }
    }
}
