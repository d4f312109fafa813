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
/// </summary>
public sealed class DataCoordinator
{
    private readonly ClusterOptions _options;
    private readonly IControlHost _host;
    private readonly Dictionary<uint, NodeState> _nodes = [];
    private readonly Dictionary<SessionName, Placement> _placements = [];
    private readonly ClusterAuthenticator? _auth;
    private uint _incarnations;

    /// <param name="firstAuthCounter">With <see cref="ClusterOptions.ClusterSecret"/>: the counter of the first frame
    /// this control node seals (the runtime passes <see cref="ClusterAuthenticator.WallClockCounter"/>).</param>
    public DataCoordinator(ClusterOptions options, IControlHost host, ulong firstAuthCounter = 1)
    {
        options.Validate();
        _options = options;
        _host = host;
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

        if (message is not HeartbeatMessage hb)
        {
            Counters.Malformed[(int)FrameError.UnknownType]++;
            return;
        }

        if (!_nodes.TryGetValue(hb.Node, out var node))
        {
            Counters.UnknownNode++;
            return;
        }

        if (_auth is not null && !_auth.Fresh(hb.Node, counter))
        {
            Counters.Replayed++;
            return;
        }

        Counters.Heartbeats++;
        node.LastHeard = now;
        if (!node.Alive)
        {
            // Back from the dead (or new): it may still forward sessions that moved away; wipe it, then it takes new work.
            node.Alive = true;
            node.SequenceBase = ++_incarnations << 24;
            Counters.NodesUp++;
            Send(node.Id, ClusterCodec.Reset(new ResetMessage(node.Id)));
        }
        else if (hb.Sessions < node.Sessions)
        {
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
        List<SessionName>? moved = null;
        foreach (var node in _nodes.Values)
        {
            if (node.Alive && now - node.LastHeard > _options.HeartbeatTimeout)
            {
                node.Alive = false;
                Counters.NodesDown++;
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
        foreach (var p in _placements.Values.ToList())
        {
            if (!trees.ContainsKey(p.Session))
            {
                if (p.Node is { } n)
                {
                    Send(n, ClusterCodec.Release(new ReleaseMessage(n, p.Session)));
                    _nodes[n].Sessions--;
                }

                _placements.Remove(p.Session);
            }
        }

        foreach (var tree in trees.Values)
        {
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
            var bytes = ClusterCodec.Assign(assign);
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

    /// <summary>Frames dropped: tag not verified (forged, altered, unauthenticated); counter replayed.</summary>
    public long Unauthenticated;
    public long Replayed;

    public readonly long[] Malformed = new long[Enum.GetValues<FrameError>().Length];

    public long MalformedTotal => Malformed.Sum();
}
