using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Gateway;

/// <summary>
/// One broadcast gateway (seed §4–5) as a state machine without I/O: routing (<see cref="PathVectorRouter"/>), tree
/// building (JOIN / TRANSLATION / LEAVE / NO_ROUTE, SROUTE discovery, soft state) and data forwarding along the trees,
/// over an island's <see cref="INativeNet"/> plug-in. Events: <see cref="PeerConnected"/>, <see cref="PeerDisconnected"/>,
/// <see cref="OnFrame"/>, <see cref="Tick"/> and the NativeNet upcalls; time comes in as an argument, never from a clock
/// of its own; actions go out through <see cref="IGatewayHost"/> and the plug-in. One thread calls it (the runtime's
/// loop or the simulator). Every table is bounded by <see cref="GatewayOptions"/>.
/// </summary>
public sealed partial class BroadcastGateway : INativeNetUpcalls, IRouterOutput
{
    private readonly GatewayOptions _options;
    private readonly IGatewayHost _host;
    private readonly IControlHost? _controlHost;
    private readonly Dictionary<(GatewayId Peer, uint Node), System.Net.IPEndPoint> _peerDataNodes = [];

    /// <summary>Peers' data-node addresses learnt from DATA_ENDPOINT, at most (later ones refused and counted).</summary>
    public const int MaxPeerDataNodes = 1024;
    private readonly INativeNet _native;
    private readonly Dictionary<GatewayId, PeeringLink> _peers = [];
    private readonly Dictionary<SessionName, SessionTree> _sessions = [];
    private readonly Dictionary<FlowLabel, (SessionTree Tree, int Flow)> _myLabels = [];
    private readonly Dictionary<(GatewayId, FlowLabel), (SessionTree Tree, int Flow)> _upstreamLabels = [];
    private readonly Dictionary<uint, PendingSroute> _sroutes = [];
    private readonly DuplicateFilter _duplicates;
    private readonly byte[] _scratch;
    private uint _nextLabel;
    private uint _nextSequence;
    private uint _nextRequest;
    private TimeSpan _now;
    private readonly DataCoordinator? _cluster;

    /// <summary>The control node of a clustered gateway (seed §4): routing, trees and the mediator here, data forwarded
    /// only by the data nodes listed in <paramref name="cluster"/>, reached through <paramref name="controlHost"/>.
    /// The plug-in is used for addresses (allocate, reclaim), SROUTE costs and the mediator, never for data.
    /// <paramref name="firstAuthCounter"/>: the counter of the first control frame sealed when
    /// <see cref="ClusterOptions.ClusterSecret"/> is set (<see cref="ClusterAuthenticator"/>).</summary>
    public BroadcastGateway(GatewayOptions options, IGatewayHost host, INativeNet native, ClusterOptions cluster, IControlHost controlHost, ulong firstAuthCounter = 1)
        : this(options, host, native)
    {
        if (cluster.DataNodes.Contains(options.Gateway.Value))
        {
            throw new ArgumentOutOfRangeException(nameof(cluster), "a data node number equals the gateway's own number");
        }

        _cluster = new DataCoordinator(cluster, controlHost, firstAuthCounter, options.Gateway.Value) { SteppedDown = Demote };
        _controlHost = controlHost;
    }

    public BroadcastGateway(GatewayOptions options, IGatewayHost host, INativeNet native)
    {
        options.Validate();
        _options = options;
        _host = host;
        _native = native;
        Router = new PathVectorRouter(options.Gateway, options.Island, this, options.Policy, options.Router);
        _duplicates = new DuplicateFilter(options.MaxOrigins);
        _scratch = new byte[DataHeader.Size + options.MaxPayloadBytes];
    }

    public GatewayId Id => _options.Gateway;

    public IslandId Island => _options.Island;

    public PathVectorRouter Router { get; }

    public GatewayCounters Counters { get; } = new();

    public IReadOnlyDictionary<SessionName, SessionTree> Sessions => _sessions;

    public IEnumerable<PeeringLink> Peers => _peers.Values;

    public int PendingSroutes => _sroutes.Count;

    public int DuplicateOrigins => _duplicates.Origins;

    /// <summary>The data-coordination layer when this gateway is a clustered gateway's control node, else null.</summary>
    public DataCoordinator? Cluster => _cluster;

    /// <summary>False for a passive control node (a standby, or a primary that stepped down): it refuses peering links
    /// and client JOINs and holds no trees (docs/federation.md, "Standby control node").</summary>
    public bool IsActive => _cluster is null || _cluster.IsActive;

    /// <summary>After a takeover: the trees of adopted sessions that have local clients, rebuilt at once from the data
    /// nodes' REPORTs (same labels, the same Down channels when the plug-in can adopt them), so local clients keep their
    /// addresses and the tree joins upstream as soon as a route is back. Sessions without local clients (roots, transit)
    /// come back with their neighbours' JOINs.</summary>
    private void RebuildAdopted()
    {
        foreach (var (session, local) in _cluster!.AdoptedWithLocalClients.ToList())
        {
            if (_sessions.ContainsKey(session) || session.Owner == Island || local.Length != session.Flows.Count)
            {
                continue;
            }

            var tree = CreateTree(session, isRoot: false);
            if (tree is null)
            {
                continue;
            }

            var channels = new NativeChannel[local.Length];
            for (int i = 0; i < local.Length; i++)
            {
                if (_native.AdoptChannel(session, i, local[i]) is not { } channel)
                {
                    for (int j = 0; j < i; j++)
                    {
                        _native.ReclaimChannel(channels[j]);
                    }

                    channels = null;
                    break;
                }

                channels[i] = channel;
            }

            tree.LocalChannels = channels; // null: the next client JOIN allocates new ones (clients move)
            tree.LocalUntil = _now + _options.JoinHoldTime;
            Counters.TreesRebuilt++;
        }
    }

    /// <summary>Stepping down (a higher term leads): forget every peer and tree without a word to anyone, since the
    /// leader now speaks for this gateway number; the data nodes already ignore our term.</summary>
    private void Demote()
    {
        Counters.StepDowns++;
        foreach (var peer in _peers.Keys.ToList())
        {
            _peers.Remove(peer);
            Router.PeerDown(peer);
            _host.Disconnect(peer);
        }

        foreach (var tree in _sessions.Values.ToList())
        {
            RemoveTree(tree);
        }

        _upstreamLabels.Clear();
        _sroutes.Clear();
        _peerDataNodes.Clear();
    }

    /// <summary>A frame from one of this control node's data nodes (HEARTBEAT). Never throws on bad input.</summary>
    public void OnDataNodeFrame(ReadOnlySpan<byte> frame, TimeSpan now)
    {
        _now = now;
        if (_cluster is null)
        {
            Counters.Malformed[(int)FrameError.UnknownType]++;
            return;
        }

        _cluster.OnFrame(frame, now);
    }

    /// <summary>A link finished its HELLO exchange. False (and the host should close it) when refused: ourselves, a
    /// duplicate, or the peer bound reached.</summary>
    public bool PeerConnected(GatewayId peer, IslandId island, LinkCosts costs, TimeSpan now)
    {
        _now = now;
        if (!IsActive)
        {
            Counters.PeersRefusedPassive++;
            return false;
        }

        if (peer == Id || peer.Value == 0 || island.Value == 0 || _peers.ContainsKey(peer) || _peers.Count >= _options.MaxPeers)
        {
            Counters.PeersRefused++;
            return false;
        }

        var kind = island == Island ? PeerKind.Internal : PeerKind.External;
        var link = new PeeringLink(new PeerInfo(peer, island, kind), costs) { LastHeard = now, LastSent = now };
        _peers[peer] = link;
        if (_options.CoreCast)
        {
            SendControl(peer, PeerCodec.Capabilities(CapabilitiesMessage.CoreCast));
        }

        Router.PeerUp(link.Info, costs);
        return true;
    }

    /// <summary>The link closed. Its routes are withdrawn and the trees through it move to the next best route.</summary>
    public void PeerDisconnected(GatewayId peer, TimeSpan now)
    {
        _now = now;
        if (!_peers.Remove(peer))
        {
            return;
        }

        Router.PeerDown(peer);
        foreach (var key in _upstreamLabels.Keys.Where(k => k.Item1 == peer).ToList())
        {
            _upstreamLabels.Remove(key);
        }

        foreach (var tree in _sessions.Values.ToList())
        {
            tree.PeerEndpoints.Remove(peer);
            tree.Downstream.Remove(peer);
            if (tree.Upstream == peer)
            {
                tree.Upstream = null;
                tree.UpstreamLabels = null;
            }
        }

        Maintain(forceJoin: false);
    }

    /// <summary>One frame from <paramref name="peer"/>. Never throws on bad input: a malformed frame is counted and dropped.
    /// <paramref name="fromPeerDataNode"/>: it came from one of the peer's data nodes, not on the peering link, so it
    /// says nothing of the peer's control node and does not refresh the link's hold timer (a peer whose control node
    /// crashed silently is noticed while its data nodes still forward, and a standby can be dialled).</summary>
    public void OnFrame(GatewayId peer, ReadOnlySpan<byte> frame, TimeSpan now, bool fromPeerDataNode = false)
    {
        _now = now;
        Counters.FramesReceived++;
        if (!_peers.TryGetValue(peer, out var link))
        {
            Counters.FramesFromUnknownPeer++;
            return;
        }

        var error = PeerCodec.PeekType(frame, out var type);
        if (error != FrameError.None)
        {
            Counters.Malformed[(int)error]++;
            return;
        }

        if (type == FrameType.Data)
        {
            if (!fromPeerDataNode)
            {
                link.LastHeard = now;
            }

            if (_cluster is not null)
            {
                Counters.DataAtControl++; // the control node never forwards data; the peer has not learnt our data node yet
                return;
            }

            OnData(link, frame);
            return;
        }

        if (type is FrameType.CoreCastPayload or FrameType.CoreCastHeader or FrameType.ReceiverData)
        {
            if (!fromPeerDataNode)
            {
                link.LastHeard = now;
            }

            if (_cluster is not null)
            {
                Counters.DataAtControl++; // per-receiver delivery is not built for clustered gateways (docs: Not built)
                return;
            }

            OnPerReceiverFrame(link, type, frame);
            return;
        }

        error = PeerCodec.Decode(frame, out var message);
        if (error != FrameError.None)
        {
            Counters.Malformed[(int)error]++;
            return;
        }

        link.LastHeard = now;
        Counters.ControlFrames++;
        switch (message)
        {
            case KeepAliveMessage:
                break;
            case RouteUpdateMessage m:
                Router.OnUpdate(peer, m.Update);
                Maintain(forceJoin: false);
                break;
            case JoinMessage m:
                OnJoin(link, m);
                break;
            case TranslationMessage m:
                OnTranslation(peer, m);
                break;
            case LeaveMessage m:
                OnLeave(peer, m.Session);
                break;
            case NoRouteMessage m:
                OnNoRoute(peer, m.Session);
                break;
            case SrouteRequestMessage m:
                OnSrouteRequest(m);
                break;
            case SrouteResponseMessage m:
                OnSrouteResponse(m);
                break;
            case DataEndpointMessage m:
                OnDataEndpoint(peer, m);
                break;
            case CapabilitiesMessage m:
                link.CoreCast = (m.Flags & CapabilitiesMessage.CoreCast) != 0;
                break;
            case ReceiversMessage m:
                OnReceivers(peer, m);
                break;
            default:
                Counters.Malformed[(int)FrameError.UnknownType]++; // a second HELLO
                break;
        }
    }

    /// <summary>The one timer: keep-alives, dead peers, soft-state expiry, JOIN refresh, re-routing, SROUTE timeouts.
    /// Call it at least every second or so (the runtime does every 100 ms).</summary>
    public void Tick(TimeSpan now)
    {
        _now = now;
        if (_cluster is { IsActive: false })
        {
            _cluster.Tick(now); // a passive control node only watches the leader (and may take over here)
            if (!_cluster.IsActive)
            {
                return;
            }
        }

        if (_cluster is not null)
        {
            RebuildAdopted();
        }

        foreach (var link in _peers.Values.ToList())
        {
            if (now - link.LastHeard > _options.HoldTime)
            {
                Counters.PeersTimedOut++;
                PeerDisconnected(link.Info.Gateway, now);
                _host.Disconnect(link.Info.Gateway);
            }
            else if (now - link.LastSent >= _options.KeepAliveInterval)
            {
                SendControl(link.Info.Gateway, PeerCodec.KeepAlive());
            }
        }

        foreach (var (id, pending) in _sroutes.ToList())
        {
            if (now >= pending.Deadline)
            {
                Counters.SrouteTimeouts++;
                _sroutes.Remove(id);
                Decide(pending.Request, srouteCosts: null);
            }
        }

        foreach (var tree in _sessions.Values.ToList())
        {
            foreach (var (peer, until) in tree.Downstream.ToList())
            {
                if (now > until)
                {
                    Counters.ExpiredDownstream++;
                    tree.Downstream.Remove(peer);
                }
            }

            foreach (var (receiver, until) in tree.LocalReceivers.ToList())
            {
                if (now > until)
                {
                    Counters.ExpiredLocal++;
                    tree.LocalReceivers.Remove(receiver);
                }
            }

            if (tree.LocalUntil is { } local && now > local)
            {
                Counters.ExpiredLocal++;
                DropLocal(tree);
            }
        }

        Maintain(forceJoin: false);
        foreach (var tree in _sessions.Values)
        {
            ReportReceivers(tree);
        }

        if (_cluster is not null)
        {
            _cluster.Tick(now);
            SyncCluster();
        }
    }

    private void SendControl(GatewayId peer, byte[] frame)
    {
        if (!_peers.TryGetValue(peer, out var link))
        {
            return;
        }

        if (_host.Send(peer, frame))
        {
            link.LastSent = _now;
        }
        else
        {
            Counters.PeerSendFailed++;
        }
    }

    private void OnDataEndpoint(GatewayId peer, DataEndpointMessage m)
    {
        if (_sessions.TryGetValue(m.Session, out var tree) && (tree.Upstream == peer || tree.Downstream.ContainsKey(peer)))
        {
            tree.PeerEndpoints[peer] = m.Node;
            if (m.Address is { } address)
            {
                if (_peerDataNodes.Count >= MaxPeerDataNodes && !_peerDataNodes.ContainsKey((peer, m.Node)))
                {
                    Counters.PeerDataNodesRefused++;
                    return;
                }

                if (!_peerDataNodes.TryGetValue((peer, m.Node), out var known) || !known.Equals(address))
                {
                    _peerDataNodes[(peer, m.Node)] = address;
                    _host.LearnDataNode(peer, m.Node, address);
                }
            }

            return;
        }

        Counters.EndpointsStale++;
    }

    private uint EndpointOf(SessionTree tree, GatewayId peer) => tree.PeerEndpoints.TryGetValue(peer, out var e) ? e : 0;

    /// <summary>A clustered control node: place sessions on data nodes, send the ASSIGNs that changed, and tell the
    /// tree neighbours of a session that moved (or was just placed) where its data must go now. Runs once per tick, not
    /// per frame: it encodes every session's ASSIGN to compare, so a data-path change reaches the data node within one
    /// tick (100 ms in the runtime) instead of costing O(sessions) per control frame.</summary>
    private void SyncCluster()
    {
        if (_cluster is null)
        {
            return;
        }

        foreach (var tree in _cluster.Sync(_sessions, EndpointOf, _now, (peer, node) => _peerDataNodes.GetValueOrDefault((peer, node))))
        {
            if (tree.Upstream is { } up)
            {
                SendEndpoint(up, tree);
            }

            foreach (var peer in tree.Downstream.Keys)
            {
                SendEndpoint(peer, tree);
            }
        }
    }

    private void SendEndpoint(GatewayId peer, SessionTree tree)
    {
        if (_cluster?.NodeOf(tree.Name) is { } node)
        {
            SendControl(peer, PeerCodec.DataEndpoint(tree.Name, node, _controlHost?.AddressOf(node)));
        }
    }

    void IRouterOutput.SendRouteUpdate(GatewayId peer, RouteUpdate update) => SendControl(peer, PeerCodec.Routes(update));

}

/// <summary>A peering link as the gateway sees it: who, which island, its costs, when it last heard and sent.</summary>
public sealed class PeeringLink(PeerInfo info, LinkCosts costs)
{
    public PeerInfo Info { get; } = info;

    public LinkCosts Costs { get; } = costs;

    public TimeSpan LastHeard { get; set; }

    public TimeSpan LastSent { get; set; }

    /// <summary>The peer announced CoreCast support (CAPABILITIES).</summary>
    public bool CoreCast { get; set; }
}
