using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.NativeNet;

/// <summary>The three answers to a client's JOIN (seed §5.2.1–5.2.2).</summary>
public enum MediatorReplyKind : byte
{
    /// <summary>Subscribe to these native addresses (one per flow).</summary>
    Translation = 1,

    /// <summary>There is no path from this island to the owner island.</summary>
    NoRoute = 2,

    /// <summary>Ask <see cref="MediatorReply.RedirectTo"/> instead (it has the best session-specific route).</summary>
    Redirect = 3,
}

public sealed record MediatorReply(MediatorReplyKind Kind, IReadOnlyList<string> Addresses, GatewayId RedirectTo, GatewayId TargetOwner, string Reason)
{
    public static MediatorReply Translation(IReadOnlyList<string> addresses) => new(MediatorReplyKind.Translation, addresses, default, default, "");

    public static MediatorReply NoRoute(string reason) => new(MediatorReplyKind.NoRoute, [], default, default, reason);

    public static MediatorReply Redirect(GatewayId to, GatewayId targetOwner) => new(MediatorReplyKind.Redirect, [], to, targetOwner, "");
}

/// <summary>A client's JOIN as the mediator hands it to a gateway. <see cref="TargetOwner"/> and <see cref="Redirected"/>
/// are set when the mediator follows a REDIRECT: the new gateway then joins toward that owner gateway without another
/// SROUTE discovery and never redirects again. <see cref="Reply"/> is called once, on the gateway's thread, maybe later
/// (after SROUTE discovery).</summary>
/// <param name="Receiver">The client's receiver number in this island (0: anonymous). Sessions with per-receiver delivery
/// (<see cref="SessionDelivery"/>) deliver to each numbered receiver individually.</param>
public sealed record JoinRequest(SessionName Session, Action<MediatorReply> Reply, GatewayId TargetOwner = default, bool Redirected = false, uint Receiver = 0);
