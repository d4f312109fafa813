namespace QuickSilver.Federation.CoreCast;

/// <summary>What an ingress or egress router counts; every dropped packet lands in one counter.</summary>
public sealed class CoreCastCounters
{
    public long PayloadsStored;
    public long HashMismatch;
    public long Malformed;
    public long UnknownPayload;
    public long UnknownChannel;
    public long ChannelsFull;
    public long PayloadsSent;
    public long HeadersSent;
    public long UnicastSent;
    public long UnknownDestination;
    public long Rebuilt;
    public long TransitBytes;
}
