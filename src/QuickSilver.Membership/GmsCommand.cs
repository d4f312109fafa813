using MessagePack;

namespace QuickSilver.Membership;

/// <summary>What one <see cref="GmsOp"/> does to the replicated GMS state (<see cref="GmsStateMachine"/>).</summary>
internal enum GmsOpKind : byte
{
    /// <summary>A leader takes over: <see cref="GmsOp.Number"/> is the epoch it proposes (adopted only by a state that
    /// has none yet, so the epoch is fixed once for the life of the replicated GMS) and <see cref="GmsOp.Node"/> the
    /// proposing replica's id, so that replica knows when everything committed before its term has been applied.</summary>
    Start = 1,

    /// <summary>A node at <see cref="GmsOp.Ip"/>:<see cref="GmsOp.Port"/> with incarnation <see cref="GmsOp.Number"/>
    /// registers (pinned to region <see cref="GmsOp.Text"/> if not null). The same address with another incarnation
    /// replaces the node registered there (it restarted); with the same incarnation it is a no-op.</summary>
    Register = 2,

    /// <summary>Node <see cref="GmsOp.Node"/> joins the group named <see cref="GmsOp.Text"/>.</summary>
    Join = 3,

    /// <summary>Node <see cref="GmsOp.Node"/> leaves the group named <see cref="GmsOp.Text"/>.</summary>
    Leave = 4,

    /// <summary>Node <see cref="GmsOp.Node"/> is gone (failed, silent, or said goodbye).</summary>
    Down = 5,

    /// <summary>Node <see cref="GmsOp.Node"/> asks for a new key for region <see cref="GmsOp.Number"/> (it sealed its
    /// limit of datagrams under the current one): the region gets a new view, same members, new key.</summary>
    Rekey = 6,

    /// <summary>Region ids from now on start at <see cref="GmsOp.Number"/> at least (a restarted GMS numbers its regions
    /// above every region id its old members still know, so no node confuses a new region with an old one:
    /// docs/membership.md, "A restarted GMS"). Never lowers the next id.</summary>
    RegionFloor = 7,
}

/// <summary>One operation of a <see cref="GmsCommand"/>. Fields that its kind does not use are zero or null.</summary>
[MessagePackObject]
internal sealed record GmsOp
{
    [Key(0)] public GmsOpKind Kind { get; init; }
    [Key(1)] public uint Node { get; init; }
    [Key(2)] public uint Ip { get; init; }
    [Key(3)] public ushort Port { get; init; }
    [Key(4)] public ulong Number { get; init; }
    [Key(5)] public string? Text { get; init; }

    public static GmsOp Start(uint replica, ulong epoch) => new() { Kind = GmsOpKind.Start, Node = replica, Number = epoch };

    public static GmsOp Register(Core.Io.NetAddress address, ulong incarnation, string? pinned)
        => new() { Kind = GmsOpKind.Register, Ip = address.Ip, Port = address.Port, Number = incarnation, Text = pinned };

    public static GmsOp Join(NodeId node, string group) => new() { Kind = GmsOpKind.Join, Node = node.Value, Text = group };

    public static GmsOp Leave(NodeId node, string group) => new() { Kind = GmsOpKind.Leave, Node = node.Value, Text = group };

    public static GmsOp Down(NodeId node) => new() { Kind = GmsOpKind.Down, Node = node.Value };

    public static GmsOp Rekey(NodeId node, RegionId region) => new() { Kind = GmsOpKind.Rekey, Node = node.Value, Number = region.Value };

    public static GmsOp RegionFloor(uint firstRegion) => new() { Kind = GmsOpKind.RegionFloor, Number = firstRegion };
}

/// <summary>
/// One entry of the replicated GMS log: the operations of one batch, applied together by
/// <see cref="GmsStateMachine.Apply"/> (registrations first, in order, then the joins, leaves and failures as one
/// <see cref="MembershipState.Apply"/> batch). MessagePack: <c>[version, [op…], keySeed]</c>, each op
/// <c>[kind, node, ip, port, number, text]</c>; <c>keySeed</c> is 32 random bytes the leader drew for the batch when
/// datagram security is on (every new region view's key is derived from it), nil otherwise.
/// </summary>
[MessagePackObject]
internal sealed class GmsCommand
{
    public const byte CurrentVersion = 1;

    [Key(0)] public byte Version { get; set; } = CurrentVersion;
    [Key(1)] public GmsOp[] Ops { get; set; } = [];

    /// <summary>The batch's key seed (<see cref="MembershipState.KeySeedBytes"/> random bytes), or null: no keys.</summary>
    [Key(2)] public byte[]? KeySeed { get; set; }
}

/// <summary>A replica's snapshot: the epoch, each registered node's incarnation (node id, incarnation pairs) and the
/// membership state.</summary>
[MessagePackObject]
internal sealed class GmsStateSnapshot
{
    [Key(0)] public byte Version { get; set; } = GmsCommand.CurrentVersion;
    [Key(1)] public ulong Epoch { get; set; }
    [Key(2)] public ulong[] Incarnations { get; set; } = [];
    [Key(3)] public MembershipSnapshot Membership { get; set; } = new();
    [Key(4)] public long CommandsApplied { get; set; }
}
