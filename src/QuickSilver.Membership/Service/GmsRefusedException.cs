namespace QuickSilver.Membership.Service;

/// <summary>Which of the GMS's limits (<see cref="GmsOptions"/>) a node's request ran into (docs/security.md).</summary>
public enum GmsRefusal
{
    /// <summary>The GMS has <see cref="GmsOptions.MaxNodes"/> nodes registered.</summary>
    TooManyNodes = 1,

    /// <summary>The GMS has <see cref="GmsOptions.MaxNodesPerIp"/> nodes registered from the node's IP address.</summary>
    TooManyNodesFromAddress = 2,

    /// <summary>The node is in (or has asked to join) <see cref="GmsOptions.MaxGroupsPerNode"/> groups.</summary>
    TooManyGroups = 3,

    /// <summary>The group's name is longer than <see cref="GmsOptions.MaxGroupNameBytes"/> UTF-8 bytes.</summary>
    GroupNameTooLong = 4,

    /// <summary>The node asked more than <see cref="GmsOptions.MaxRequestsPerSecond"/> per second, beyond a burst of
    /// <see cref="GmsOptions.RequestBurst"/>: the request was not applied; asking again later may succeed.</summary>
    RateLimited = 5,
}

/// <summary>
/// The GMS refused a request of this node: to register (from <c>QuickSilverNode.StartAsync</c>) or to join a group
/// (from <c>QuickSilverNode.JoinGroupAsync</c>). <see cref="Reason"/> names the limit, <see cref="Limit"/> its value on
/// the GMS.
/// </summary>
public sealed class GmsRefusedException : Exception
{
    public GmsRefusedException()
    {
    }

    public GmsRefusedException(string message)
        : base(message)
    {
    }

    public GmsRefusedException(string message, Exception innerException)
        : base(message, innerException)
    {
    }

    public GmsRefusedException(GmsRefusal reason, string? groupName, long limit)
        : base(Describe(reason, groupName, limit))
    {
        Reason = reason;
        GroupName = groupName;
        Limit = limit;
    }

    public GmsRefusal Reason { get; }

    /// <summary>The group a refused join named; null when registration was refused.</summary>
    public string? GroupName { get; }

    /// <summary>The value of the limit on the GMS.</summary>
    public long Limit { get; }

    private static string Describe(GmsRefusal reason, string? groupName, long limit)
    {
        string what = groupName is null ? "register this node" : $"let this node join group '{Shorten(groupName)}'";
        string why = reason switch
        {
            GmsRefusal.TooManyNodes => $"it has {limit} nodes registered, its limit (GmsOptions.MaxNodes)",
            GmsRefusal.TooManyNodesFromAddress => $"it has {limit} nodes registered from this node's IP address, its limit (GmsOptions.MaxNodesPerIp)",
            GmsRefusal.TooManyGroups => $"the node is in {limit} groups, the limit per node (GmsOptions.MaxGroupsPerNode)",
            GmsRefusal.GroupNameTooLong => $"the name is longer than {limit} UTF-8 bytes (GmsOptions.MaxGroupNameBytes)",
            GmsRefusal.RateLimited => $"the node asked more than {limit} times per second (GmsOptions.MaxRequestsPerSecond); try again later",
            _ => $"reason {(int)reason}",
        };
        return $"The GMS refused to {what}: {why}.";
    }

    private static string Shorten(string name) => name.Length <= 64 ? name : string.Concat(name.AsSpan(0, 64), "…");
}
