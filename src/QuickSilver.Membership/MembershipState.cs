using System.Collections.Immutable;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership;

/// <summary>
/// The state of the two-level GMS (QSM §2.1): nodes, groups, regions of overlap and their immutable, numbered views.
/// <see cref="Apply"/> takes one batch of requests and returns the new views plus each affected node's incremental
/// update. Work is proportional to what the batch touches (the nodes it names, their groups, and the groups that map to
/// regions whose membership changed), so a node joining or crashing out of 10,000 groups is one pass over those groups.
/// Single-threaded and I/O-free.
/// </summary>
internal sealed class MembershipState
{
    private readonly Dictionary<NodeId, NodeState> _nodes = new();
    private readonly Dictionary<string, GroupState> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<GroupId, GroupState> _groups = new();
    private readonly Dictionary<RegionKey, RegionState> _regionsByKey = new();
    private readonly Dictionary<RegionId, RegionState> _regions = new();
    private readonly MulticastAddressPool _pool;
    private readonly bool _useMulticast;
    private readonly Func<NetAddress, string?> _pin;
    private uint _nextNode = 1;
    private uint _nextGroup = 1;
    private uint _nextRegion = 1;

    /// <param name="pool">Multicast addresses for regions.</param>
    /// <param name="pinRegion">Designer override (QSM §1.3): returns a region name for a node to place it in that region
    /// whatever its groups, or null to use the node's region of overlap.</param>
    /// <param name="useMulticast">False where IP multicast is unavailable: no region gets an address, so every region
    /// uses unicast fan-out with the same recovery protocol.</param>
    public MembershipState(MulticastAddressPool pool, Func<NetAddress, string?>? pinRegion = null, bool useMulticast = true)
    {
        _useMulticast = useMulticast;
        _pool = pool ?? throw new ArgumentNullException(nameof(pool));
        _pin = pinRegion ?? (_ => null);
    }

    public int NodeCount => _nodes.Count;

    public int GroupCount => _groups.Count;

    public int RegionCount => _regions.Count;

    public IEnumerable<RegionView> RegionViews => _regions.Values.Select(r => r.View!);

    public IEnumerable<GroupView> GroupViews => _groups.Values.Select(g => g.View!);

    /// <summary>Adds a live node with no groups. It belongs to no region until it joins a group.</summary>
    public NodeId RegisterNode(NetAddress address)
    {
        var id = new NodeId(_nextNode++);
        _nodes.Add(id, new NodeState(id, address));
        return id;
    }

    public bool IsAlive(NodeId node) => _nodes.ContainsKey(node);

    public NetAddress AddressOf(NodeId node) => _nodes[node].Address;

    public GroupView? FindGroup(string name) => _groupsByName.TryGetValue(name, out var g) ? g.View : null;

    public GroupView GroupViewOf(GroupId group) => _groups[group].View!;

    public RegionView RegionViewOf(RegionId region) => _regions[region].View!;

    /// <summary>The region the node is in, if it is in any group.</summary>
    public RegionId? RegionOf(NodeId node) => _nodes.TryGetValue(node, out var n) ? n.Region?.Id : null;

    public IReadOnlyCollection<GroupId> GroupsOf(NodeId node) => _nodes[node].Groups;

    /// <summary>Applies one batch of requests. Requests naming unknown (or already removed) nodes are ignored.</summary>
    public MembershipChange Apply(IReadOnlyList<MembershipRequest> batch)
    {
        ArgumentNullException.ThrowIfNull(batch);
        var touchedNodes = new HashSet<NodeState>();
        var changedGroups = new HashSet<GroupState>();
        var changedRegions = new HashSet<RegionState>();
        var leftGroups = new Dictionary<NodeId, List<GroupId>>();
        var downNodes = new List<NodeState>();

        // 1. Group membership, and each touched node's old region remembered before any move.
        var oldRegion = new Dictionary<NodeState, RegionState?>();
        foreach (var request in batch)
        {
            if (!_nodes.TryGetValue(request.Node, out var node))
            {
                continue;
            }

            if (!oldRegion.ContainsKey(node))
            {
                oldRegion[node] = node.Region;
            }

            switch (request)
            {
                case JoinRequest join:
                    var group = GetOrCreateGroup(join.GroupName);
                    if (node.Groups.Add(group.Id))
                    {
                        group.Members.Add(node.Id);
                        changedGroups.Add(group);
                        touchedNodes.Add(node);
                    }

                    break;
                case LeaveRequest leave:
                    if (_groupsByName.TryGetValue(leave.GroupName, out var left) && node.Groups.Remove(left.Id))
                    {
                        left.Members.Remove(node.Id);
                        changedGroups.Add(left);
                        touchedNodes.Add(node);
                        Add(leftGroups, node.Id, left.Id);
                    }

                    break;
                case NodeDownRequest:
                    foreach (var gid in node.Groups)
                    {
                        var g = _groups[gid];
                        g.Members.Remove(node.Id);
                        changedGroups.Add(g);
                    }

                    node.Groups.Clear();
                    touchedNodes.Add(node);
                    downNodes.Add(node);
                    _nodes.Remove(node.Id);
                    break;
                default:
                    throw new ArgumentException($"Unknown membership request {request.GetType().Name}.", nameof(batch));
            }
        }

        // 2. Move touched nodes between regions; keep per-region and per-group counts in step.
        foreach (var node in touchedNodes)
        {
            var from = oldRegion[node];
            bool alive = _nodes.ContainsKey(node.Id);
            RegionState? to = alive && node.Groups.Count > 0 ? GetOrCreateRegion(RegionKeyFor(node)) : null;

            // Per-(group, region) counts: remove the node's old groups from the old region, add its new ones to the new.
            if (from is not null)
            {
                foreach (var gid in node.RegionGroups)
                {
                    Decrement(from, _groups[gid]);
                }

                if (from != to)
                {
                    from.Members.Remove(node);
                    changedRegions.Add(from);
                }
            }

            if (to is not null)
            {
                foreach (var gid in node.Groups)
                {
                    Increment(to, _groups[gid]);
                }

                if (from != to)
                {
                    to.Members.Add(node);
                    changedRegions.Add(to);
                }
            }

            node.Region = to;
            node.RegionGroups = [.. node.Groups];
        }

        // 3. New region views; empty regions end and free their multicast address.
        var newRegionViews = ImmutableArray.CreateBuilder<RegionView>();
        var endedRegions = ImmutableArray.CreateBuilder<RegionId>();
        foreach (var region in changedRegions)
        {
            if (region.Members.Count == 0)
            {
                EndRegion(region);
                endedRegions.Add(region.Id);
                continue;
            }

            region.View = new RegionView(region.Id, (region.View?.ViewNumber ?? 0) + 1,
                [.. region.Members.Select(n => new ViewMember(n.Id, n.Address))], region.MulticastAddress);
            newRegionViews.Add(region.View);

            // Every group mapping to a changed region gets a new view (its region view reference changed).
            foreach (var gid in region.GroupCounts.Keys)
            {
                changedGroups.Add(_groups[gid]);
            }
        }

        // 4. New group views; groups with no member end.
        var newGroupViews = ImmutableArray.CreateBuilder<GroupView>();
        var endedGroups = ImmutableArray.CreateBuilder<GroupId>();
        foreach (var group in changedGroups)
        {
            if (group.Members.Count == 0)
            {
                _groups.Remove(group.Id);
                _groupsByName.Remove(group.Name);
                endedGroups.Add(group.Id);
                continue;
            }

            var refs = ImmutableArray.CreateBuilder<RegionRef>(group.RegionCounts.Count);
            foreach (var rid in group.RegionCounts.Keys.OrderBy(r => r.Value))
            {
                refs.Add(new RegionRef(rid, _regions[rid].View!.ViewNumber));
            }

            group.View = new GroupView(group.Id, group.Name, (group.View?.ViewNumber ?? 0) + 1, refs.MoveToImmutable());
            newGroupViews.Add(group.View);
        }

        var updates = BuildUpdates(newGroupViews, newRegionViews, leftGroups, touchedNodes);
        return new MembershipChange(newRegionViews.ToImmutable(), newGroupViews.ToImmutable(), endedRegions.ToImmutable(),
            endedGroups.ToImmutable(), updates);
    }

    /// <summary>Each live node gets: the new views of its groups, the new views of regions those groups map to, the
    /// new view of its own region, and the groups it left. A node whose groups changed in this batch also gets the
    /// current (possibly unchanged) view of every region its groups map to: it may never have been sent them.</summary>
    private ImmutableDictionary<NodeId, NodeUpdate> BuildUpdates(
        ImmutableArray<GroupView>.Builder newGroupViews, ImmutableArray<RegionView>.Builder newRegionViews,
        Dictionary<NodeId, List<GroupId>> leftGroups, HashSet<NodeState> touchedNodes)
    {
        var newRegionById = new Dictionary<RegionId, RegionView>();
        foreach (var rv in newRegionViews)
        {
            newRegionById[rv.Region] = rv;
        }

        var groupsFor = new Dictionary<NodeId, List<GroupView>>();
        var regionsFor = new Dictionary<NodeId, HashSet<RegionView>>();
        foreach (var gv in newGroupViews)
        {
            var members = _groups[gv.Group].Members;
            foreach (var node in members)
            {
                Add(groupsFor, node, gv);
                foreach (var rr in gv.Regions)
                {
                    if (newRegionById.TryGetValue(rr.Region, out var rv))
                    {
                        AddToSet(regionsFor, node, rv);
                    }
                }
            }
        }

        foreach (var rv in newRegionViews)
        {
            foreach (var m in rv.Members)
            {
                AddToSet(regionsFor, m.Node, rv);
            }
        }

        foreach (var node in touchedNodes)
        {
            if (!_nodes.ContainsKey(node.Id))
            {
                continue;
            }

            foreach (var gid in node.Groups)
            {
                foreach (var rr in _groups[gid].View!.Regions)
                {
                    AddToSet(regionsFor, node.Id, _regions[rr.Region].View!);
                }
            }
        }

        var builder = ImmutableDictionary.CreateBuilder<NodeId, NodeUpdate>();
        foreach (var node in groupsFor.Keys.Concat(regionsFor.Keys).Concat(leftGroups.Keys).Distinct())
        {
            if (!_nodes.ContainsKey(node))
            {
                continue;
            }

            builder[node] = new NodeUpdate(node,
                groupsFor.TryGetValue(node, out var gs) ? [.. gs] : [],
                regionsFor.TryGetValue(node, out var rs) ? [.. rs.OrderBy(r => r.Region.Value)] : [],
                leftGroups.TryGetValue(node, out var ls) ? [.. ls] : []);
        }

        return builder.ToImmutable();
    }

    private RegionKey RegionKeyFor(NodeState node)
        => _pin(node.Address) is { } pinned ? RegionKey.ForPinned(pinned) : RegionKey.ForGroups(node.Groups);

    private GroupState GetOrCreateGroup(string name)
    {
        if (string.IsNullOrEmpty(name))
        {
            throw new ArgumentException("A group name must not be empty.", nameof(name));
        }

        if (!_groupsByName.TryGetValue(name, out var group))
        {
            group = new GroupState(new GroupId(_nextGroup++), name);
            _groupsByName.Add(name, group);
            _groups.Add(group.Id, group);
        }

        return group;
    }

    private RegionState GetOrCreateRegion(RegionKey key)
    {
        if (!_regionsByKey.TryGetValue(key, out var region))
        {
            NetAddress address = default;
            if (_useMulticast)
            {
                _pool.TryAllocate(out address);
            }

            region = new RegionState(new RegionId(_nextRegion++), key, address.IsMulticast ? address : null);
            _regionsByKey.Add(key, region);
            _regions.Add(region.Id, region);
        }

        return region;
    }

    private void EndRegion(RegionState region)
    {
        _regionsByKey.Remove(region.Key);
        _regions.Remove(region.Id);
        if (region.MulticastAddress is { } address)
        {
            _pool.Release(address);
        }
    }

    private static void Increment(RegionState region, GroupState group)
    {
        region.GroupCounts[group.Id] = region.GroupCounts.GetValueOrDefault(group.Id) + 1;
        group.RegionCounts[region.Id] = group.RegionCounts.GetValueOrDefault(region.Id) + 1;
    }

    private static void Decrement(RegionState region, GroupState group)
    {
        if (--region.GroupCounts[group.Id] == 0)
        {
            region.GroupCounts.Remove(group.Id);
        }

        if (--group.RegionCounts[region.Id] == 0)
        {
            group.RegionCounts.Remove(region.Id);
        }
    }

    private static void Add<TKey, TValue>(Dictionary<TKey, List<TValue>> map, TKey key, TValue value) where TKey : notnull
    {
        if (!map.TryGetValue(key, out var list))
        {
            map[key] = list = new List<TValue>();
        }

        list.Add(value);
    }

    private static void AddToSet<TKey, TValue>(Dictionary<TKey, HashSet<TValue>> map, TKey key, TValue value) where TKey : notnull
    {
        if (!map.TryGetValue(key, out var set))
        {
            map[key] = set = new HashSet<TValue>();
        }

        set.Add(value);
    }

    private sealed class NodeState(NodeId id, NetAddress address)
    {
        public NodeId Id { get; } = id;
        public NetAddress Address { get; } = address;
        public HashSet<GroupId> Groups { get; } = new();

        /// <summary>The groups counted in <see cref="Region"/>'s per-group counts (the node's groups when it last moved).</summary>
        public GroupId[] RegionGroups { get; set; } = [];

        public RegionState? Region { get; set; }
    }

    private sealed class GroupState(GroupId id, string name)
    {
        public GroupId Id { get; } = id;
        public string Name { get; } = name;
        public HashSet<NodeId> Members { get; } = new();
        public Dictionary<RegionId, int> RegionCounts { get; } = new();
        public GroupView? View { get; set; }
    }

    private sealed class RegionState(RegionId id, RegionKey key, NetAddress? multicastAddress)
    {
        public RegionId Id { get; } = id;
        public RegionKey Key { get; } = key;
        public NetAddress? MulticastAddress { get; } = multicastAddress;
        public SortedSet<NodeState> Members { get; } = new(NodeOrder.Instance);
        public Dictionary<GroupId, int> GroupCounts { get; } = new();
        public RegionView? View { get; set; }
    }

    /// <summary>Region members in ascending address order (QSM §2.3.2: the smallest address leads its partition).</summary>
    private sealed class NodeOrder : IComparer<NodeState>
    {
        public static readonly NodeOrder Instance = new();

        public int Compare(NodeState? x, NodeState? y)
        {
            int c = x!.Address.Ip.CompareTo(y!.Address.Ip);
            if (c == 0)
            {
                c = x.Address.Port.CompareTo(y.Address.Port);
            }

            return c != 0 ? c : x.Id.Value.CompareTo(y.Id.Value);
        }
    }
}
