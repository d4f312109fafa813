using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Gateway;

/// <summary>What the gateway state machine may do to the outside world besides its NativeNet plug-in: send a frame on a
/// peering link and drop a link. Implemented by the TCP runtime and by the simulated mesh.</summary>
public interface IGatewayHost
{
    /// <summary>Queues <paramref name="frame"/> (copied) on the link to <paramref name="peer"/>; false when the link is gone
    /// or its bounded queue is full.</summary>
    bool Send(GatewayId peer, ReadOnlySpan<byte> frame);

    /// <summary>Sends a DATA frame of a real-time flow as one UDP datagram to <paramref name="peer"/> (the seed's "UDP
    /// for real-time"): no queue, no retransmission. A host without a datagram path sends it on the link instead.</summary>
    bool SendDatagram(GatewayId peer, ReadOnlySpan<byte> frame);

    /// <summary>Sends a DATA frame to data node <paramref name="node"/> of the clustered gateway <paramref name="peer"/>
    /// (the peer announced it with DATA_ENDPOINT). A host that cannot reach data nodes sends it to the peer itself.</summary>
    bool SendToDataNode(GatewayId peer, uint node, ReadOnlySpan<byte> frame, bool realTime) => realTime ? SendDatagram(peer, frame) : Send(peer, frame);

    /// <summary>The peer announced (DATA_ENDPOINT) where its data node <paramref name="node"/> takes DATA. A host that
    /// resolves data nodes by configuration only ignores it.</summary>
    void LearnDataNode(GatewayId peer, uint node, System.Net.IPEndPoint address)
    {
    }

    /// <summary>Closes the link to <paramref name="peer"/> (the gateway already forgot it).</summary>
    void Disconnect(GatewayId peer);
}
