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
public sealed class BroadcastGateway : INativeNetUpcalls, IRouterOutput
{
    private readonly GatewayOptions _options;
    private readonly IGatewayHost _host;
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

    // ---------------------------------------------------------------- peering links

    /// <summary>A link finished its HELLO exchange. False (and the host should close it) when refused: ourselves, a
    /// duplicate, or the peer bound reached.</summary>
    public bool PeerConnected(GatewayId peer, IslandId island, LinkCosts costs, TimeSpan now)
    {
        _now = now;
        if (peer == Id || peer.Value == 0 || island.Value == 0 || _peers.ContainsKey(peer) || _peers.Count >= _options.MaxPeers)
        {
            Counters.PeersRefused++;
            return false;
        }

        var kind = island == Island ? PeerKind.Internal : PeerKind.External;
        var link = new PeeringLink(new PeerInfo(peer, island, kind), costs) { LastHeard = now, LastSent = now };
        _peers[peer] = link;
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
            tree.Downstream.Remove(peer);
            if (tree.Upstream == peer)
            {
                tree.Upstream = null;
                tree.UpstreamLabels = null;
            }
        }

        Maintain(forceJoin: false);
    }

    /// <summary>One frame from <paramref name="peer"/>. Never throws on bad input: a malformed frame is counted and dropped.</summary>
    public void OnFrame(GatewayId peer, ReadOnlySpan<byte> frame, TimeSpan now)
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
            link.LastHeard = now;
            OnData(link, frame);
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

            if (tree.LocalUntil is { } local && now > local)
            {
                Counters.ExpiredLocal++;
                DropLocal(tree);
            }
        }

        Maintain(forceJoin: false);
    }

    // ---------------------------------------------------------------- mediator (NativeNet control-node upcalls)

    /// <summary>A client's JOIN through the island's mediator (seed §5.2.1): TRANSLATION, NO_ROUTE or REDIRECT.</summary>
    public void RecvdJoinRequest(JoinRequest request)
    {
        Counters.ClientJoins++;
        var session = request.Session;
        if (_sessions.TryGetValue(session, out var tree) && (tree.IsRoot || tree.Upstream is not null))
        {
            AnswerLocal(tree, request);
            return;
        }

        if (session.Owner == Island)
        {
            tree ??= CreateTree(session, isRoot: true);
            if (tree is null)
            {
                request.Reply(MediatorReply.NoRoute("session table full"));
                return;
            }

            AnswerLocal(tree, request);
            return;
        }

        var routes = Router.Table.ToIsland(session.Metric, session.Owner);
        if (request.TargetOwner.Value != 0)
        {
            routes = routes.Where(r => r.Destination == request.TargetOwner).ToList();
        }

        if (routes.Count == 0)
        {
            Counters.ClientNoRoute++;
            request.Reply(MediatorReply.NoRoute($"no route from island {Island} to island {session.Owner}"));
            return;
        }

        // SROUTE discovery only when owner gateways are reached through different next hops (seed §5.2.2).
        if (request.TargetOwner.Value == 0 && routes.Select(r => r.NextHop).Distinct().Count() >= 2 && _sroutes.Count < _options.MaxPendingSroutes)
        {
            uint id = ++_nextRequest;
            var best = routes[0];
            var message = new SrouteRequestMessage(id, session, best.Destination, [.. routes.Select(r => r.Destination).Take(PeerCodec.MaxPath)], [Id]);
            _sroutes[id] = new PendingSroute(request, _now + _options.SrouteTimeout);
            Counters.SrouteRequestsSent++;
            SendControl(best.NextHop, PeerCodec.SrouteRequest(message));
            return;
        }

        Decide(request, srouteCosts: null);
    }

    public void RecvdLeaveRequest(SessionName session)
    {
        if (_sessions.TryGetValue(session, out var tree))
        {
            DropLocal(tree);
            Maintain(forceJoin: false);
        }
    }

    // ---------------------------------------------------------------- data

    /// <summary>A packet from a native channel: the owner island's session (a root sends it down its tree), or a local
    /// source of a multi-source session (sent to every tree neighbour).</summary>
    public void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data)
    {
        if (!_sessions.TryGetValue(channel.Session, out var tree))
        {
            Counters.UnknownLabel++;
            return;
        }

        if (data.Length > _options.MaxPayloadBytes)
        {
            Counters.OversizedPayload++;
            return;
        }

        bool fromRoot = tree.IsRoot && channel.Direction == ChannelDirection.Up;
        if (!fromRoot && !tree.Name.MultiSource)
        {
            return; // our own delivery echoed back by the medium, or a source where the tree is one-way
        }

        Counters.DataFromIsland++;
        var header = new DataHeader(0, DataHeader.DefaultTtl, default, Id, ++_nextSequence);
        _duplicates.FirstTime(Id, header.Sequence);
        data.CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(tree, channel.Flow, header, data.Length, from: null, deliverLocally: false);
    }

    private void OnData(PeeringLink link, ReadOnlySpan<byte> frame)
    {
        Counters.DataReceived++;
        var peer = link.Info.Gateway;
        if (!DataHeader.TryRead(frame, out var header))
        {
            Counters.Malformed[(int)FrameError.BadValue]++;
            return;
        }

        int payload = frame.Length - DataHeader.Size;
        if (payload > _options.MaxPayloadBytes)
        {
            Counters.OversizedPayload++;
            return;
        }

        SessionTree tree;
        int flow;
        if (_upstreamLabels.TryGetValue((peer, header.Label), out var up))
        {
            (tree, flow) = up;
            if (tree.Upstream != peer)
            {
                Counters.RpfDropped++;
                return;
            }
        }
        else if (_myLabels.TryGetValue(header.Label, out var mine))
        {
            // Toward the root: only on a multi-source (bi-directional) tree, and only from one of our downstream peers.
            (tree, flow) = mine;
            if (!tree.Name.MultiSource || !tree.Downstream.ContainsKey(peer))
            {
                Counters.RpfDropped++;
                return;
            }
        }
        else
        {
            Counters.UnknownLabel++;
            return;
        }

        if (!_duplicates.FirstTime(header.Origin, header.Sequence))
        {
            Counters.DuplicatesDropped++;
            return;
        }

        if (header.Ttl <= 1)
        {
            Counters.TtlExpired++;
            return;
        }

        frame[DataHeader.Size..].CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(tree, flow, header with { Ttl = (byte)(header.Ttl - 1) }, payload, from: peer, deliverLocally: true);
    }

    // The payload is already in _scratch after the header's room.
    private void Forward(SessionTree tree, int flow, DataHeader header, int payload, GatewayId? from, bool deliverLocally)
    {
        var frame = _scratch.AsSpan(0, DataHeader.Size + payload);
        foreach (var peer in tree.Downstream.Keys)
        {
            if (peer == from)
            {
                continue;
            }

            (header with { Label = tree.Labels[flow] }).Write(frame);
            SendData(peer, frame);
        }

        if (tree.Name.MultiSource && tree.Upstream is { } upstream && upstream != from && tree.UpstreamLabels is { } labels)
        {
            (header with { Label = labels[flow] }).Write(frame);
            SendData(upstream, frame);
        }

        if (deliverLocally && tree.LocalChannels is { } channels)
        {
            if (_native.SendData(channels[flow], frame[DataHeader.Size..]))
            {
                Counters.DataDelivered++;
            }
            else
            {
                Counters.NativeSendFailed++;
            }
        }

        if (deliverLocally && tree.IsRoot && tree.Name.MultiSource && tree.RootChannels is { } roots)
        {
            // A remote source of a multi-source session reaches the owner island's native session too.
            if (_native.SendData(roots[flow], frame[DataHeader.Size..]))
            {
                Counters.DataDelivered++;
            }
            else
            {
                Counters.NativeSendFailed++;
            }
        }
    }

    private void SendData(GatewayId peer, ReadOnlySpan<byte> frame)
    {
        if (_host.Send(peer, frame))
        {
            Counters.DataForwarded++;
            if (_peers.TryGetValue(peer, out var link))
            {
                link.LastSent = _now;
            }
        }
        else
        {
            Counters.PeerSendFailed++;
        }
    }

    // ---------------------------------------------------------------- tree building

    private void OnJoin(PeeringLink link, JoinMessage m)
    {
        Counters.JoinsReceived++;
        var peer = link.Info.Gateway;
        var session = m.Session;
        if (Array.IndexOf(m.Trail, Id) >= 0 || m.Trail.Length >= PeerCodec.MaxPath)
        {
            Counters.JoinLoops++;
            SendNoRoute(peer, session);
            return;
        }

        if (!_sessions.TryGetValue(session, out var tree))
        {
            if (session.Owner == Island)
            {
                tree = CreateTree(session, isRoot: true);
            }
            else
            {
                var route = ChooseRoute(session, m.TargetOwner);
                if (route is null || route.NextHop == peer)
                {
                    SendNoRoute(peer, session);
                    return;
                }

                tree = CreateTree(session, isRoot: false);
                if (tree is not null)
                {
                    tree.Target = m.TargetOwner.Value != 0 ? m.TargetOwner : route.Destination;
                    JoinUpstream(tree, route.NextHop, m.Trail);
                }
            }

            if (tree is null)
            {
                SendNoRoute(peer, session);
                return;
            }
        }
        else if (!tree.IsRoot && tree.Upstream == peer)
        {
            // The peer we join through now joins through us: the routes disagree for a moment; refuse rather than loop.
            Counters.JoinLoops++;
            SendNoRoute(peer, session);
            return;
        }

        tree.Downstream[peer] = _now + _options.JoinHoldTime;
        SendControl(peer, PeerCodec.Translation(new TranslationMessage(session, tree.Labels)));
    }

    private void OnTranslation(GatewayId peer, TranslationMessage m)
    {
        if (!_sessions.TryGetValue(m.Session, out var tree) || tree.Upstream != peer)
        {
            Counters.TranslationsStale++;
            return;
        }

        if (tree.UpstreamLabels is { } old)
        {
            foreach (var label in old)
            {
                _upstreamLabels.Remove((peer, label));
            }
        }

        tree.UpstreamLabels = m.Labels;
        for (int i = 0; i < m.Labels.Length; i++)
        {
            _upstreamLabels[(peer, m.Labels[i])] = (tree, i);
        }
    }

    private void OnLeave(GatewayId peer, SessionName session)
    {
        Counters.LeavesReceived++;
        if (_sessions.TryGetValue(session, out var tree) && tree.Downstream.Remove(peer))
        {
            Maintain(forceJoin: false);
        }
    }

    private void OnNoRoute(GatewayId peer, SessionName session)
    {
        Counters.NoRoutesReceived++;
        if (_sessions.TryGetValue(session, out var tree) && tree.Upstream == peer)
        {
            ClearUpstream(tree);
            // Try another route at once; if there is none, Maintain tells the downstream peers.
            Maintain(forceJoin: false, avoid: peer);
        }
    }

    private void OnSrouteRequest(SrouteRequestMessage m)
    {
        if (Array.IndexOf(m.Trail, Id) >= 0 || m.Trail.Length >= PeerCodec.MaxPath)
        {
            Counters.SrouteDropped++;
            return;
        }

        var trail = m.Trail.Append(Id).ToArray();
        if (m.Target == Id)
        {
            var costs = _native.GetSroutes(m.Session, m.OwnerGateways) ?? [];
            var response = new SrouteResponseMessage(m.RequestId, m.Session, [.. costs.Take(PeerCodec.MaxPath)], trail);
            SendControl(trail[^2], PeerCodec.SrouteResponse(response));
            return;
        }

        var route = Router.Best(m.Session.Metric, m.Target);
        if (route is null)
        {
            Counters.SrouteDropped++;
            return;
        }

        SendControl(route.NextHop, PeerCodec.SrouteRequest(m with { Trail = trail }));
    }

    private void OnSrouteResponse(SrouteResponseMessage m)
    {
        int at = Array.IndexOf(m.Trail, Id);
        if (at < 0)
        {
            Counters.SrouteDropped++;
            return;
        }

        if (at > 0)
        {
            SendControl(m.Trail[at - 1], PeerCodec.SrouteResponse(m));
            return;
        }

        if (!_sroutes.Remove(m.RequestId, out var pending) || !pending.Request.Session.Equals(m.Session))
        {
            Counters.SrouteDropped++;
            return;
        }

        Decide(pending.Request, m.Costs);
    }

    /// <summary>Chooses the owner gateway for a client JOIN (routing cost + SROUTE cost) and answers the mediator:
    /// REDIRECT when the best route leaves through another gateway of our island, else TRANSLATION after joining.</summary>
    private void Decide(JoinRequest request, SrouteCost[]? srouteCosts)
    {
        var session = request.Session;
        var routes = Router.Table.ToIsland(session.Metric, session.Owner);
        if (request.TargetOwner.Value != 0)
        {
            routes = routes.Where(r => r.Destination == request.TargetOwner).ToList();
        }

        Route? best = null;
        uint bestCost = RouteCost.Infinite;
        foreach (var route in routes)
        {
            uint extra = 0;
            if (srouteCosts is { Length: > 0 })
            {
                int i = Array.FindIndex(srouteCosts, c => c.Gateway == route.Destination);
                extra = i >= 0 ? srouteCosts[i].Cost : RouteCost.Infinite;
            }

            uint total = RouteCost.Add(route.Cost, extra);
            if (best is null || total < bestCost)
            {
                best = route;
                bestCost = total;
            }
        }

        if (best is null || bestCost == RouteCost.Infinite)
        {
            Counters.ClientNoRoute++;
            request.Reply(MediatorReply.NoRoute($"no route from island {Island} to island {session.Owner}"));
            return;
        }

        if (!request.Redirected && Router.Peer(best.NextHop) is { Kind: PeerKind.Internal })
        {
            Counters.ClientRedirects++;
            request.Reply(MediatorReply.Redirect(best.NextHop, best.Destination));
            return;
        }

        if (!_sessions.TryGetValue(session, out var tree))
        {
            tree = CreateTree(session, isRoot: false);
            if (tree is null)
            {
                request.Reply(MediatorReply.NoRoute("session table full"));
                return;
            }
        }

        tree.Target = best.Destination;
        if (tree.Upstream is null)
        {
            JoinUpstream(tree, best.NextHop, []);
        }

        AnswerLocal(tree, request);
    }

    private void AnswerLocal(SessionTree tree, JoinRequest request)
    {
        tree.LocalUntil = _now + _options.JoinHoldTime;
        if (tree.IsRoot)
        {
            // Owner-island clients need no federation: they subscribe to the native session itself.
            request.Reply(MediatorReply.Translation([.. tree.RootChannels!.Select(c => c.Address)]));
            return;
        }

        if (tree.LocalChannels is null)
        {
            var channels = new NativeChannel[tree.Name.Flows.Count];
            for (int i = 0; i < channels.Length; i++)
            {
                var channel = _native.AllocateChannel(tree.Name, i, ChannelDirection.Down);
                if (channel is null)
                {
                    for (int j = 0; j < i; j++)
                    {
                        _native.ReclaimChannel(channels[j]);
                    }

                    tree.LocalUntil = null;
                    request.Reply(MediatorReply.NoRoute("island has no free native channel"));
                    Maintain(forceJoin: false);
                    return;
                }

                channels[i] = channel;
                if (tree.Name.MultiSource)
                {
                    _native.Subscribe(channel); // local sources of a multi-source session
                }
            }

            tree.LocalChannels = channels;
        }

        request.Reply(MediatorReply.Translation([.. tree.LocalChannels.Select(c => c.Address)]));
    }

    private void DropLocal(SessionTree tree)
    {
        tree.LocalUntil = null;
        if (tree.LocalChannels is { } channels)
        {
            foreach (var c in channels)
            {
                if (tree.Name.MultiSource)
                {
                    _native.Unsubscribe(c);
                }

                _native.ReclaimChannel(c);
            }

            tree.LocalChannels = null;
        }
    }

    private SessionTree? CreateTree(SessionName session, bool isRoot)
    {
        if (_sessions.Count >= _options.MaxSessions)
        {
            Counters.SessionsRefused++;
            return null;
        }

        var labels = new FlowLabel[session.Flows.Count];
        for (int i = 0; i < labels.Length; i++)
        {
            do
            {
                _nextLabel++;
            }
            while (_nextLabel == 0 || _myLabels.ContainsKey(new FlowLabel(_nextLabel)));
            labels[i] = new FlowLabel(_nextLabel);
        }

        NativeChannel[]? roots = null;
        if (isRoot)
        {
            roots = new NativeChannel[labels.Length];
            for (int i = 0; i < roots.Length; i++)
            {
                var channel = _native.AllocateChannel(session, i, ChannelDirection.Up);
                if (channel is null)
                {
                    for (int j = 0; j < i; j++)
                    {
                        _native.Unsubscribe(roots[j]);
                        _native.ReclaimChannel(roots[j]);
                    }

                    Counters.SessionsRefused++;
                    return null;
                }

                _native.Subscribe(channel);
                roots[i] = channel;
            }
        }

        var tree = new SessionTree(session, isRoot, labels) { RootChannels = roots };
        _sessions[session] = tree;
        for (int i = 0; i < labels.Length; i++)
        {
            _myLabels[labels[i]] = (tree, i);
        }

        return tree;
    }

    private void RemoveTree(SessionTree tree)
    {
        _sessions.Remove(tree.Name);
        foreach (var label in tree.Labels)
        {
            _myLabels.Remove(label);
        }

        ClearUpstream(tree);
        DropLocal(tree);
        if (tree.RootChannels is { } roots)
        {
            foreach (var c in roots)
            {
                _native.Unsubscribe(c);
                _native.ReclaimChannel(c);
            }
        }
    }

    private void ClearUpstream(SessionTree tree)
    {
        if (tree.Upstream is { } up && tree.UpstreamLabels is { } labels)
        {
            foreach (var label in labels)
            {
                _upstreamLabels.Remove((up, label));
            }
        }

        tree.Upstream = null;
        tree.UpstreamLabels = null;
    }

    private void JoinUpstream(SessionTree tree, GatewayId nextHop, GatewayId[] trail)
    {
        tree.Upstream = nextHop;
        tree.LastJoinSent = _now;
        var path = trail.Length < PeerCodec.MaxPath ? [.. trail, Id] : trail;
        SendControl(nextHop, PeerCodec.Join(new JoinMessage(tree.Name, tree.Target, path)));
    }

    private Route? ChooseRoute(SessionName session, GatewayId target, GatewayId? avoid = null)
    {
        if (target.Value != 0)
        {
            var r = Router.Best(session.Metric, target);
            if (r is not null && r.NextHop != avoid)
            {
                return r;
            }
        }

        return Router.Table.ToIsland(session.Metric, session.Owner).FirstOrDefault(r => r.NextHop != avoid);
    }

    /// <summary>Prunes trees nobody wants (LEAVE upstream), re-routes trees whose best next hop changed (LEAVE the old,
    /// JOIN the new), refreshes JOINs every <see cref="GatewayOptions.JoinRefreshInterval"/>, and tells downstream peers
    /// NO_ROUTE when a tree has no way left to the owner island.</summary>
    private void Maintain(bool forceJoin, GatewayId? avoid = null)
    {
        foreach (var tree in _sessions.Values.ToList())
        {
            if (!tree.HasInterest)
            {
                if (tree.Upstream is { } up)
                {
                    SendControl(up, PeerCodec.Leave(tree.Name));
                }

                RemoveTree(tree);
                continue;
            }

            if (tree.IsRoot)
            {
                if (_now - tree.LastJoinSent >= _options.JoinRefreshInterval)
                {
                    tree.LastJoinSent = _now;
                    foreach (var c in tree.RootChannels!)
                    {
                        _native.Refresh(c);
                    }
                }

                continue;
            }

            var route = ChooseRoute(tree.Name, tree.Target, avoid);
            if (route is null || tree.Downstream.ContainsKey(route.NextHop))
            {
                if (tree.Upstream is { } old)
                {
                    SendControl(old, PeerCodec.Leave(tree.Name));
                    ClearUpstream(tree);
                }

                if (route is null && tree.Downstream.Count > 0)
                {
                    foreach (var peer in tree.Downstream.Keys)
                    {
                        SendNoRoute(peer, tree.Name);
                    }

                    tree.Downstream.Clear();
                }

                if (!tree.HasInterest)
                {
                    RemoveTree(tree);
                }

                continue;
            }

            if (tree.Upstream != route.NextHop)
            {
                if (tree.Upstream is { } old)
                {
                    Counters.Reroutes++;
                    SendControl(old, PeerCodec.Leave(tree.Name));
                    ClearUpstream(tree);
                }

                JoinUpstream(tree, route.NextHop, []);
            }
            else if (forceJoin || _now - tree.LastJoinSent >= _options.JoinRefreshInterval)
            {
                JoinUpstream(tree, route.NextHop, []);
                foreach (var c in tree.LocalChannels ?? [])
                {
                    _native.Refresh(c);
                }
            }
        }
    }

    private void SendNoRoute(GatewayId peer, SessionName session)
    {
        Counters.NoRoutesSent++;
        SendControl(peer, PeerCodec.NoRoute(session));
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

    void IRouterOutput.SendRouteUpdate(GatewayId peer, RouteUpdate update) => SendControl(peer, PeerCodec.Routes(update));

    private sealed record PendingSroute(JoinRequest Request, TimeSpan Deadline);
}

/// <summary>A peering link as the gateway sees it: who, which island, its costs, when it last heard and sent.</summary>
public sealed class PeeringLink(PeerInfo info, LinkCosts costs)
{
    public PeerInfo Info { get; } = info;

    public LinkCosts Costs { get; } = costs;

    public TimeSpan LastHeard { get; set; }

    public TimeSpan LastSent { get; set; }
}
