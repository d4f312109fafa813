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

    /// <summary>The highest first region id a <see cref="RaiseNextRegion"/> may set (2^30): a forged floor cannot use up
    /// the id space.</summary>
    public const uint MaxRegionFloor = 1u << 30;

    /// <summary>New regions get ids from <paramref name="first"/> on, if that is above the next id (a restarted GMS:
    /// <c>GmsOpKind.RegionFloor</c>).</summary>
    public void RaiseNextRegion(uint first) => _nextRegion = Math.Max(_nextRegion, Math.Min(first, MaxRegionFloor));

    /// <summary>The id the next new region gets.</summary>
    public uint NextRegion => _nextRegion;
    private uint _nextKeyId = 1;

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

    /// <summary>Node ids handed out so far (ids are never reused: a renumbered node would show here).</summary>
    public long IdsIssued => _nextNode - 1;

    public int GroupCount => _groups.Count;

    public int RegionCount => _regions.Count;

    public IEnumerable<RegionView> RegionViews => _regions.Values.Select(r => r.View!);

    public IEnumerable<GroupView> GroupViews => _groups.Values.Select(g => g.View!);

    /// <summary>Adds a live node with no groups. It belongs to no region until it joins a group.</summary>
    public NodeId RegisterNode(NetAddress address) => RegisterNode(address, _pin(address));

    /// <summary>Adds a live node pinned to the region named <paramref name="pinnedRegion"/> (null: its region of overlap).
    /// The pin is part of the node's state, so a replica that applies the same registrations places nodes alike.</summary>
    public NodeId RegisterNode(NetAddress address, string? pinnedRegion)
    {
        var id = new NodeId(_nextNode++);
        _nodes.Add(id, new NodeState(id, address) { Pinned = pinnedRegion });
        return id;
    }

    /// <summary>The region name the designer's pin function gives <paramref name="address"/>, or null.</summary>
    public string? PinOf(NetAddress address) => _pin(address);

    public bool IsAlive(NodeId node) => _nodes.ContainsKey(node);

    public NetAddress AddressOf(NodeId node) => _nodes[node].Address;

    public GroupView? FindGroup(string name) => _groupsByName.TryGetValue(name, out var g) ? g.View : null;

    public GroupView GroupViewOf(GroupId group) => _groups[group].View!;

    public RegionView RegionViewOf(RegionId region) => _regions[region].View!;

    /// <summary>The region the node is in, if it is in any group.</summary>
    public RegionId? RegionOf(NodeId node) => _nodes.TryGetValue(node, out var n) ? n.Region?.Id : null;

    public IReadOnlyCollection<GroupId> GroupsOf(NodeId node) => _nodes[node].Groups;

    /// <summary>Applies one batch of requests. Requests naming unknown (or already removed) nodes are ignored. With
    /// <paramref name="keySeed"/> (32 random bytes the GMS leader drew for this batch, carried in its log command) every
    /// new region view gets a key derived from it (<see cref="DeriveRegionKey"/>), numbered by a counter of this state,
    /// so every replica that applies the same command derives the same keys; without it, views carry no key.</summary>
    public MembershipChange Apply(IReadOnlyList<MembershipRequest> batch, ReadOnlySpan<byte> keySeed = default)
    {
        ArgumentNullException.ThrowIfNull(batch);
        if (!keySeed.IsEmpty && keySeed.Length < KeySeedBytes)
        {
            throw new ArgumentException($"A key seed is at least {KeySeedBytes} bytes, got {keySeed.Length}.", nameof(keySeed));
        }

        var touchedNodes = new HashSet<NodeState>();
        var changedGroups = new HashSet<GroupState>();
        var changedRegions = new HashSet<RegionState>();
        var leftGroups = new Dictionary<NodeId, List<GroupId>>();
        var downNodes = new List<NodeState>();
        var rekeyed = new List<RegionState>();

        // 1. Group membership, and each touched node's old region remembered before any move.
        var oldRegion = new Dictionary<NodeState, RegionState?>();
        foreach (var request in batch)
        {
            if (!_nodes.TryGetValue(request.Node, out var node))
            {
                continue;
            }

            if (request is RekeyRequest rekey)
            {
                if (_regions.TryGetValue(rekey.Region, out var keyed) && (node.Region == keyed || node.Groups.Any(g => keyed.GroupCounts.ContainsKey(g))))
                {
                    rekeyed.Add(keyed);
                }

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

        // 2. Move touched nodes between regions; keep per-region and per-group counts in step. In node-id order: new
        // regions are numbered and given pool addresses in this loop, and every replica must number them alike.
        foreach (var node in touchedNodes.OrderBy(n => n.Id.Value))
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

        // 3. New region views; empty regions end and free their multicast address. In region-id order: keys are numbered
        // in this loop, and every replica must number them alike.
        foreach (var region in rekeyed)
        {
            if (_regions.ContainsKey(region.Id))
            {
                changedRegions.Add(region);
            }
        }

        var newRegionViews = ImmutableArray.CreateBuilder<RegionView>();
        var endedRegions = ImmutableArray.CreateBuilder<RegionId>();
        foreach (var region in changedRegions.OrderBy(r => r.Id.Value))
        {
            if (region.Members.Count == 0)
            {
                EndRegion(region);
                endedRegions.Add(region.Id);
                continue;
            }

            uint viewNumber = (region.View?.ViewNumber ?? 0) + 1;
            region.View = new RegionView(region.Id, viewNumber,
                [.. region.Members.Select(n => new ViewMember(n.Id, n.Address))], region.MulticastAddress)
            {
                Key = keySeed.IsEmpty ? null : DeriveRegionKey(keySeed, NextKeyId(), region.Id, viewNumber),
            };
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

    /// <summary>Bytes of the random seed a batch's keys are derived from.</summary>
    public const int KeySeedBytes = 32;

    /// <summary>A region view's key: HKDF-SHA256 (RFC 5869) of the batch's seed with the key id, region and view number
    /// in the info, so each key of a batch is independent of the others and of the seed (a node is sent only its keys).</summary>
    public static RegionViewKey DeriveRegionKey(ReadOnlySpan<byte> seed, uint keyId, RegionId region, uint viewNumber)
    {
        Span<byte> info = stackalloc byte[24 + 12];
        "QuickSilver region key 1"u8.CopyTo(info);
        System.Buffers.Binary.BinaryPrimitives.WriteUInt32LittleEndian(info[24..], keyId);
        System.Buffers.Binary.BinaryPrimitives.WriteUInt32LittleEndian(info[28..], region.Value);
        System.Buffers.Binary.BinaryPrimitives.WriteUInt32LittleEndian(info[32..], viewNumber);
        var key = new byte[32];
        System.Security.Cryptography.HKDF.DeriveKey(System.Security.Cryptography.HashAlgorithmName.SHA256, seed, key, ReadOnlySpan<byte>.Empty, info);
        return new RegionViewKey(keyId, ImmutableArray.Create(key));
    }

    /// <summary>The next key id: never 0 (the cluster key's), wrapping after 2^32 - 1.</summary>
    private uint NextKeyId()
    {
        uint id = _nextKeyId++;
        if (_nextKeyId == 0)
        {
            _nextKeyId = 1;
        }

        return id;
    }

    private static RegionKey RegionKeyFor(NodeState node)
        => node.Pinned is { } pinned ? RegionKey.ForPinned(pinned) : RegionKey.ForGroups(node.Groups);

    /// <summary>
    /// The whole state as plain numbers, in a canonical order (nodes, groups and regions by id), so two equal states
    /// export equal bytes. Views are not stored: after every batch each region's view lists its current members and
    /// each group's view its current regions, so only their numbers are needed to rebuild them.
    /// </summary>
    public MembershipSnapshot Export() => new()
    {
        NextNode = _nextNode,
        NextGroup = _nextGroup,
        NextRegion = _nextRegion,
        NextKeyId = _nextKeyId,
        Nodes = [.. _nodes.Values.OrderBy(n => n.Id.Value).Select(n => new SnapshotNode
        {
            Id = n.Id.Value,
            Ip = n.Address.Ip,
            Port = n.Address.Port,
            Pinned = n.Pinned,
            Region = n.Region?.Id.Value ?? 0,
            Groups = [.. n.Groups.Select(g => g.Value).Order()],
        })],
        Groups = [.. _groups.Values.OrderBy(g => g.Id.Value).Select(g => new SnapshotGroup { Id = g.Id.Value, Name = g.Name, ViewNumber = g.View!.ViewNumber })],
        Regions = [.. _regions.Values.OrderBy(r => r.Id.Value).Select(r => new SnapshotRegion
        {
            Id = r.Id.Value,
            ViewNumber = r.View!.ViewNumber,
            MulticastIp = r.MulticastAddress?.Ip ?? 0,
            MulticastPort = r.MulticastAddress?.Port ?? 0,
            KeyId = r.View.Key?.Id ?? 0,
            Key = r.View.Key is { } key ? [.. key.Material] : null,
        })],
    };

    /// <summary>Loads <paramref name="snapshot"/> into this state, which must be new (nothing registered, nothing
    /// applied). Throws <see cref="InvalidDataException"/> when the snapshot is inconsistent.</summary>
    public void Import(MembershipSnapshot snapshot)
    {
        ArgumentNullException.ThrowIfNull(snapshot);
        if (_nodes.Count > 0 || _groups.Count > 0 || _nextNode != 1)
        {
            throw new InvalidOperationException("A snapshot can only be loaded into a new membership state.");
        }

        _nextNode = snapshot.NextNode;
        _nextGroup = snapshot.NextGroup;
        _nextRegion = snapshot.NextRegion;
        _nextKeyId = Math.Max(1, snapshot.NextKeyId);
        foreach (var g in snapshot.Groups ?? [])
        {
            var group = new GroupState(new GroupId(g.Id), g.Name ?? throw new InvalidDataException("A snapshot group has no name."));
            _groups.Add(group.Id, group);
            _groupsByName.Add(group.Name, group);
        }

        var regionNumbers = new Dictionary<RegionId, SnapshotRegion>();
        foreach (var r in snapshot.Regions ?? [])
        {
            regionNumbers.Add(new RegionId(r.Id), r);
        }

        foreach (var n in snapshot.Nodes ?? [])
        {
            var node = new NodeState(new NodeId(n.Id), new NetAddress(n.Ip, n.Port)) { Pinned = n.Pinned };
            _nodes.Add(node.Id, node);
            foreach (uint gid in n.Groups ?? [])
            {
                var group = _groups.GetValueOrDefault(new GroupId(gid)) ?? throw new InvalidDataException($"Snapshot node {node.Id} is in unknown group g{gid}.");
                node.Groups.Add(group.Id);
                group.Members.Add(node.Id);
            }

            node.RegionGroups = [.. node.Groups];
            if (n.Region == 0)
            {
                continue;
            }

            var rid = new RegionId(n.Region);
            if (!_regions.TryGetValue(rid, out var region))
            {
                var r = regionNumbers.GetValueOrDefault(rid) ?? throw new InvalidDataException($"Snapshot node {node.Id} is in unknown region {rid}.");
                NetAddress? multicast = r.MulticastIp == 0 ? null : new NetAddress(r.MulticastIp, r.MulticastPort);
                if (multicast is { } taken && !_pool.Take(taken))
                {
                    throw new InvalidDataException($"Snapshot region {rid} has multicast address {taken}, outside the pool or taken twice.");
                }

                region = new RegionState(rid, RegionKeyFor(node), multicast);
                _regions.Add(rid, region);
                _regionsByKey.Add(region.Key, region);
            }

            region.Members.Add(node);
            node.Region = region;
            foreach (var gid in node.Groups)
            {
                Increment(region, _groups[gid]);
            }
        }

        foreach (var region in _regions.Values)
        {
            var r = regionNumbers[region.Id];
            if (r.Key is { } material && (material.Length != 32 || r.KeyId == 0))
            {
                throw new InvalidDataException($"Snapshot region {region.Id} has a malformed key.");
            }

            region.View = new RegionView(region.Id, r.ViewNumber,
                [.. region.Members.Select(n => new ViewMember(n.Id, n.Address))], region.MulticastAddress)
            {
                Key = r.Key is { } bytes ? new RegionViewKey(r.KeyId, ImmutableArray.Create(bytes)) : null,
            };
        }

        foreach (var g in snapshot.Groups ?? [])
        {
            var group = _groups[new GroupId(g.Id)];
            group.View = new GroupView(group.Id, group.Name, g.ViewNumber,
                [.. group.RegionCounts.Keys.OrderBy(r => r.Value).Select(r => new RegionRef(r, _regions[r].View!.ViewNumber))]);
        }
    }

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

        /// <summary>The region a designer pinned this node to (null: its region of overlap), fixed at registration.</summary>
        public string? Pinned { get; init; }

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
