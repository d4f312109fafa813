using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Cluster;

/// <summary>
/// The standby control node (docs/federation.md, "Standby control node"; ours, the seed leaves control-node failover
/// to "traditional methods"): with <see cref="ClusterOptions.ControlNodes"/> = 2 the gateway has two control nodes and
/// one leads a term. The active one sends LEAD every heartbeat interval; the passive one takes over with the next term
/// of its parity after <see cref="ClusterOptions.TakeoverTimeout"/> without a sign of the leader (a LEAD, or a data
/// node's HEARTBEAT saying it heard the leader), and adopts placement and labels from the data nodes' REPORTs; an
/// active one that hears a higher term steps down.
/// </summary>
public sealed partial class DataCoordinator
{
    /// <summary>This control node leads (places sessions, sends ASSIGNs). Always true with one control node.</summary>
    public bool IsActive => _active;

    /// <summary>The term this control node leads (active), or 0 for a standby that never led.</summary>
    public uint Term => _term;

    /// <summary>The highest term heard from anyone.</summary>
    public uint HighestTerm => _highestTerm;

    /// <summary>Called when this control node steps down (a higher term leads): the gateway drops its peers and trees.</summary>
    public Action? SteppedDown { get; set; }

    /// <summary>The flow labels a data node reported for <paramref name="session"/> after a takeover and that no tree
    /// holds yet (the gateway reuses them, so the data node keeps forwarding unchanged), else null.</summary>
    public FlowLabel[]? AdoptedLabels(SessionName session) => _placements.TryGetValue(session, out var p) ? p.AdoptedLabels : null;

    /// <summary>Sessions adopted from REPORTs whose tree is not rebuilt yet and that had local clients: the name and the
    /// Down channels' addresses (the gateway rebuilds these trees at once; the others wait for a neighbour's JOIN).</summary>
    public IEnumerable<(SessionName Session, string[] Local)> AdoptedWithLocalClients
        => _placements.Values.Where(p => p.AdoptedLabels is not null && p.AdoptedLocal.Length > 0).Select(p => (p.Session, p.AdoptedLocal));

    /// <summary>The largest flow label adopted from REPORTs: the gateway allocates new labels above it.</summary>
    public uint MaxAdoptedLabel => _maxAdoptedLabel;

    /// <summary>A data node's REPORT of the sessions it holds, sent when it started following our term: keep each
    /// session where it is, with its labels, until its tree is rebuilt (or <see cref="ClusterOptions.SessionHold"/>
    /// passes); a session we placed elsewhere meanwhile is RELEASEd there, so no two data nodes forward it.</summary>
    private void OnReport(ReportMessage report, ulong counter, TimeSpan now)
    {
        if (Sender(report.Node, counter) is not { } node)
        {
            return;
        }

        if (!_active || report.Term != _term)
        {
            Counters.ReportsIgnored++; // for another leader's term
            return;
        }

        Counters.Reports++;
        node.LastHeard = now;
        _incarnations = Math.Max(_incarnations, Math.Min(255u, (report.NextSequence >> 24) + 1));
        foreach (var r in report.Sessions)
        {
            if (_placements.TryGetValue(r.Session, out var p) && p.Node is { } other && other != node.Id)
            {
                Counters.ReportedElsewhere++;
                Send(node.Id, ClusterCodec.Release(new ReleaseMessage(node.Id, r.Session) { Term = _term }));
                continue;
            }

            if (p is null)
            {
                if (!node.Alive || node.Sessions >= _options.MaxSessionsPerNode)
                {
                    Counters.ReportedElsewhere++;
                    Send(node.Id, ClusterCodec.Release(new ReleaseMessage(node.Id, r.Session) { Term = _term }));
                    continue;
                }

                p = new Placement(r.Session) { AdoptedLabels = r.Labels, AdoptedLocal = r.LocalAddresses, AdoptedUntil = now + _options.SessionHold };
                _placements[r.Session] = p;
                _maxAdoptedLabel = Math.Max(_maxAdoptedLabel, r.Labels.Max(l => l.Value));
            }

            if (p.Node is null)
            {
                p.Node = node.Id;
                node.Sessions++;
                Counters.SessionsAdopted++;
            }
        }
    }

    private void OnLead(LeadMessage lead, ulong counter, TimeSpan now)
    {
        if (_options.ControlNodes != 2 || lead.Node != _gateway)
        {
            Counters.UnknownNode++;
            return;
        }

        if (_auth is not null && !_auth.Fresh(_gateway, counter))
        {
            Counters.Replayed++;
            return;
        }

        Counters.LeadsHeard++;
        if (lead.Term > _term && _active)
        {
            StepDown(lead.Term, now);
        }

        _highestTerm = Math.Max(_highestTerm, lead.Term);
        if (!_active && lead.Term >= _highestTerm)
        {
            _lastEvidence = now;
        }
    }

    private void StepDown(uint term, TimeSpan now)
    {
        _active = false;
        _highestTerm = Math.Max(_highestTerm, term);
        _lastEvidence = now;
        Counters.StepDowns++;
        _placements.Clear();
        foreach (var n in _nodes.Values)
        {
            n.Sessions = 0;
        }

        SteppedDown?.Invoke();
    }

    private void TakeOver(TimeSpan now)
    {
        // The next term of our parity: odd for the configured primary, even for the standby.
        uint parity = _options.Standby ? 0u : 1u;
        uint term = _highestTerm + 1;
        if ((term & 1) != parity)
        {
            term++;
        }

        _term = term;
        _highestTerm = term;
        _active = true;
        _lastLead = TimeSpan.MinValue;
        Counters.Takeovers++;
        Counters.TookOverAt = now;
        // Nodes that restart under this term get sequence bases past those the old leader may have given.
        _incarnations = Math.Max(_incarnations, Math.Min(255u, term << 4));
        foreach (var n in _nodes.Values)
        {
            // A node that restarted unseen seeds its sequence from its first ASSIGN: never below the old leader's bases.
            // (A node already forwarding keeps its own sequence; it seeds only once.)
            n.SequenceBase = Math.Min(255u, ++_incarnations) << 24;
        }
    }

    /// <summary>With two control nodes: the active one sends LEAD to every data node and to the other control node every
    /// heartbeat interval; the passive one takes over after <see cref="ClusterOptions.TakeoverTimeout"/> without a sign
    /// of the leader. Returns true when this call took over.</summary>
    private bool Lead(TimeSpan now)
    {
        if (_options.ControlNodes != 2)
        {
            return false;
        }

        bool tookOver = false;
        if (!_active)
        {
            if (_lastEvidence == TimeSpan.MinValue)
            {
                _lastEvidence = now;
            }

            if (now - _lastEvidence <= _options.TakeoverTimeout)
            {
                return false;
            }

            TakeOver(now);
            tookOver = true;
        }

        if (_lastLead == TimeSpan.MinValue || now - _lastLead >= _options.HeartbeatInterval)
        {
            _lastLead = now;
            foreach (var n in _nodes.Keys)
            {
                Send(n, ClusterCodec.Lead(new LeadMessage(n) { Term = _term }));
            }

            var lead = ClusterCodec.Lead(new LeadMessage(_gateway) { Term = _term });
            Counters.LeadsSent++;
            _host.SendToOtherControl(_auth is null ? lead : _auth.Seal(lead));
        }

        return tookOver;
    }
}
