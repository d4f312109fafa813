using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Simulation;

/// <summary>A simulated endpoint: the <see cref="IDatagramTransport"/> protocol code sees on a <see cref="SimNode"/>.</summary>
internal sealed class SimTransport : IDatagramTransport
{
    private readonly SimNetwork _network;
    private readonly FeedSet<IDatagramFeed> _feeds = new();
    private readonly HashSet<NetAddress> _groups = new();
    private readonly byte[] _pullBuffer;
    private readonly byte[] _claimBuffer;
    private IDatagramHandler? _handler;

    public SimTransport(SimNetwork network, SimNode node, NetAddress address, int maxDatagramSize)
    {
        _network = network;
        Node = node;
        LocalAddress = address;
        MaxDatagramSize = maxDatagramSize;
        _pullBuffer = new byte[maxDatagramSize];
        _claimBuffer = new byte[maxDatagramSize];
        _feeds.BecameActive += () => Node.WantsToSend(this);
    }

    public SimNode Node { get; }

    /// <summary>The node's receive-queue drops (every endpoint of a node shares its receive CPU and queue).</summary>
    public long ReceiveOverflows => Node.ReceiveQueueDrops;

    public NetAddress LocalAddress { get; }

    public int MaxDatagramSize { get; }

    public bool IsClosed { get; private set; }

    public void SetHandler(IDatagramHandler handler) => _handler = handler ?? throw new ArgumentNullException(nameof(handler));

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        ObjectDisposedException.ThrowIf(IsClosed, this);
        if (datagram.Length > MaxDatagramSize)
        {
            throw new ArgumentException($"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({MaxDatagramSize}).", nameof(datagram));
        }

        _network.Send(this, to, datagram);
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        ObjectDisposedException.ThrowIf(IsClosed, this);
        slot = _claimBuffer;
        return true; // the simulated uplink queues (and may drop, counted) instead of refusing
    }

    public Span<byte> ClaimedSlot => _claimBuffer;

    public void Commit(NetAddress to, int length)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(length, MaxDatagramSize);
        _network.Send(this, to, _claimBuffer.AsSpan(0, length));
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        ObjectDisposedException.ThrowIf(IsClosed, this);
        return _feeds.Register(feed);
    }

    public void JoinGroup(NetAddress group)
    {
        ObjectDisposedException.ThrowIf(IsClosed, this);
        if (!group.IsMulticast)
        {
            throw new ArgumentException($"{group} is not an IPv4 multicast address (224.0.0.0/4).", nameof(group));
        }

        if (_groups.Add(group))
        {
            _network.JoinGroup(group, this);
        }
    }

    public void LeaveGroup(NetAddress group)
    {
        if (_groups.Remove(group))
        {
            _network.LeaveGroup(group, this);
        }
    }

    /// <summary>Pulls one datagram from the next active feed and sends it. False when no feed has anything.</summary>
    internal bool PullOne()
    {
        while (!IsClosed && _feeds.TryNext(out var channel, out var feed))
        {
            int length = feed.Pull(_pullBuffer, out var to);
            if (length <= 0)
            {
                _feeds.Deactivate(channel);
                continue;
            }

            _network.Send(this, to, _pullBuffer.AsSpan(0, Math.Min(length, MaxDatagramSize)));
            return true;
        }

        return false;
    }

    internal void Deliver(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (_handler is null)
        {
            _network.Drops.Increment(DropReason.NoHandler);
            return;
        }

        _handler.OnDatagram(from, datagram);
    }

    internal void Close()
    {
        IsClosed = true;
        foreach (var group in _groups)
        {
            _network.LeaveGroup(group, this);
        }

        _groups.Clear();
    }
}
