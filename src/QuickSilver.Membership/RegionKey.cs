namespace QuickSilver.Membership;

/// <summary>
/// What makes nodes share a region: the exact set of groups they belong to (a region of overlap, QSM §1.3), or a
/// region name a designer pinned them to. Immutable, with its hash computed once.
/// </summary>
internal sealed class RegionKey : IEquatable<RegionKey>
{
    private readonly uint[] _groups;
    private readonly int _hash;

    private RegionKey(string? pinned, uint[] groups)
    {
        Pinned = pinned;
        _groups = groups;
        var hash = new HashCode();
        hash.Add(pinned, StringComparer.Ordinal);
        foreach (uint g in groups)
        {
            hash.Add(g);
        }

        _hash = hash.ToHashCode();
    }

    public string? Pinned { get; }

    public static RegionKey ForGroups(IReadOnlyCollection<GroupId> groups)
    {
        var ids = new uint[groups.Count];
        int i = 0;
        foreach (var g in groups)
        {
            ids[i++] = g.Value;
        }

        Array.Sort(ids);
        return new RegionKey(null, ids);
    }

    public static RegionKey ForPinned(string name) => new(name, []);

    public bool Equals(RegionKey? other)
        => other is not null && _hash == other._hash && string.Equals(Pinned, other.Pinned, StringComparison.Ordinal)
           && _groups.AsSpan().SequenceEqual(other._groups);

    public override bool Equals(object? obj) => Equals(obj as RegionKey);

    public override int GetHashCode() => _hash;
}
