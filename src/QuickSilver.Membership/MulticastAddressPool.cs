using QuickSilver.Core;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership;

/// <summary>
/// The GMS's pool of IP multicast addresses for regions (QSM §2.1): <c>Count</c> consecutive addresses from
/// <c>First</c>, all on one port. The lowest free address is handed out first and an address is reused once its
/// region goes away. When the pool is empty a region gets no address and falls back to unicast fan-out.
/// </summary>
internal sealed class MulticastAddressPool
{
    private readonly SortedSet<uint> _free = new();

    public MulticastAddressPool(NetAddress first, int count)
    {
        if (!first.IsMulticast)
        {
            throw new ArgumentException($"The multicast address pool must start at a multicast address, got {first}.", nameof(first));
        }

        OptionChecks.InRange(count, 1, 1 << 20, "MembershipOptions.MulticastPoolSize");
        if (first.Ip + (uint)(count - 1) > 0xEFFFFFFFu || first.Ip + (uint)(count - 1) < first.Ip)
        {
            throw new ArgumentException($"A pool of {count} addresses from {first} leaves the multicast range 224.0.0.0/4.", nameof(count));
        }

        First = first;
        Count = count;
        for (uint i = 0; i < count; i++)
        {
            _free.Add(first.Ip + i);
        }
    }

    public NetAddress First { get; }

    public int Count { get; }

    public int Available => _free.Count;

    public bool TryAllocate(out NetAddress address)
    {
        if (_free.Count == 0)
        {
            address = default;
            return false;
        }

        uint ip = _free.Min;
        _free.Remove(ip);
        address = new NetAddress(ip, First.Port);
        return true;
    }

    /// <summary>Takes one given address out of the pool (loading a snapshot); false if it is not free in this pool.</summary>
    public bool Take(NetAddress address)
        => address.Port == First.Port && _free.Remove(address.Ip);

    public void Release(NetAddress address)
    {
        if (address.Port == First.Port && address.Ip >= First.Ip && address.Ip - First.Ip < (uint)Count && !_free.Add(address.Ip))
        {
            throw new InvalidOperationException($"Multicast address {address} released twice.");
        }
    }
}
