using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// Follower reads (docs/membership.md, "Reads") in virtual time on <see cref="SimulatedGmsCluster"/>: a follower answers a
/// node's <see cref="GmsMessageKind.Sync"/> from its applied state while it is fresh (within
/// <see cref="GmsOptions.FollowerReadMaxLag"/> entries of the leader's commit index, learned within
/// <see cref="GmsOptions.FollowerReadMaxAge"/>), redirects otherwise, and a node never installs an older view than it has.
/// </summary>
public sealed class FollowerReadSimulationTests
{
    private static readonly GmsOptions Options = new()
    {
        BatchInterval = TimeSpan.FromMilliseconds(100),
        HeartbeatInterval = TimeSpan.FromMilliseconds(500),
        FailureTimeout = TimeSpan.FromSeconds(3),
    };

    private static readonly NetAddress[] Replicas = [NetAddress.Loopback(7001), NetAddress.Loopback(7002), NetAddress.Loopback(7003)];

    /// <summary>A client whose every installed group view is checked against the last one it installed for that group.</summary>
    private static GmsClient Client(VirtualWorld world, int i, List<string> backwards)
    {
        var client = new GmsClient(world, world.Channel(Address(i)), Replicas[0], (ulong)(100 + i), new GmsClientOptions { Replicas = Replicas });
        var seen = new Dictionary<GroupId, uint>();
        client.ViewsChanged += update =>
        {
            foreach (var view in update.GroupViews)
            {
                if (seen.TryGetValue(view.Group, out uint last) && view.ViewNumber < last)
                {
                    backwards.Add($"node {i}: group {view.Name} from view {last} to {view.ViewNumber}");
                }

                seen[view.Group] = Math.Max(last, view.ViewNumber);
            }
        };
        client.Start();
        return client;
    }

    private static NetAddress Address(int i) => NetAddress.Loopback((ushort)(8000 + i));

    /// <summary>Two nodes in group "g" with the first replica leading; returns once both see both.</summary>
    private static (VirtualWorld World, SimulatedGmsCluster Gms, GmsClient A, GmsClient B, List<string> Backwards) TwoNodesInOneGroup(GmsOptions options)
    {
        var world = new VirtualWorld();
        var gms = new SimulatedGmsCluster(world, options, Replicas);
        gms.Elect(gms[0]);
        var backwards = new List<string>();
        var a = Client(world, 0, backwards);
        var b = Client(world, 1, backwards);
        Assert.True(world.RunUntil(() => a.IsRegistered && b.IsRegistered, TimeSpan.FromSeconds(5)));
        a.Join("g");
        b.Join("g");
        Assert.True(world.RunUntil(() => new[] { a, b }.All(c => c.FindGroup("g") is { } v && v.Regions.Sum(r => c.FindRegion(r.Region)?.Count ?? 0) == 2),
            TimeSpan.FromSeconds(5)));
        return (world, gms, a, b, backwards);
    }

    [Fact]
    public void A_follower_answers_a_read_while_the_leader_cannot_reach_the_node()
    {
        var (world, gms, a, b, backwards) = TwoNodesInOneGroup(Options);
        uint before = a.FindGroup("g")!.ViewNumber;

        // The leader and node A are cut apart (both stay up): B's leave is committed, but A never hears of it.
        world.Drop = (from, to) => (from == Replicas[0] && to == Address(0)) || (from == Address(0) && to == Replicas[0]);
        b.Leave("g");
        Assert.True(world.RunUntil(() => gms[0].Server!.State.FindGroup("g")!.ViewNumber > before, TimeSpan.FromSeconds(2)));
        world.RunFor(TimeSpan.FromMilliseconds(200));
        uint current = gms[0].Server!.State.FindGroup("g")!.ViewNumber;
        Assert.Equal(before, a.FindGroup("g")!.ViewNumber);

        // A asks a follower, which has applied the leave and is fresh: it answers, and A installs the current view.
        a.RequestViews(Replicas[1]);
        Assert.True(world.RunUntil(() => a.FindGroup("g")!.ViewNumber == current, TimeSpan.FromSeconds(1)));
        Assert.Equal(Replicas[1], a.LastReadFrom);
        Assert.Equal(1, gms[1].Server!.ReadsServed);
        Assert.Equal(0, gms[0].Server!.ReadsServed);
        Assert.Equal(0, gms[1].Server!.ReadsRedirected);
        var view = a.FindGroup("g")!;
        Assert.Equal(1, view.Regions.Sum(r => a.FindRegion(r.Region)?.Count ?? 0)); // only A is left in the group
        Assert.Empty(backwards);
    }

    [Fact]
    public void A_follower_too_far_behind_redirects_the_read_to_the_leader()
    {
        var (world, gms, a, b, backwards) = TwoNodesInOneGroup(Options);

        // The third replica stops applying (a slow follower) while B joins six groups, one batch each: it learns the
        // leader's commit index is more than FollowerReadMaxLag (4) entries ahead of what it applied.
        gms[2].Paused = true;
        for (int i = 0; i < 6; i++)
        {
            b.Join($"h{i}");
            world.RunFor(Options.BatchInterval * 2);
        }

        Assert.True(gms[2].Server!.FollowerLag > Options.FollowerReadMaxLag);
        Assert.False(gms[2].Server!.CanServeReads);
        Assert.True(gms[1].Server!.CanServeReads);

        a.RequestViews(Replicas[2]);
        Assert.True(world.RunUntil(() => a.ReadsAnswered == 1, TimeSpan.FromSeconds(1)));
        Assert.Equal(1, gms[2].Server!.ReadsRedirected);
        Assert.Equal(0, gms[2].Server!.ReadsServed);
        Assert.Equal(1, a.ReadsRedirected);
        Assert.Equal(Replicas[0], a.LastReadFrom); // answered by the leader instead
        Assert.Equal(Replicas[0], a.CurrentGms); // and A still talks to the leader for everything else

        // Caught up, it answers again.
        gms[2].Paused = false;
        world.RunFor(TimeSpan.FromMilliseconds(200));
        a.RequestViews(Replicas[2]);
        Assert.True(world.RunUntil(() => a.ReadsAnswered == 2, TimeSpan.FromSeconds(1)));
        Assert.Equal(Replicas[2], a.LastReadFrom);
        Assert.Empty(backwards);
    }

    [Fact]
    public void A_follower_cut_off_from_the_leader_stops_answering_after_the_freshness_bound()
    {
        var (world, gms, a, _, backwards) = TwoNodesInOneGroup(Options);
        gms[1].Isolated = true;

        // Within FollowerReadMaxAge (1 s) of the last commit index it learned, it still answers.
        world.RunFor(TimeSpan.FromMilliseconds(500));
        a.RequestViews(Replicas[1]);
        Assert.True(world.RunUntil(() => a.ReadsAnswered == 1, TimeSpan.FromSeconds(1)));
        Assert.Equal(Replicas[1], a.LastReadFrom);

        // Past it, it does not know how far behind it is: it redirects.
        world.RunFor(TimeSpan.FromSeconds(1));
        Assert.False(gms[1].Server!.CanServeReads);
        a.RequestViews(Replicas[1]);
        Assert.True(world.RunUntil(() => a.ReadsAnswered == 2, TimeSpan.FromSeconds(1)));
        Assert.Equal(1, gms[1].Server!.ReadsRedirected);
        Assert.Equal(Replicas[0], a.LastReadFrom);
        Assert.Empty(backwards);
    }

    [Fact]
    public void A_read_from_a_follower_behind_the_node_never_moves_its_views_backwards()
    {
        // A generous lag bound, so the follower answers although the node has seen newer views than it applied.
        var (world, gms, a, b, backwards) = TwoNodesInOneGroup(Options with { FollowerReadMaxLag = 100 });
        gms[2].Paused = true;
        b.Leave("g");
        Assert.True(world.RunUntil(() => a.FindGroup("g") is { } v && v.Regions.Sum(r => a.FindRegion(r.Region)?.Count ?? 0) == 1, TimeSpan.FromSeconds(2)));
        uint current = a.FindGroup("g")!.ViewNumber;
        var regions = a.FindGroup("g")!.Regions.Select(r => a.FindRegion(r.Region)!.ViewNumber).ToList();

        a.RequestViews(Replicas[2]);
        Assert.True(world.RunUntil(() => a.ReadsAnswered == 1, TimeSpan.FromSeconds(1)));
        Assert.Equal(Replicas[2], a.LastReadFrom);
        Assert.True(a.StaleViewsIgnored >= 1);
        Assert.Equal(current, a.FindGroup("g")!.ViewNumber);
        Assert.Equal(regions, a.FindGroup("g")!.Regions.Select(r => a.FindRegion(r.Region)!.ViewNumber).ToList());
        Assert.Equal(1, a.FindGroup("g")!.Regions.Sum(r => a.FindRegion(r.Region)?.Count ?? 0));
        Assert.Empty(backwards);
    }

    [Fact]
    public void Reads_from_an_address_that_is_not_a_registered_node_and_repeated_reads_are_dropped()
    {
        var (world, gms, a, _, _) = TwoNodesInOneGroup(Options);
        world.Inject(NetAddress.Loopback(9999), Replicas[1], GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Sync, Number = 1 }));
        world.RunFor(TimeSpan.FromMilliseconds(10));
        Assert.Equal(1, gms[1].Server!.ReadsDropped);
        Assert.Equal(0, gms[1].Server!.ReadsServed);

        a.RequestViews(Replicas[1]);
        a.RequestViews(Replicas[1]); // within MinReadInterval: one answer
        world.RunFor(TimeSpan.FromMilliseconds(50));
        Assert.Equal(1, gms[1].Server!.ReadsServed);
        Assert.Equal(2, gms[1].Server!.ReadsDropped);
    }
}
