using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Gateway;

/// <summary>What a gateway counts. Every refused frame or packet lands in exactly one counter.</summary>
public sealed class GatewayCounters
{
    public long FramesReceived;
    public long ControlFrames;
    public long DataReceived;
    public long DataForwarded;
    public long DataDatagrams;
    public long DataDelivered;
    public long DataFromIsland;
    public long DuplicatesDropped;
    public long TtlExpired;
    public long RpfDropped;
    public long UnknownLabel;
    public long OversizedPayload;
    public long NativeSendFailed;
    public long PeerSendFailed;
    public long FramesFromUnknownPeer;
    public long PeersRefused;

    /// <summary>A passive control node: peering links and client JOINs refused, and step-downs.</summary>
    public long PeersRefusedPassive;
    public long JoinsRefusedPassive;
    public long StepDowns;
    public long LabelsAdopted;
    public long TreesRebuilt;
    public long PeersTimedOut;
    public long JoinsReceived;
    public long JoinLoops;
    public long LeavesReceived;
    public long TranslationsStale;
    public long NoRoutesSent;
    public long NoRoutesReceived;
    public long SessionsRefused;
    public long SrouteRequestsSent;
    public long SrouteTimeouts;
    public long SrouteDropped;
    public long Reroutes;
    public long ExpiredDownstream;
    public long ExpiredLocal;
    public long ClientJoins;
    public long ClientNoRoute;
    public long ClientRedirects;

    /// <summary>DATA frames that reached a clustered control node (dropped: it never forwards data).</summary>
    public long DataAtControl;

    /// <summary>DATA_ENDPOINT frames for a session or a peer not on our tree.</summary>
    public long EndpointsStale;

    /// <summary>DATA_ENDPOINT addresses not kept: the bound on peers' data nodes (<see cref="BroadcastGateway.MaxPeerDataNodes"/>) was reached.</summary>
    public long PeerDataNodesRefused;

    /// <summary>Per-receiver delivery (seed 004): frames sent across links, packets handed to receivers, refusals.</summary>
    public long CoreCastPayloadsSent;
    public long CoreCastHeadersSent;
    public long ReceiverDataSent;
    public long ReceiverDelivered;
    public long CoreCastHashMismatch;
    public long CoreCastOrphanHeaders;
    public long UnknownReceiver;
    public long ReceiversRefused;

    /// <summary>RECEIVERS frames for a session we do not have, from a peer not downstream, or for a tree session.</summary>
    public long ReceiversStale;

    /// <summary>Malformed frames, by reason (<see cref="FrameError"/>).</summary>
    public readonly long[] Malformed = new long[Enum.GetValues<FrameError>().Length];

    public long MalformedTotal => Malformed.Sum();
}
