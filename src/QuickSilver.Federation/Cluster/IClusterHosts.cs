using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Cluster;

/// <summary>What the control node's <see cref="DataCoordinator"/> may do: send a frame to one of its data nodes.</summary>
public interface IControlHost
{
    /// <summary>Sends <paramref name="frame"/> (copied) to data node <paramref name="node"/>; false when it could not.</summary>
    bool SendToDataNode(uint node, ReadOnlySpan<byte> frame);

    /// <summary>Where data node <paramref name="node"/> takes DATA from peers (announced in DATA_ENDPOINT); null when
    /// the host does not know (peers then resolve the number by their configuration).</summary>
    System.Net.IPEndPoint? AddressOf(uint node) => null;

    /// <summary>Sends <paramref name="frame"/> (a LEAD) to the gateway's other control node
    /// (<see cref="ClusterOptions.ControlNodes"/> = 2); false when it could not or there is none.</summary>
    bool SendToOtherControl(ReadOnlySpan<byte> frame) => false;
}

/// <summary>What a <see cref="DataNode"/> may do besides its NativeNet plug-in: send a frame to its control node (to both
/// control nodes, when the gateway has a standby: <see cref="ClusterOptions.ControlNodes"/>), and
/// send a DATA frame to a peer gateway (to the data node `endpoint` there, 0: the gateway itself).</summary>
public interface IDataNodeHost
{
    bool SendToControl(ReadOnlySpan<byte> frame);

    bool SendData(GatewayId peer, uint endpoint, ReadOnlySpan<byte> frame, bool realTime);

    /// <summary>The control node's ASSIGN says where data node <paramref name="node"/> of peer gateway
    /// <paramref name="gateway"/> takes DATA (learnt from that peer's DATA_ENDPOINT). A host that resolves data nodes by
    /// configuration only ignores it.</summary>
    void LearnPeerNode(GatewayId gateway, uint node, System.Net.IPEndPoint address)
    {
    }
}
