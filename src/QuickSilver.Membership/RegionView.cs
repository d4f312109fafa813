using System.Collections.Immutable;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership;

/// <summary>A member of a region view: the node and the unicast address its core listens on.</summary>
public readonly record struct ViewMember(NodeId Node, NetAddress Address);

/// <summary>The key a region's datagrams are sealed under in one view (docs/security.md, "Keys per region and view"):
/// its 32-bit id, unique among the keys one GMS epoch hands out, and 32 bytes of AES-256 key.</summary>
public sealed record RegionViewKey(uint Id, ImmutableArray<byte> Material)
{
    public bool Equals(RegionViewKey? other) => other is not null && Id == other.Id && Material.AsSpan().SequenceEqual(other.Material.AsSpan());

    public override int GetHashCode() => (int)Id;

    /// <summary>Never the key itself (views are logged).</summary>
    public override string ToString() => $"key {Id}";
}

/// <summary>
/// One immutable view of a region (QSM §2.1): its members in a fixed order (ascending node address, so "the node with
/// the smallest address" is index 0 of its partition), its IP multicast address (null when the pool ran out: the region then uses unicast fan-out), and a view number that grows by one
/// with each change. Partitions follow §2.3.1: p = max(1, floor(n / R)); the k-th member is in partition k mod p.
/// </summary>
public sealed record RegionView(RegionId Region, uint ViewNumber, ImmutableArray<ViewMember> Members, NetAddress? MulticastAddress)
{
    public int Count => Members.Length;

    /// <summary>The region's key in this view, drawn by the GMS when datagram security is on; null otherwise.</summary>
    public RegionViewKey? Key { get; init; }

    /// <summary>Number of partitions for replication factor <paramref name="replication"/>.</summary>
    public int PartitionCount(int replication) => Math.Max(1, Members.Length / Math.Max(1, replication));

    /// <summary>The partition of the member at <paramref name="index"/>.</summary>
    public int PartitionOf(int index, int replication) => index % PartitionCount(replication);

    /// <summary>The partition that caches packet <paramref name="sequence"/>.</summary>
    public int CachingPartition(ulong sequence, int replication) => (int)(sequence % (ulong)PartitionCount(replication));

    /// <summary>Views compare by value, members included (ImmutableArray alone would compare by reference).</summary>
    public bool Equals(RegionView? other)
        => other is not null && Region == other.Region && ViewNumber == other.ViewNumber
           && MulticastAddress == other.MulticastAddress && Members.AsSpan().SequenceEqual(other.Members.AsSpan()) && Equals(Key, other.Key);

    public override int GetHashCode() => HashCode.Combine(Region, ViewNumber, Members.Length);

    /// <summary>Index of <paramref name="node"/> in <see cref="Members"/>, or -1.</summary>
    public int IndexOf(NodeId node)
    {
        for (int i = 0; i < Members.Length; i++)
        {
            if (Members[i].Node == node)
            {
                return i;
            }
        }

        return -1;
    }
}

/// <summary>
/// One immutable view of a group: the region views it maps to (QSM §2.1, Figure 4). A message sent in a group is
/// numbered within one group view and becomes one regional request per region listed here.
/// </summary>
public sealed record GroupView(GroupId Group, string Name, uint ViewNumber, ImmutableArray<RegionRef> Regions)
{
    public int RegionCount => Regions.Length;

    /// <summary>Views compare by value, region references included.</summary>
    public bool Equals(GroupView? other)
        => other is not null && Group == other.Group && ViewNumber == other.ViewNumber
           && string.Equals(Name, other.Name, StringComparison.Ordinal) && Regions.AsSpan().SequenceEqual(other.Regions.AsSpan());

    public override int GetHashCode() => HashCode.Combine(Group, ViewNumber, Regions.Length);
}

/// <summary>A reference from a group view to a specific region view.</summary>
public readonly record struct RegionRef(RegionId Region, uint ViewNumber);
