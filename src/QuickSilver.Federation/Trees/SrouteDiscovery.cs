using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Gateway;

/// <summary>
/// A client JOIN through the mediator and session-specific route discovery (seed §5.2.1–5.2.2): NO_ROUTE when the owner
/// island is unreachable, SROUTE_REQUEST / SROUTE_RESPONSE when owner gateways lie behind different next hops, then the
/// choice of owner gateway on routing + SROUTE cost, answered with REDIRECT (to another gateway of our island) or
/// TRANSLATION (after joining).
/// </summary>
public sealed partial class BroadcastGateway
{
    /// <summary>A client's JOIN through the island's mediator (seed §5.2.1): TRANSLATION, NO_ROUTE or REDIRECT.</summary>
    public void RecvdJoinRequest(JoinRequest request)
    {
        Counters.ClientJoins++;
        if (!IsActive)
        {
            Counters.JoinsRefusedPassive++; // no answer: the active control node on the same mediator group answers
            return;
        }

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

    private sealed record PendingSroute(JoinRequest Request, TimeSpan Deadline);
}
