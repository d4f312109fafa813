using QuickSilver.Core.Io;
using QuickSilver.Membership;

namespace QuickSilver.Membership.Tests;

public sealed class MembershipStateTests
{
    private static readonly NetAddress PoolStart = new(0xEFFF0100u, 9000);

    private static MembershipState NewState(int poolSize = 64, Func<NetAddress, string?>? pin = null)
        => new(new MulticastAddressPool(PoolStart, poolSize), pin);

    private static NodeId[] Register(MembershipState state, int count)
        => Enumerable.Range(0, count).Select(i => state.RegisterNode(NetAddress.Loopback((ushort)(10000 + i)))).ToArray();

    [Theory]
    [InlineData(1)]
    [InlineData(4)]
    [InlineData(16)]
    [InlineData(64)]
    [InlineData(256)]
    public void Fully_overlapping_groups_map_to_exactly_one_region(int groups)
    {
        var state = NewState();
        var nodes = Register(state, 5);
        var batch = nodes.SelectMany(n => Enumerable.Range(0, groups).Select(g => (MembershipRequest)new JoinRequest(n, $"topic/{g}"))).ToList();
        var change = state.Apply(batch);

        Assert.Equal(1, state.RegionCount);
        Assert.Equal(groups, state.GroupCount);
        var region = Assert.Single(state.RegionViews);
        Assert.Equal(nodes.ToHashSet(), region.Members.Select(m => m.Node).ToHashSet());
        Assert.All(state.GroupViews, gv => Assert.Equal(region.Region, Assert.Single(gv.Regions).Region));
        Assert.Equal(groups, change.NewGroupViews.Length);
    }

    [Fact]
    public void Nodes_with_the_same_groups_share_a_region_and_others_do_not()
    {
        // a,b in {x,y}; c in {y}; d in {y,z}: three regions {a,b}, {c}, {d}.
        var state = NewState();
        var n = Register(state, 4);
        state.Apply([
            new JoinRequest(n[0], "x"), new JoinRequest(n[0], "y"),
            new JoinRequest(n[1], "y"), new JoinRequest(n[1], "x"),
            new JoinRequest(n[2], "y"),
            new JoinRequest(n[3], "y"), new JoinRequest(n[3], "z"),
        ]);

        Assert.Equal(3, state.RegionCount);
        Assert.Equal(state.RegionOf(n[0]), state.RegionOf(n[1]));
        Assert.NotEqual(state.RegionOf(n[0]), state.RegionOf(n[2]));
        Assert.NotEqual(state.RegionOf(n[2]), state.RegionOf(n[3]));
        Assert.Equal(3, state.FindGroup("y")!.RegionCount);
        Assert.Single(state.FindGroup("x")!.Regions);
        Assert.Single(state.FindGroup("z")!.Regions);
    }

    [Fact]
    public void Views_are_immutable_and_numbered_consecutively()
    {
        var state = NewState();
        var n = Register(state, 3);
        state.Apply([new JoinRequest(n[0], "g"), new JoinRequest(n[1], "g")]);
        var first = state.FindGroup("g")!;
        var firstRegion = state.RegionViewOf(state.RegionOf(n[0])!.Value);
        state.Apply([new JoinRequest(n[2], "g")]);
        var second = state.FindGroup("g")!;
        var secondRegion = state.RegionViewOf(state.RegionOf(n[0])!.Value);

        Assert.Equal(first.ViewNumber + 1, second.ViewNumber);
        Assert.Equal(firstRegion.ViewNumber + 1, secondRegion.ViewNumber);
        Assert.Equal(2, firstRegion.Count);
        Assert.Equal(3, secondRegion.Count);
        Assert.Equal(firstRegion.Region, secondRegion.Region);
        Assert.Equal(firstRegion.MulticastAddress, secondRegion.MulticastAddress);
    }

    [Fact]
    public void Each_node_gets_only_the_update_that_concerns_it()
    {
        var state = NewState();
        var n = Register(state, 4);
        state.Apply([new JoinRequest(n[0], "a"), new JoinRequest(n[1], "a"), new JoinRequest(n[2], "b"), new JoinRequest(n[3], "b")]);

        var change = state.Apply([new JoinRequest(n[3], "b2")]); // only group b's members and b2 care
        Assert.DoesNotContain(n[0], change.Updates.Keys);
        Assert.DoesNotContain(n[1], change.Updates.Keys);
        var update2 = change.Updates[n[2]];
        Assert.Contains(update2.GroupViews, g => g.Name == "b");
        Assert.DoesNotContain(update2.GroupViews, g => g.Name == "b2");
        var update3 = change.Updates[n[3]];
        Assert.Contains(update3.GroupViews, g => g.Name == "b2");
        Assert.Contains(update3.RegionViews, r => r.Region == state.RegionOf(n[3]));
        Assert.All(change.Updates.Values, u => Assert.All(u.GroupViews,
            gv => Assert.All(gv.Regions, rr => Assert.True(
                u.RegionViews.Any(rv => rv.Region == rr.Region) || !change.NewRegionViews.Any(rv => rv.Region == rr.Region),
                $"{u.Node} got {gv.Name} but not the new view of its region {rr.Region}"))));
    }

    [Fact]
    public void A_crashed_node_is_excluded_from_every_view_and_its_empty_region_ends()
    {
        var state = NewState();
        var n = Register(state, 3);
        var groups = Enumerable.Range(0, 50).Select(i => $"g{i}").ToArray();
        state.Apply([.. n.SelectMany(x => groups.Select(g => (MembershipRequest)new JoinRequest(x, g))), new JoinRequest(n[2], "solo")]);
        var soloRegion = state.RegionOf(n[2])!.Value;
        var soloGroup = state.FindGroup("solo")!.Group;

        var change = state.Apply([new NodeDownRequest(n[2])]);

        Assert.False(state.IsAlive(n[2]));
        Assert.Contains(soloRegion, change.EndedRegions);
        Assert.Equal(soloGroup, Assert.Single(change.EndedGroups));
        Assert.Null(state.FindGroup("solo"));
        Assert.All(state.GroupViews, gv => Assert.All(gv.Regions,
            rr => Assert.DoesNotContain(state.RegionViewOf(rr.Region).Members, m => m.Node == n[2])));
        Assert.DoesNotContain(n[2], change.Updates.Keys);
        Assert.Equal(50, change.NewGroupViews.Length); // every group n[2] was in
    }

    [Fact]
    public void Multicast_addresses_are_reused_and_an_exhausted_pool_means_unicast_fan_out()
    {
        var state = NewState(poolSize: 2);
        var n = Register(state, 3);
        state.Apply([new JoinRequest(n[0], "a"), new JoinRequest(n[1], "b"), new JoinRequest(n[2], "c")]);
        var addresses = n.Select(x => state.RegionViewOf(state.RegionOf(x)!.Value).MulticastAddress).ToList();
        Assert.Equal(2, addresses.Count(a => a is not null));
        Assert.Single(addresses, a => a is null);

        var freed = addresses[0];
        state.Apply([new LeaveRequest(n[0], "a")]);
        Assert.Null(state.RegionOf(n[0]));
        state.Apply([new JoinRequest(n[0], "d")]);
        Assert.Equal(freed, state.RegionViewOf(state.RegionOf(n[0])!.Value).MulticastAddress);
    }

    [Fact]
    public void A_designer_can_pin_nodes_to_a_region_whatever_their_groups()
    {
        var state = NewState(pin: address => address.Port < 10002 ? "left" : null);
        var n = Register(state, 3);
        state.Apply([new JoinRequest(n[0], "a"), new JoinRequest(n[1], "b"), new JoinRequest(n[2], "b")]);
        Assert.Equal(state.RegionOf(n[0]), state.RegionOf(n[1])); // pinned together despite different groups
        Assert.NotEqual(state.RegionOf(n[1]), state.RegionOf(n[2]));
    }

    [Fact]
    public void Partitions_follow_the_papers_round_robin_rule()
    {
        var state = NewState();
        var n = Register(state, 12);
        state.Apply([.. n.Select(x => (MembershipRequest)new JoinRequest(x, "g"))]);
        var view = state.RegionViewOf(state.RegionOf(n[0])!.Value);
        Assert.Equal(2, view.PartitionCount(5)); // floor(12 / 5)
        Assert.Equal(new[] { 0, 1, 0, 1 }, Enumerable.Range(0, 4).Select(i => view.PartitionOf(i, 5)));
        Assert.Equal(1, view.CachingPartition(7, 5));
        Assert.Equal(1, new RegionView(view.Region, 1, view.Members.RemoveRange(3, 9), null).PartitionCount(5)); // small regions: one partition
        Assert.True(view.Members.Select(m => m.Address.Port).SequenceEqual(view.Members.Select(m => m.Address.Port).Order()));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Random_batches_agree_with_regions_recomputed_from_scratch(int seed)
    {
        var random = new Random(seed);
        var state = NewState(poolSize: 1000);
        var alive = Register(state, 30).ToList();
        var model = alive.ToDictionary(x => x, _ => new HashSet<string>());
        for (int round = 0; round < 200; round++)
        {
            var batch = new List<MembershipRequest>();
            for (int i = 0; i < random.Next(1, 8); i++)
            {
                if (alive.Count == 0)
                {
                    break;
                }

                var node = alive[random.Next(alive.Count)];
                string group = $"g{random.Next(8)}";
                switch (random.Next(10))
                {
                    case < 6:
                        batch.Add(new JoinRequest(node, group));
                        model[node].Add(group);
                        break;
                    case < 9:
                        batch.Add(new LeaveRequest(node, group));
                        model[node].Remove(group);
                        break;
                    default:
                        batch.Add(new NodeDownRequest(node));
                        alive.Remove(node);
                        model.Remove(node);
                        break;
                }
            }

            state.Apply(batch);

            // Reference: regions = nodes grouped by their exact group set.
            var expected = model.Where(kv => kv.Value.Count > 0)
                .GroupBy(kv => string.Join(",", kv.Value.Order(StringComparer.Ordinal)))
                .Select(g => g.Select(kv => kv.Key).ToHashSet()).ToList();
            Assert.True(expected.Count == state.RegionCount, $"seed {seed} round {round}: {expected.Count} regions expected, {state.RegionCount} found");
            foreach (var members in expected)
            {
                var region = state.RegionViewOf(state.RegionOf(members.First())!.Value);
                Assert.True(members.SetEquals(region.Members.Select(m => m.Node)), $"seed {seed} round {round}: region members differ");
            }

            foreach (var group in model.Values.SelectMany(g => g).Distinct())
            {
                var view = state.FindGroup(group)!;
                var expectedRegions = model.Where(kv => kv.Value.Contains(group)).Select(kv => state.RegionOf(kv.Key)!.Value).ToHashSet();
                Assert.True(expectedRegions.SetEquals(view.Regions.Select(r => r.Region)), $"seed {seed} round {round}: regions of {group} differ");
                Assert.All(view.Regions, rr => Assert.Equal(state.RegionViewOf(rr.Region).ViewNumber, rr.ViewNumber));
            }
        }
    }

    [Fact]
    public void A_node_that_joins_gets_the_views_of_unchanged_regions_of_its_groups()
    {
        var state = new MembershipState(new MulticastAddressPool(new NetAddress(0xEF000001, 5000), 16));
        var n = Register(state, 3);
        state.Apply([new JoinRequest(n[0], "g"), new JoinRequest(n[0], "h"), new JoinRequest(n[1], "g"), new JoinRequest(n[1], "h")]);

        // n[2] joins only g: a new region {n[2]}; the region {n[0], n[1]} does not change, but n[2] must learn it to send in g.
        var change = state.Apply([new JoinRequest(n[2], "g")]);
        var update = change.Updates[n[2]];
        var g = Assert.Single(update.GroupViews);
        Assert.Equal(2, g.RegionCount);
        Assert.Equal(g.Regions.Select(r => r.Region.Value).Order(), update.RegionViews.Select(r => r.Region.Value).Order());
        Assert.DoesNotContain(change.NewRegionViews, v => v.Members.Any(m => m.Node == n[0]));
    }
}
