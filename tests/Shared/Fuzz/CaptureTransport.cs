using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Testing.Fuzz;

/// <summary>A datagram a <see cref="CaptureTransport"/>'s stack sent; valid only during the call.</summary>
internal delegate void SentObserver(NetAddress to, ReadOnlySpan<byte> datagram);

/// <summary>
/// A transport double for feeding a stack hostile datagrams: <see cref="Receive"/> hands one to the stack's handler as
/// if it had arrived from <c>from</c>; what the stack sends is counted and shown to the <see cref="Observer"/>, and registered feeds
/// are pulled on <see cref="PullFeeds"/>, at most a given number of datagrams, so a test bounds the work it asks for.
/// </summary>
internal sealed class CaptureTransport(NetAddress local, int maxDatagramSize = 1500) : IDatagramTransport
{
    private readonly byte[] _slot = new byte[maxDatagramSize];
    private readonly List<Feed> _feeds = new();
    private IDatagramHandler? _handler;

    public NetAddress LocalAddress => local;

    public int MaxDatagramSize => maxDatagramSize;

    /// <summary>Datagrams the stack sent (copies, claims and pulled feeds).</summary>
    public long Sent { get; private set; }

    public HashSet<NetAddress> Joined { get; } = new();

    /// <summary>Sees each datagram the stack sends (a rig that plays a peer reads its answers here).</summary>
    public SentObserver? Observer { get; set; }

    public void SetHandler(IDatagramHandler handler) => _handler = handler;

    public void Receive(NetAddress from, ReadOnlySpan<byte> datagram) =>
        (_handler ?? throw new InvalidOperationException("No stack is attached to this transport.")).OnDatagram(from, datagram);

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > maxDatagramSize)
        {
            throw new ArgumentException($"A datagram of {datagram.Length} bytes exceeds the transport's {maxDatagramSize}.", nameof(datagram));
        }

        Sent++;
        Observer?.Invoke(to, datagram);
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        slot = _slot;
        return true;
    }

    public Span<byte> ClaimedSlot => _slot;

    public void Commit(NetAddress to, int length)
    {
        if (length < 0 || length > maxDatagramSize)
        {
            throw new ArgumentOutOfRangeException(nameof(length), length, "a committed length outside the slot");
        }

        Sent++;
        Observer?.Invoke(to, _slot.AsSpan(0, length));
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        var channel = new Feed(this, feed);
        _feeds.Add(channel);
        return channel;
    }

    public void JoinGroup(NetAddress group) => Joined.Add(group);

    public void LeaveGroup(NetAddress group) => Joined.Remove(group);

    /// <summary>Pulls the active feeds, at most <paramref name="budget"/> datagrams in all; returns how many were pulled.</summary>
    public int PullFeeds(int budget)
    {
        int pulled = 0;
        foreach (var feed in _feeds.ToArray())
        {
            while (pulled < budget && feed.IsActive)
            {
                int length = feed.Source.Pull(_slot, out var to);
                if (length <= 0)
                {
                    feed.IsActive = false;
                    break;
                }

                pulled++;
                Sent++;
                Observer?.Invoke(to, _slot.AsSpan(0, length));
            }
        }

        return pulled;
    }

    private sealed class Feed(CaptureTransport owner, IDatagramFeed source) : IFeedChannel
    {
        public IDatagramFeed Source => source;

        public bool IsActive { get; set; } = true;

        public void Signal() => IsActive = true;

        public void Dispose()
        {
            IsActive = false;
            owner._feeds.Remove(this);
        }
    }
}
