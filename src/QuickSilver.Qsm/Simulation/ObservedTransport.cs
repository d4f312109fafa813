using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Region;

namespace QuickSilver.Qsm.Simulation;

/// <summary>A sender's data endpoint that reports each region data datagram it sends to the timeline, then passes it on.</summary>
internal sealed class ObservedTransport(IDatagramTransport inner, RegionTimeline timeline, Func<TimeSpan> clock) : IDatagramTransport
{
    public NetAddress LocalAddress => inner.LocalAddress;

    public int MaxDatagramSize => inner.MaxDatagramSize;

    public void SetHandler(IDatagramHandler handler) => inner.SetHandler(handler);

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (RegionWire.TryReadData(datagram, out var header, out _))
        {
            timeline.OnTransmit(header.Sender, header.Seq, clock());
        }

        return inner.TrySend(to, datagram);
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed) => inner.RegisterFeed(feed);

    public void JoinGroup(NetAddress group) => inner.JoinGroup(group);

    public void LeaveGroup(NetAddress group) => inner.LeaveGroup(group);
}
