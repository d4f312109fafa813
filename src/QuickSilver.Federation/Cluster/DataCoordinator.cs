using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Cluster;

/// <summary>
/// The control node's data-coordination layer (seed §4, §5.3.1, §5.3.4), without I/O: it assigns each session to one
/// live data node, the least loaded (fewest sessions; ties to the lowest number; the seed offers round-robin or least
/// loaded), tells it the session's whole data-path state in an ASSIGN (re-sent when the state changes and every
/// <see cref="ClusterOptions.AssignRefresh"/>), RELEASEs sessions that ended, and declares a data node dead after
/// <see cref="ClusterOptions.HeartbeatTimeout"/> without a HEARTBEAT: its sessions go to other nodes at once. Each data
/// node incarnation gets a fresh sequence base (its number of incarnations × 2^24) for the packets it originates.
/// With <see cref="ClusterOptions.ControlNodes"/> = 2 it is one of two control nodes (docs/federation.md, "Standby
/// control node"): the active one leads a term (odd for the configured primary, even for the standby, so two control
/// nodes never lead the same term), stamps it on every frame and sends LEAD every heartbeat interval; the passive one
/// only listens, and takes over with a higher term after <see cref="ClusterOptions.TakeoverTimeout"/> without a sign of
/// the leader, adopting placement (and flow labels) from the data nodes' REPORTs. An active control node that hears a
/// higher term (a LEAD, or a HEARTBEAT of a data node following it) steps down.
/// </summary>
public sealed partial class DataCoordinator
{
    private readonly ClusterOptions _options;
    private readonly IControlHost _host;
    private readonly Dictionary<uint, NodeState> _nodes = [];
    private readonly Dictionary<SessionName, Placement> _placements = [];
    private readonly ClusterAuthenticator? _auth;
    private uint _incarnations;
    private readonly uint _gateway;
    private bool _active;
    private uint _term;
    private uint _highestTerm;
    private TimeSpan _lastEvidence = TimeSpan.MinValue;
    private TimeSpan _lastLead = TimeSpan.MinValue;
    private uint _maxAdoptedLabel;

    /// <param name="firstAuthCounter">With <see cref="ClusterOptions.ClusterSecret"/>: the counter of the first frame
    /// this control node seals (the runtime passes <see cref="ClusterAuthenticator.WallClockCounter"/>).</param>
    /// <param name="gateway">The gateway's number: the address of LEAD frames between its two control nodes.</param>
    public DataCoordinator(ClusterOptions options, IControlHost host, ulong firstAuthCounter = 1, uint gateway = 0)
    {
        options.Validate();
        if (options.ControlNodes == 2 && (gateway == 0 || options.DataNodes.Contains(gateway)))
        {
            throw new ArgumentOutOfRangeException(nameof(gateway), "two control nodes need the gateway's number, distinct from every data node's");
        }

        _options = options;
        _host = host;
        _gateway = gateway;
        _active = !options.Standby;
        _term = _active ? 1u : 0u;
        _highestTerm = _term;
        _auth = options.ClusterSecret is { } secret ? new ClusterAuthenticator(secret, firstAuthCounter) : null;
        foreach (var n in options.DataNodes)
        {
            _nodes[n] = new NodeState(n);
        }
    }

    public ClusterOptions Options => _options;

    public CoordinatorCounters Counters { get; } = new();

    /// <summary>The data node a session is on (null: none alive).</summary>
    public uint? NodeOf(SessionName session) => _placements.TryGetValue(session, out var p) ? p.Node : null;

    /// <summary>Live data nodes and the sessions on each.</summary>
    public IReadOnlyDictionary<uint, int> Load => _nodes.Values.Where(n => n.Alive).ToDictionary(n => n.Id, n => n.Sessions);

    public bool IsAlive(uint node) => _nodes.TryGetValue(node, out var n) && n.Alive;

    /// <summary>A frame from a data node. Never throws: a malformed frame, or one from a node not configured, is counted.</summary>
    public void OnFrame(ReadOnlySpan<byte> frame, TimeSpan now)
    {
        ulong counter = 0;
        if (_auth is not null && _auth.Open(frame, out frame, out counter) != ClusterAuthError.None)
        {
            Counters.Unauthenticated++;
            return;
        }

        var error = ClusterCodec.Decode(frame, out var message);
        if (error != FrameError.None)
        {
            Counters.Malformed[(int)error]++;
            return;
        }

        switch (message)
        {
            case HeartbeatMessage hb:
                OnHeartbeat(hb, counter, now);
                break;
            case ReportMessage report:
                OnReport(report, counter, now);
                break;
            case LeadMessage lead:
                OnLead(lead, counter, now);
                break;
            default:
                Counters.Malformed[(int)FrameError.UnknownType]++;
                break;
        }
    }

    /// <summary>The configured data node a frame is from, once its counter proved fresh; null (counted) otherwise.</summary>
    private NodeState? Sender(uint id, ulong counter)
    {
        if (!_nodes.TryGetValue(id, out var node))
        {
            Counters.UnknownNode++;
            return null;
        }

        if (_auth is not null && !_auth.Fresh(id, counter))
        {
            Counters.Replayed++;
            return null;
        }

        return node;
    }

    private void OnHeartbeat(HeartbeatMessage hb, ulong counter, TimeSpan now)
    {
        if (Sender(hb.Node, counter) is not { } node)
        {
            return;
        }

        Counters.Heartbeats++;
        node.LastHeard = now;
        if (_options.ControlNodes == 2)
        {
            if (hb.Term > _term && _active)
            {
                StepDown(hb.Term, now); // this data node follows a newer leader
            }

            _highestTerm = Math.Max(_highestTerm, hb.Term);
            if (!_active && hb.LeaderHeard && hb.Term >= _highestTerm)
            {
                _lastEvidence = now; // the leader lives, as this data node heard it
            }
        }

        if (!_active)
        {
            node.Alive = true; // a standby tracks liveness so a takeover keeps live nodes (and their sessions)
            return;
        }

        if (!node.Alive)
        {
            // Back from the dead (or new): it may still forward sessions that moved away; wipe it, then it takes new work.
            node.Alive = true;
            node.SequenceBase = ++_incarnations << 24;
            Counters.NodesUp++;
            Send(node.Id, ClusterCodec.Reset(new ResetMessage(node.Id) { Term = _term }));
        }
        else if (hb.Sessions < node.Sessions && (_options.ControlNodes == 1 || hb.Term == _term))
        {
            // (With a standby: only a node that follows our term; one still on the old term has not reported yet.)
            // It lost sessions we think it has (a restart between two heartbeats): send every ASSIGN again.
            Counters.NodeRestarts++;
            foreach (var p in _placements.Values.Where(p => p.Node == node.Id))
            {
                p.Sent = null;
            }
        }
    }

    /// <summary>Declares silent data nodes dead and unplaces their sessions. Returns the sessions that lost their node
    /// (the gateway tells their tree neighbours the new endpoint once <see cref="Sync"/> placed them).</summary>
    public IReadOnlyList<SessionName> Tick(TimeSpan now)
    {
        Lead(now);
        List<SessionName>? moved = null;
        foreach (var node in _nodes.Values)
        {
            if (node.Alive && now - node.LastHeard > _options.HeartbeatTimeout)
            {
                node.Alive = false;
                if (_active)
                {
                    Counters.NodesDown++; // a standby only tracks liveness
                }

                foreach (var p in _placements.Values.Where(p => p.Node == node.Id))
                {
                    p.Node = null;
                    p.Sent = null;
                    Counters.SessionsMoved++;
                    (moved ??= []).Add(p.Session);
                }

                node.Sessions = 0;
            }
        }

        return moved ?? (IReadOnlyList<SessionName>)[];
    }

    /// <summary>Places every session on a live node and sends the ASSIGNs that changed or are due, and RELEASEs for
    /// sessions the gateway no longer has. Returns the sessions whose data node changed (their neighbours must learn it).</summary>
    /// <param name="addressOf">Where a peer's data node takes DATA, if that peer said (DATA_ENDPOINT): passed on in the
    /// ASSIGN so the data node needs no configuration for it.</param>
    public IReadOnlyList<SessionTree> Sync(IReadOnlyDictionary<SessionName, SessionTree> trees, Func<SessionTree, GatewayId, uint> endpointOf, TimeSpan now,
        Func<GatewayId, uint, System.Net.IPEndPoint?>? addressOf = null)
    {
        List<SessionTree>? changed = null;
        if (!_active)
        {
            return [];
        }

        foreach (var p in _placements.Values.ToList())
        {
            if (p.AdoptedLabels is not null && trees.TryGetValue(p.Session, out var rebuilt) && (rebuilt.IsRoot || rebuilt.UpstreamLabels is not null))
            {
                p.AdoptedLabels = null; // its tree is back (with these labels if the gateway could reuse them)
                if (p.Node is not null)
                {
                    (changed ??= []).Add(rebuilt); // tell its neighbours the data node (the new links have not heard it)
                }
            }

            if (p.AdoptedLabels is not null)
            {
                if (now <= p.AdoptedUntil)
                {
                    continue; // adopted from a REPORT; its tree (or its upstream) is not back yet: the data node keeps forwarding
                }

                p.AdoptedLabels = null; // the grace is over: an ordinary placement now (RELEASEd below if no tree came back)
                p.Sent = null;
            }

            if (!trees.ContainsKey(p.Session))
            {
                if (p.Node is { } n)
                {
                    Send(n, ClusterCodec.Release(new ReleaseMessage(n, p.Session) { Term = _term }));
                    _nodes[n].Sessions--;
                }

                _placements.Remove(p.Session);
            }
        }

        foreach (var tree in trees.Values)
        {
            if (_placements.TryGetValue(tree.Name, out var adopted) && adopted.AdoptedLabels is not null)
            {
                continue; // rebuilt but not joined upstream yet: an ASSIGN now would cut the data node's upstream
            }

            if (!_placements.TryGetValue(tree.Name, out var p))
            {
                p = new Placement(tree.Name);
                _placements[tree.Name] = p;
            }

            if (p.Node is null)
            {
                var node = LeastLoaded();
                if (node is null)
                {
                    Counters.NoLiveNode++;
                    continue;
                }

                p.Node = node.Id;
                node.Sessions++;
                Counters.Placements++;
                (changed ??= []).Add(tree);
            }

            var id = p.Node.Value;
            var assign = Build(tree, id, endpointOf, addressOf);
            var bytes = ClusterCodec.Assign(assign with { Term = _term });
            if (p.Sent is null || now - p.SentAt >= _options.AssignRefresh || !bytes.AsSpan().SequenceEqual(p.Sent))
            {
                p.Sent = bytes;
                p.SentAt = now;
                Counters.AssignsSent++;
                Send(id, bytes);
            }
        }

        return changed ?? (IReadOnlyList<SessionTree>)[];
    }

    private void Send(uint node, byte[] frame) => _host.SendToDataNode(node, _auth is null ? frame : _auth.Seal(frame));

    private NodeState? LeastLoaded()
    {
        NodeState? best = null;
        foreach (var n in _nodes.Values)
        {
            if (n.Alive && n.Sessions < _options.MaxSessionsPerNode && (best is null || n.Sessions < best.Sessions || (n.Sessions == best.Sessions && n.Id < best.Id)))
            {
                best = n;
            }
        }

        return best;
    }

    private AssignMessage Build(SessionTree tree, uint node, Func<SessionTree, GatewayId, uint> endpointOf, Func<GatewayId, uint, System.Net.IPEndPoint?>? addressOf)
    {
        var upstream = tree.Upstream ?? default;
        var labels = tree.UpstreamLabels ?? [];
        var downstream = tree.Downstream.Keys.Where(g => g != upstream).Take(ClusterCodec.MaxDownstream).OrderBy(g => g.Value)
            .Select(g => new DownstreamPeer(g, endpointOf(tree, g))).ToArray();
        var named = downstream.Select(d => (d.Gateway, Node: d.Endpoint));
        if (upstream.Value != 0)
        {
            named = named.Prepend((upstream, endpointOf(tree, upstream)));
        }

        var peerNodes = addressOf is null ? [] : named.Where(p => p.Node != 0)
            .Select(p => addressOf(p.Gateway, p.Node) is { } a ? new PeerDataNodeAddress(p.Gateway, p.Node, a) : (PeerDataNodeAddress?)null)
            .OfType<PeerDataNodeAddress>().Take(byte.MaxValue).ToArray();
        return new AssignMessage(
            node,
            _nodes[node].SequenceBase,
            tree.Name,
            tree.IsRoot,
            tree.Labels,
            upstream,
            upstream.Value == 0 ? 0 : endpointOf(tree, upstream),
            upstream.Value == 0 ? [] : labels,
            downstream,
            tree.LocalChannels?.Select(c => c.Address).ToArray() ?? [],
            tree.IsRoot ? tree.RootChannels?.Select(c => c.Address).ToArray() ?? [] : [],
            peerNodes);
    }

    private sealed class NodeState(uint id)
    {
        public uint Id { get; } = id;

        public bool Alive { get; set; }

        public TimeSpan LastHeard { get; set; }

        public int Sessions { get; set; }

        public uint SequenceBase { get; set; }
    }

    private sealed class Placement(SessionName session)
    {
        public SessionName Session { get; } = session;

        public uint? Node { get; set; }

        public byte[]? Sent { get; set; }

        public TimeSpan SentAt { get; set; }

        /// <summary>Adopted from a data node's REPORT after a takeover, its tree not rebuilt yet: the labels it has there.</summary>
        public FlowLabel[]? AdoptedLabels { get; set; }

        /// <summary>With <see cref="AdoptedLabels"/>: the Down channels' addresses the data node delivers to.</summary>
        public string[] AdoptedLocal { get; set; } = [];

        public TimeSpan AdoptedUntil { get; set; }
    }
}

/// <summary>The control node's data-coordination counters.</summary>
public sealed class CoordinatorCounters
{
    public long Heartbeats;
    public long UnknownNode;
    public long NodesUp;
    public long NodesDown;
    public long NodeRestarts;
    public long Placements;
    public long SessionsMoved;
    public long AssignsSent;
    public long NoLiveNode;

    /// <summary>Standby control node: LEADs sent and heard, takeovers (and when the last one happened), step-downs,
    /// REPORTs taken and ignored (another term's), sessions adopted where a data node held them, and reported sessions
    /// RELEASEd because they were placed elsewhere meanwhile.</summary>
    public long LeadsSent;
    public long LeadsHeard;
    public long Takeovers;
    public TimeSpan TookOverAt;
    public long StepDowns;
    public long Reports;
    public long ReportsIgnored;
    public long SessionsAdopted;
    public long ReportedElsewhere;

    /// <summary>Frames dropped: tag not verified (forged, altered, unauthenticated); counter replayed.</summary>
    public long Unauthenticated;
    public long Replayed;

    public readonly long[] Malformed = new long[Enum.GetValues<FrameError>().Length];

    public long MalformedTotal => Malformed.Sum();
}
