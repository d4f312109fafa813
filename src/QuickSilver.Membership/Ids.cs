namespace QuickSilver.Membership;

/// <summary>A node, numbered by the GMS when it registers. Never reused within one GMS incarnation.</summary>
public readonly record struct NodeId(uint Value)
{
    public override string ToString() => $"n{Value}";
}

/// <summary>A group (topic), numbered by the GMS the first time any node joins its name.</summary>
public readonly record struct GroupId(uint Value)
{
    public override string ToString() => $"g{Value}";
}

/// <summary>A region of overlap, numbered by the GMS when it first appears. Never reused.</summary>
public readonly record struct RegionId(uint Value)
{
    public override string ToString() => $"r{Value}";
}
