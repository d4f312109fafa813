using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;

namespace QuickSilver.Federation.Mediation;

/// <summary>
/// A per-island mediator (seed §5.2.1): takes a client's JOIN, hands it to one gateway of the island, follows one
/// REDIRECT to the gateway named there, and answers the client with TRANSLATION or NO_ROUTE. Clients refresh their
/// JOIN periodically (soft state) and send LEAVE when done; LEAVE goes to every gateway of the island.
/// This in-process mediator serves the simulation and a gateway process that is its island's only mediator; the
/// multicast plug-in's well-known mediator group is the networked form.
/// </summary>
public sealed class Mediator
{
    private readonly Dictionary<GatewayId, INativeNetUpcalls> _gateways = [];
    private readonly List<GatewayId> _order = [];
    private int _next;

    public Mediator(IslandId island) => Island = island;

    public IslandId Island { get; }

    public long Joins { get; private set; }

    public long Redirects { get; private set; }

    public long BadRedirects { get; private set; }

    public void AddGateway(GatewayId id, INativeNetUpcalls gateway)
    {
        if (_gateways.TryAdd(id, gateway))
        {
            _order.Add(id);
        }
    }

    public void RemoveGateway(GatewayId id)
    {
        if (_gateways.Remove(id))
        {
            _order.Remove(id);
        }
    }

    /// <summary>Forwards a client JOIN to a gateway (round robin); <paramref name="done"/> gets the final answer.</summary>
    public void Join(SessionName session, Action<MediatorReply> done, uint receiver = 0)
    {
        Joins++;
        if (_order.Count == 0)
        {
            done(MediatorReply.NoRoute("no gateway in this island"));
            return;
        }

        var first = _order[_next++ % _order.Count];
        _gateways[first].RecvdJoinRequest(new JoinRequest(session, reply =>
        {
            if (reply.Kind != MediatorReplyKind.Redirect)
            {
                done(reply);
                return;
            }

            Redirects++;
            if (!_gateways.TryGetValue(reply.RedirectTo, out var target))
            {
                BadRedirects++;
                done(MediatorReply.NoRoute($"redirected to {reply.RedirectTo}, which is not a gateway of island {Island}"));
                return;
            }

            target.RecvdJoinRequest(new JoinRequest(session, second =>
                done(second.Kind == MediatorReplyKind.Redirect ? MediatorReply.NoRoute("redirected twice") : second), reply.TargetOwner, Redirected: true, Receiver: receiver));
        }, Receiver: receiver));
    }

    public void Leave(SessionName session)
    {
        foreach (var id in _order)
        {
            _gateways[id].RecvdLeaveRequest(session);
        }
    }
}
