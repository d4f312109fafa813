using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Tests.Security;

/// <summary>An endpoint double for one side of a wire: what is committed is kept in a reused buffer (the last datagram,
/// and its destination) so a test can hand it to another side's <see cref="Deliver"/>; feeds are pulled by
/// <see cref="PullOne"/>. Allocates nothing per datagram.</summary>
internal sealed class WireDouble(NetAddress local, int maxDatagramSize = 1472) : IDatagramTransport
{
    private readonly byte[] _slot = new byte[maxDatagramSize];
    private readonly byte[] _last = new byte[maxDatagramSize];
    private IDatagramFeed? _feed;
    private bool _claimed;

    public NetAddress LocalAddress { get; } = local;

    public int MaxDatagramSize { get; } = maxDatagramSize;

    public IDatagramHandler? Handler { get; private set; }

    /// <summary>The bytes of the last datagram committed.</summary>
    public ReadOnlySpan<byte> Last => _last.AsSpan(0, LastLength);

    public int LastLength { get; private set; }

    public NetAddress LastDestination { get; private set; }

    public int Sent { get; private set; }

    public bool Full { get; set; }

    public void SetHandler(IDatagramHandler handler) => Handler = handler;

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (!TryClaim(out var slot))
        {
            return false;
        }

        datagram.CopyTo(slot);
        Commit(to, datagram.Length);
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        slot = Full ? default : _slot;
        _claimed = !Full;
        return !Full;
    }

    public Span<byte> ClaimedSlot => _claimed ? _slot : throw new InvalidOperationException("nothing claimed");

    public void Commit(NetAddress to, int length)
    {
        _claimed = false;
        Keep(_slot.AsSpan(0, length), to);
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        _feed = feed;
        return new NoChannel();
    }

    /// <summary>Pulls the registered feed once into a slot, as an endpoint does.</summary>
    public int PullOne()
    {
        int length = _feed!.Pull(_slot, out var to);
        if (length > 0)
        {
            Keep(_slot.AsSpan(0, length), to);
        }

        return length;
    }

    /// <summary>A datagram arrives at this endpoint.</summary>
    public void Deliver(NetAddress from, ReadOnlySpan<byte> datagram) => Handler!.OnDatagram(from, datagram);

    public void JoinGroup(NetAddress group)
    {
    }

    public void LeaveGroup(NetAddress group)
    {
    }

    private void Keep(ReadOnlySpan<byte> datagram, NetAddress to)
    {
        datagram.CopyTo(_last);
        LastLength = datagram.Length;
        LastDestination = to;
        Sent++;
    }

    private sealed class NoChannel : IFeedChannel
    {
        public bool IsActive => true;

        public void Signal()
        {
        }

        public void Dispose()
        {
        }
    }
}

/// <summary>Records what reaches the stack above a <see cref="Security.SecureTransport"/> (copies; tests only).</summary>
internal sealed class Received : IDatagramHandler
{
    public List<byte[]> Datagrams { get; } = new();

    public int Count { get; private set; }

    public bool Keep { get; set; } = true;

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        Count++;
        if (Keep)
        {
            Datagrams.Add(datagram.ToArray());
        }
    }
}
