using MessagePack;

namespace QuickSilver.Membership.Service;

/// <summary>
/// GMS control messages (MessagePack, see docs/membership.md). Each message is one MessagePack array whose first
/// element is the <see cref="GmsMessageKind"/>; views travel as plain arrays of numbers so the wire does not depend on
/// .NET collection types.
/// </summary>
internal enum GmsMessageKind : byte
{
    Hello = 1,
    Welcome = 2,
    Join = 3,
    Leave = 4,
    Heartbeat = 5,
    Update = 6,
    Bye = 7,

    /// <summary>Node to GMS: a new key for region <see cref="GmsMessage.Number"/>, please (this node sealed
    /// <c>MaxDatagramsPerKey</c> datagrams under the current one). Answered by the region's next view.</summary>
    Rekey = 10,

    /// <summary>GMS to node: a request was refused (a limit of <see cref="GmsOptions"/>); nothing of it was applied.</summary>
    Refused = 8,

    /// <summary>A GMS replica that does not lead, to a node: send to the leader instead. Number: the leader's address
    /// (IPv4 &lt;&lt; 16 | port), 0 when no leader is known (try another replica).</summary>
    Redirect = 9,

    /// <summary>Node to any replica, a read: send me my current views (the groups I am in and the regions they map to).
    /// Number: the node's id. A follower answers from its applied state when it is fresh enough
    /// (<see cref="GmsOptions.FollowerReadMaxLag"/>, <see cref="GmsOptions.FollowerReadMaxAge"/>), otherwise it redirects;
    /// the leader always answers. Answered by <see cref="Views"/>.</summary>
    Sync = 11,

    /// <summary>Replica to node, the answer to a <see cref="Sync"/>: <see cref="GmsMessage.Update"/> holds the node's views
    /// as this replica has applied them (no left groups), <see cref="GmsMessage.Epoch"/> the epoch, Number the Raft log
    /// index they were read at. The node keeps only views newer than the ones it holds, so it never moves backwards.</summary>
    Views = 12,

    /// <summary>Replica to replica: add me (the sender's address) to the replica set; a replica started to join a running
    /// GMS sends it to every listed replica until one answers <see cref="ReplicaChanged"/>. Only the leader acts on it,
    /// and only when the GMS seals datagrams (the sender holds the secret) or the sender is a loopback address.</summary>
    ReplicaJoin = 13,

    /// <summary>Replica to replica: remove me from the replica set (a replica leaving on purpose). As
    /// <see cref="ReplicaJoin"/>.</summary>
    ReplicaLeave = 15,

    /// <summary>Leader to replica: the change it asked for was committed (Number 1) or not (0).</summary>
    ReplicaChanged = 14,
}

[MessagePackObject]
internal sealed class GmsMessage
{
    [Key(0)] public GmsMessageKind Kind { get; set; }

    /// <summary>Hello: the node's incarnation (random per process start). Welcome: the assigned node id. Refused: the
    /// <see cref="GmsRefusal"/>. Redirect: the leader's address.</summary>
    [Key(1)] public ulong Number { get; set; }

    /// <summary>Join/Leave: the group name. Refused: the group of the refused join (null: registration was refused).</summary>
    [Key(2)] public string? GroupName { get; set; }

    /// <summary>Update: the node's incremental update.</summary>
    [Key(3)] public WireUpdate? Update { get; set; }

    /// <summary>Welcome: heartbeat interval the node must keep, in milliseconds.</summary>
    [Key(4)] public int HeartbeatMs { get; set; }

    /// <summary>Welcome: the GMS incarnation. Ids and view numbers are only comparable within one epoch. Hello: the epoch the
    /// node was last registered in (0: never), so a restarted GMS knows its old members are coming back
    /// (<see cref="GmsOptions.RestartGrace"/>).</summary>
    [Key(5)] public ulong Epoch { get; set; }

    /// <summary>Refused: the value of the limit the request ran into.</summary>
    [Key(6)] public long Limit { get; set; }

    /// <summary>Hello: the highest region id in the views the node holds (0: none). A restarted GMS numbers its regions
    /// above the highest its old members report (<see cref="GmsOpKind.RegionFloor"/>).</summary>
    [Key(7)] public ulong RegionFloor { get; set; }
}

[MessagePackObject]
internal sealed class WireUpdate
{
    [Key(0)] public WireGroupView[] Groups { get; set; } = [];
    [Key(1)] public WireRegionView[] Regions { get; set; } = [];
    [Key(2)] public uint[] LeftGroups { get; set; } = [];
}

[MessagePackObject]
internal sealed class WireGroupView
{
    [Key(0)] public uint Group { get; set; }
    [Key(1)] public string Name { get; set; } = "";
    [Key(2)] public uint ViewNumber { get; set; }

    /// <summary>Pairs (region id, region view number), flattened.</summary>
    [Key(3)] public uint[] Regions { get; set; } = [];
}

[MessagePackObject]
internal sealed class WireRegionView
{
    [Key(0)] public uint Region { get; set; }
    [Key(1)] public uint ViewNumber { get; set; }

    /// <summary>Triples (node id, IPv4 address, port), flattened, in the view's member order.</summary>
    [Key(2)] public uint[] Members { get; set; } = [];

    /// <summary>Multicast IPv4 address and port; 0 and 0 when the region uses unicast fan-out.</summary>
    [Key(3)] public uint MulticastIp { get; set; }
    [Key(4)] public ushort MulticastPort { get; set; }

    /// <summary>The region's key in this view (docs/wire-format.md, "Region key hand-out"): its id and 32 bytes, or 0 and
    /// nil when datagram security is off. Travels inside the GMS's sealed reliable-unicast segments.</summary>
    [Key(5)] public uint KeyId { get; set; }
    [Key(6)] public byte[]? Key { get; set; }
}
