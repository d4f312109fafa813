using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Gateway;

/// <summary>
/// Tree building and soft state (seed §5.2.3, §5.3.4): JOIN answered with TRANSLATION (our flow labels), LEAVE, NO_ROUTE,
/// local clients' channels, creating and removing trees, and <see cref="Maintain"/>: prune, re-route, refresh.
/// </summary>
public sealed partial class BroadcastGateway
{
    public void RecvdLeaveRequest(SessionName session)
    {
        if (_sessions.TryGetValue(session, out var tree))
        {
            DropLocal(tree);
            Maintain(forceJoin: false);
        }
    }

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
        SendEndpoint(peer, tree);
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

    private void AnswerLocal(SessionTree tree, JoinRequest request)
    {
        tree.LocalUntil = _now + _options.JoinHoldTime;
        if (!tree.IsRoot && tree.Name.Delivery != SessionDelivery.Tree && request.Receiver != 0)
        {
            if (tree.LocalReceivers.ContainsKey(request.Receiver) || tree.LocalReceivers.Count < _options.MaxReceivers)
            {
                tree.LocalReceivers[request.Receiver] = _now + _options.JoinHoldTime;
            }
            else
            {
                Counters.ReceiversRefused++;
            }
        }

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
                if (tree.Name.MultiSource && _cluster is null)
                {
                    _native.Subscribe(channel); // local sources of a multi-source session (a data node's job when clustered)
                }
            }

            tree.LocalChannels = channels;
        }

        request.Reply(MediatorReply.Translation([.. tree.LocalChannels.Select(c => c.Address)]));
    }

    private void DropLocal(SessionTree tree)
    {
        tree.LocalUntil = null;
        tree.LocalReceivers.Clear();
        if (tree.LocalChannels is { } channels)
        {
            foreach (var c in channels)
            {
                if (tree.Name.MultiSource && _cluster is null)
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
        if (_cluster is not null)
        {
            // After a takeover: allocate above every label a data node still uses, and reuse a session's own.
            _nextLabel = Math.Max(_nextLabel, _cluster.MaxAdoptedLabel);
            if (_cluster.AdoptedLabels(session) is { } adopted && adopted.Length == labels.Length && !adopted.Any(_myLabels.ContainsKey))
            {
                adopted.CopyTo(labels, 0);
                Counters.LabelsAdopted++;
            }
        }

        for (int i = 0; i < labels.Length && labels[i].Value == 0; i++)
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
                        if (_cluster is null)
                        {
                            _native.Unsubscribe(roots[j]);
                        }

                        _native.ReclaimChannel(roots[j]);
                    }

                    Counters.SessionsRefused++;
                    return null;
                }

                if (_cluster is null)
                {
                    _native.Subscribe(channel); // clustered: the session's data node subscribes
                }

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
                if (_cluster is null)
                {
                    _native.Unsubscribe(c);
                }

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
        tree.ReceiversReported = null; // RECEIVERS go with every JOIN (the upstream may be new or have restarted)
        tree.Upstream = nextHop;
        tree.LastJoinSent = _now;
        var path = trail.Length < PeerCodec.MaxPath ? [.. trail, Id] : trail;
        SendControl(nextHop, PeerCodec.Join(new JoinMessage(tree.Name, tree.Target, path)));
        SendEndpoint(nextHop, tree);
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
}
