using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Cluster;

/// <summary>A data node's counters (one thread writes them).</summary>
public sealed class DataNodeCounters
{
    public long ControlFrames;
    public long Assigns;
    public long AssignsRefused;
    public long AssignsForOtherNode;
    public long Releases;
    public long Resets;
    public long ExpiredSessions;
    public long DataReceived;
    public long DataForwarded;
    public long DataDelivered;
    public long DataFromIsland;
    public long DuplicatesDropped;
    public long TtlExpired;
    public long RpfDropped;
    public long UnknownLabel;
    public long OversizedPayload;
    public long NativeSendFailed;
    public long SendFailed;
    public long HeartbeatsSent;

    /// <summary>Standby control node: control frames of a term lower than the one followed (dropped); newer terms
    /// followed; LEADs heard; REPORT frames sent to a new leader.</summary>
    public long StaleTerm;
    public long TermsFollowed;
    public long Leads;
    public long ReportsSent;

    /// <summary>Control frames dropped because their tag did not verify (forged, altered, unauthenticated), and
    /// because their counter was a replay (<see cref="ClusterAuthenticator"/>).</summary>
    public long Unauthenticated;
    public long Replayed;

    /// <summary>Malformed control frames by reason (<see cref="FrameError"/>), and malformed DATA frames under BadValue.</summary>
    public readonly long[] Malformed = new long[Enum.GetValues<FrameError>().Length];

    public long MalformedTotal => Malformed.Sum();
}
