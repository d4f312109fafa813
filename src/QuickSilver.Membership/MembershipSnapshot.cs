using MessagePack;

namespace QuickSilver.Membership;

/// <summary>
/// The GMS state as plain numbers (<see cref="MembershipState.Export"/>), MessagePack-encoded inside a
/// <see cref="GmsStateSnapshot"/>: what a replica writes to disk and what a lagging replica is sent instead of the log.
/// </summary>
[MessagePackObject]
internal sealed class MembershipSnapshot
{
    [Key(0)] public uint NextNode { get; set; } = 1;
    [Key(1)] public uint NextGroup { get; set; } = 1;
    [Key(2)] public uint NextRegion { get; set; } = 1;
    [Key(3)] public SnapshotNode[] Nodes { get; set; } = [];
    [Key(4)] public SnapshotGroup[] Groups { get; set; } = [];
    [Key(5)] public SnapshotRegion[] Regions { get; set; } = [];

    /// <summary>The id the next region key gets (0 in snapshots taken before keys existed: read as 1).</summary>
    [Key(6)] public uint NextKeyId { get; set; } = 1;
}

[MessagePackObject]
internal sealed class SnapshotNode
{
    [Key(0)] public uint Id { get; set; }
    [Key(1)] public uint Ip { get; set; }
    [Key(2)] public ushort Port { get; set; }
    [Key(3)] public string? Pinned { get; set; }

    /// <summary>The node's region id, 0 when it is in no group.</summary>
    [Key(4)] public uint Region { get; set; }
    [Key(5)] public uint[] Groups { get; set; } = [];
}

[MessagePackObject]
internal sealed class SnapshotGroup
{
    [Key(0)] public uint Id { get; set; }
    [Key(1)] public string Name { get; set; } = "";
    [Key(2)] public uint ViewNumber { get; set; }
}

[MessagePackObject]
internal sealed class SnapshotRegion
{
    [Key(0)] public uint Id { get; set; }
    [Key(1)] public uint ViewNumber { get; set; }
    [Key(2)] public uint MulticastIp { get; set; }
    [Key(3)] public ushort MulticastPort { get; set; }

    /// <summary>The current view's key id and key (null: no key). Keys are on the replicas' disks (docs/security.md).</summary>
    [Key(4)] public uint KeyId { get; set; }
    [Key(5)] public byte[]? Key { get; set; }
}
