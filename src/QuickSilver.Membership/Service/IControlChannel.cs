using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>
/// A reliable, ordered message channel to peers, as the GMS sees it (QSM §2.3: control traffic goes over a simple
/// TCP-like reliable unicast protocol). Implemented over the reliable unicast transport, or in memory in tests.
/// Core thread only.
/// </summary>
public interface IControlChannel
{
    /// <summary>The largest message <see cref="Send"/> takes.</summary>
    int MaxMessageBytes { get; }

    /// <summary>Queues a message to <paramref name="peer"/>. False when the channel's buffer for that peer is full.</summary>
    bool Send(NetAddress peer, ReadOnlySpan<byte> message);

    /// <summary>Called for every message received, in order per peer.</summary>
    void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed);

    /// <summary>Forgets a peer's state (after it was declared dead or left).</summary>
    void Forget(NetAddress peer);
}
