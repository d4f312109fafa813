using QuickSilver.Core.Feeds;

namespace QuickSilver.Core.Io;

/// <summary>Receives datagrams on the core thread. The span is only valid during the call.</summary>
public interface IDatagramHandler
{
    void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram);
}

/// <summary>
/// A pull-model source of datagrams. The transport calls <see cref="Pull"/> on the core thread when it can send
/// (socket buffer space, rate control). Returning 0 means "nothing now": the feed is deactivated and not pulled again
/// until its <see cref="IFeedChannel"/> is signalled.
/// </summary>
public interface IDatagramFeed
{
    /// <summary>Writes the next datagram into <paramref name="buffer"/> (whose length is the transport's maximum datagram size)
    /// and its destination into <paramref name="to"/>. Returns the number of bytes written, or 0 for "nothing now".</summary>
    int Pull(Span<byte> buffer, out NetAddress to);
}

/// <summary>
/// One bound datagram endpoint, as protocol code sees it: a UDP socket on the real core, or a node's port in the
/// simulated network. All members are called on the host's core thread.
/// </summary>
public interface IDatagramTransport
{
    /// <summary>The unicast address this endpoint is bound to.</summary>
    NetAddress LocalAddress { get; }

    /// <summary>Largest datagram this endpoint sends or accepts, in bytes.</summary>
    int MaxDatagramSize { get; }

    /// <summary>Sets the handler that receives every datagram arriving at this endpoint (unicast and joined multicast groups).</summary>
    void SetHandler(IDatagramHandler handler);

    /// <summary>Queues one datagram for sending (a copy into the next send slot). Returns false, and counts a drop,
    /// when the send queue is full (the caller should prefer a feed, which is back-pressured instead).</summary>
    bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram);

    /// <summary>Claims the next send slot so a layer writes its datagram in place (no copy):
    /// <paramref name="slot"/> is <see cref="MaxDatagramSize"/> bytes; finish with <see cref="Commit"/> before any
    /// other call on this transport. False, with nothing claimed, when the send queue is full.</summary>
    bool TryClaim(out Span<byte> slot);

    /// <summary>Queues the claimed slot's first <paramref name="length"/> bytes for <paramref name="to"/>.</summary>
    void Commit(NetAddress to, int length);

    /// <summary>The slot the last <see cref="TryClaim"/> returned, while it is claimed (until <see cref="Commit"/>):
    /// a decorator that finishes a datagram in place on commit (<c>SecureTransport</c> appends its trailer) reads it
    /// back here. <see cref="InvalidOperationException"/> when no slot is claimed.</summary>
    Span<byte> ClaimedSlot { get; }

    /// <summary>Registers a pull-model feed. The returned channel re-activates the feed (<see cref="IFeedChannel.Signal"/>) and removes it.</summary>
    IFeedChannel RegisterFeed(IDatagramFeed feed);

    /// <summary>Starts receiving the datagrams sent to the multicast address <paramref name="group"/> (its IP and port);
    /// they reach this endpoint's handler like unicast ones. The sender of a multicast datagram appears as its
    /// unicast address.</summary>
    void JoinGroup(NetAddress group);

    /// <summary>Stops receiving <paramref name="group"/> (IP and port).</summary>
    void LeaveGroup(NetAddress group);

    /// <summary>Datagrams this endpoint's receive queue dropped because it was full (the kernel's socket buffers, or a
    /// simulated node's receive queue) since it opened, or −1 where the transport cannot tell. A receiver that sees it
    /// grow tells its senders it is overflowing (QSM's congestion signal, docs/qsm.md "Congestion control").</summary>
    long ReceiveOverflows => -1;
}
