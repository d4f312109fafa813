using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.NativeNet;

/// <summary>The seed's up_or_down flag: <see cref="Down"/> channels carry federation data into the island (allocated from
/// the island's pool); <see cref="Up"/> channels take a session's data out of the island (in the owner island: the
/// native session itself).</summary>
public enum ChannelDirection : byte
{
    Down = 0,
    Up = 1,
}

/// <summary>A native channel the plug-in allocated: its locally valid address (the TRANSLATION a client subscribes to)
/// and the plug-in's own handle.</summary>
public sealed class NativeChannel(SessionName session, int flow, ChannelDirection direction, string address)
{
    public SessionName Session { get; } = session;

    /// <summary>Index of the flow in <see cref="SessionName.Flows"/>.</summary>
    public int Flow { get; } = flow;

    public ChannelDirection Direction { get; } = direction;

    public string Address { get; } = address;

    /// <summary>The plug-in's handle (a socket, a group address, a list of members).</summary>
    public object? Handle { get; set; }

    public override string ToString() => $"{Direction} {Address}";
}

/// <summary>
/// The NativeNet plug-in (seed §5.4, Figure 8): everything a gateway needs from its island's broadcast medium, so a
/// new medium is one class. The seven downcalls, called on the gateway's thread:
/// allocate_channel, subscribe, refresh, unsubscribe, reclaim_channel, send_data and get_sroutes. The three upcalls
/// (<see cref="INativeNetUpcalls"/>) go back into the gateway, on its thread; the host marshals them there.
/// </summary>
public interface INativeNet
{
    /// <summary>Allocates a native address for one flow of <paramref name="session"/>: from the pool for
    /// <see cref="ChannelDirection.Down"/>, the native session's own address for <see cref="ChannelDirection.Up"/> in the
    /// owner island. Null when the pool is exhausted or the native name is not understood.</summary>
    NativeChannel? AllocateChannel(SessionName session, int flow, ChannelDirection direction);

    /// <summary>Listen on <paramref name="channel"/> and hand its packets to <see cref="INativeNetUpcalls.RecvdData"/>.</summary>
    void Subscribe(NativeChannel channel);

    /// <summary>Called at every tree refresh; a medium with soft-state subscriptions renews them (IP multicast: nothing).</summary>
    void Refresh(NativeChannel channel);

    void Unsubscribe(NativeChannel channel);

    /// <summary>Returns the channel's address to the pool.</summary>
    void ReclaimChannel(NativeChannel channel);

    /// <summary>Takes <paramref name="address"/> as the Down channel of one flow, as if this plug-in had allocated it:
    /// a standby control node that took over adopts the channels its data nodes already deliver to (local clients keep
    /// listening where they are). Null when the plug-in cannot (the default; clients then move to a new address on
    /// their next JOIN) or the address is not free in its pool.</summary>
    NativeChannel? AdoptChannel(SessionName session, int flow, string address) => null;

    /// <summary>Sends one packet on the native medium. False when it could not (counted by the gateway).</summary>
    bool SendData(NativeChannel channel, ReadOnlySpan<byte> data);

    /// <summary>SROUTE costs: how close each listed gateway of this (owner) island is to the root of the session's native
    /// tree. Null: the island exposes nothing (the seed's null SROUTE_RESPONSE).</summary>
    IReadOnlyList<SrouteCost>? GetSroutes(SessionName session, IReadOnlyList<GatewayId> gateways);
}

/// <summary>A plug-in that runs under a <see cref="Runtime.GatewayRuntime"/> on real sockets: the runtime's
/// <see cref="Runtime.GatewayRuntime.Start"/> binds it, and the plug-in starts its own I/O then.</summary>
public interface IHostedNativeNet : INativeNet
{
    /// <summary>Connects the plug-in to its gateway (<paramref name="upcalls"/>) and to the gateway's loop thread
    /// (<paramref name="loop"/>: native data and other events are handed there).</summary>
    void Bind(INativeNetUpcalls upcalls, INativeNetLoop loop);

    /// <summary>Called on the loop thread after each batch of events: a plug-in that gathers the packets
    /// <see cref="INativeNet.SendData"/> gave it hands them to the medium now (one system call for many).</summary>
    void FlushSends()
    {
    }
}

/// <summary>The loop thread a hosted plug-in's receive loops hand their events to. Both refuse (false: the plug-in
/// drops and counts) when the loop's queue is full, so a receive loop never blocks.</summary>
public interface INativeNetLoop
{
    /// <summary>Runs <paramref name="action"/> on the loop thread (control: mediator requests, member changes).</summary>
    bool TryPost(Action action);

    /// <summary>Hands a packet from <paramref name="channel"/> to <see cref="INativeNetUpcalls.RecvdData"/> on the loop
    /// thread. The data is copied into the loop's queue before this returns (no allocation per packet), so the caller may
    /// reuse its receive buffer at once.</summary>
    bool TryPostData(NativeChannel channel, ReadOnlySpan<byte> data);
}

/// <summary>The three upcalls of the seed's NativeNet: data from a native channel, and a client's JOIN or LEAVE through
/// the island's mediator.</summary>
public interface INativeNetUpcalls
{
    void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data);

    void RecvdJoinRequest(JoinRequest request);

    void RecvdLeaveRequest(SessionName session);
}

/// <summary>A plug-in that can send to one numbered receiver of its island (a unicast medium such as TCP fan-out, or
/// the simulator): what per-receiver sessions (<see cref="SessionDelivery"/>) use at the egress gateway. A plug-in
/// without it gets each packet once on the session's Down channel (Algorithm 2's local-multicast option).</summary>
public interface IReceiverNativeNet : INativeNet
{
    bool SendToReceiver(NativeChannel channel, uint receiver, ReadOnlySpan<byte> data);
}
