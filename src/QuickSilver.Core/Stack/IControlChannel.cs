using QuickSilver.Core.Io;

namespace QuickSilver.Core.Stack;

/// <summary>
/// A reliable, ordered message channel to peers (QSM §2.3: control traffic travels over "a simple TCP-like reliable
/// unicast protocol"). Several layers share one reliable transport; each owns one channel, named by a one-byte id that
/// the transport puts in front of every message and dispatches on (docs/wire-format.md lists the ids). Core thread only.
/// </summary>
public interface IControlChannel
{
    /// <summary>The largest message <see cref="Send"/> takes.</summary>
    int MaxMessageBytes { get; }

    /// <summary>Queues a message to <paramref name="peer"/>. False when the transport's buffer for that peer is full.</summary>
    bool Send(NetAddress peer, ReadOnlySpan<byte> message);

    /// <summary>Sets who gets this channel's messages (in order per peer) and the transport's peer-failure reports.</summary>
    void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed);

    /// <summary>Forgets a peer's state (after it was declared dead or left). Shared by every channel to that peer.</summary>
    void Forget(NetAddress peer);
}

/// <summary>
/// Implemented by a layer that offers reliable control channels to the layers above it (today the reliable unicast
/// layer). <see cref="LayerContext.OpenControlChannel"/> finds it below the layer asking.
/// </summary>
public interface IControlTransport
{
    /// <summary>Opens channel <paramref name="id"/>. Throws <see cref="ArgumentException"/> when another layer owns it.</summary>
    IControlChannel OpenChannel(byte id, string owner);
}
