namespace QuickSilver.Membership;

/// <summary>What the GMS batches (QSM §2.1): client joins and leaves, and failures from the failure detector.</summary>
internal abstract record MembershipRequest(NodeId Node);

/// <summary>The node joins the group named <paramref name="GroupName"/> (created on first join).</summary>
internal sealed record JoinRequest(NodeId Node, string GroupName) : MembershipRequest(Node);

/// <summary>The node leaves the group (a no-op if it is not a member).</summary>
internal sealed record LeaveRequest(NodeId Node, string GroupName) : MembershipRequest(Node);

/// <summary>The node crashed or left the system: it is removed from every group and region.</summary>
internal sealed record NodeDownRequest(NodeId Node) : MembershipRequest(Node);

/// <summary>The node asks for a new key for <paramref name="Region"/> (it sealed its limit of datagrams under the current
/// one): the region gets a new view with the same members and a new key. Taken only from a member of the region or a
/// member of a group mapped to it.</summary>
internal sealed record RekeyRequest(NodeId Node, RegionId Region) : MembershipRequest(Node);
