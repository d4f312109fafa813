using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;

namespace QuickSilver.Tests;

/// <summary>
/// Three GMS replicas on DotNext Raft over loopback, in this process, with nodes that list all three. The leader is
/// stopped; the nodes move to the new leader keeping their ids and views, a new node joins through it, and the
/// survivors hold the same state. Then every replica restarts from its directory and the state is still there.
/// A snapshot is written every 4 commands, so the restart loads a snapshot and replays the log after it. Assertions
/// are on outcomes only, with generous limits (no timing is asserted). With datagram security on, the nodes also keep
/// the region key they were handed (docs/security.md, "Keys per region and view"): the new leader, and the restarted
/// replicas, derive and hand out the same one from the log and snapshots.
/// </summary>
[Collection(RealRaftTimingCollection.Name)]
public sealed class ReplicatedGmsTests : IAsyncLifetime
{
    private static readonly TimeSpan Limit = TimeSpan.FromSeconds(60);
    private readonly string _root = Path.Combine(Path.GetTempPath(), $"qs-raftgms-{Guid.NewGuid():N}");
    private readonly List<IAsyncDisposable> _owned = new();
    private DatagramSecurityOptions? _security;

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        foreach (var owned in Enumerable.Reverse(_owned))
        {
            try
            {
                await owned.DisposeAsync();
            }
            catch (ObjectDisposedException)
            {
            }
        }

        Directory.Delete(_root, recursive: true);
    }

    private static readonly GmsOptions Gms = new()
    {
        BatchInterval = TimeSpan.FromMilliseconds(20),
        MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
    };

    private async Task<ReplicatedGms> StartReplica(NetAddress[] peers, int id)
    {
        var replica = await ReplicatedGms.StartAsync(new RaftGmsOptions { Id = id, Peers = peers, DataDirectory = Path.Combine(_root, $"r{id}"), SnapshotEvery = 4 }, Gms, _security);
        _owned.Add(replica);
        return replica;
    }

    private async Task<QuickSilverNode> StartNode(NetAddress[] replicas)
    {
        var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions
        {
            GmsReplicas = replicas,
            Region = new() { TokenInterval = TimeSpan.FromMilliseconds(100) },
            Security = _security ?? new DatagramSecurityOptions(),
        });
        _owned.Add(node);
        return node;
    }

    private static async Task<T> Eventually<T>(Func<Task<T>> probe, Func<T, bool> done, string what)
    {
        var deadline = DateTime.UtcNow + Limit;
        while (true)
        {
            var value = await probe();
            if (done(value))
            {
                return value;
            }

            Assert.True(DateTime.UtcNow < deadline, $"Not within {Limit}: {what} (last: {value})");
            await Task.Delay(50);
        }
    }

    private static async Task<ReplicatedGms> LeaderOf(IEnumerable<ReplicatedGms> replicas)
    {
        var list = replicas.ToList();
        int index = await Eventually(async () =>
        {
            for (int i = 0; i < list.Count; i++)
            {
                if ((await list[i].GetStatusAsync()).IsLeading)
                {
                    return i;
                }
            }

            return -1;
        }, i => i >= 0, "a replica leads");
        return list[index];
    }

    private static Task<NetAddress> CurrentGms(QuickSilverNode node)
        => node.Core.InvokeAsync(() => node.Stack.Get<MembershipLayer>().Client.CurrentGms);

    private static Task<uint?> ViewNumber(QuickSilverNode node, string group)
        => node.Core.InvokeAsync(() => node.Stack.Get<MembershipLayer>().Client.FindGroup(group)?.ViewNumber);

    private static Task<int> Members(QuickSilverNode node, string group) => node.Core.InvokeAsync(() =>
    {
        var client = node.Stack.Get<MembershipLayer>().Client;
        return client.FindGroup(group)?.Regions.Sum(r => client.FindRegion(r.Region)?.Count ?? 0) ?? 0;
    });

    /// <summary>The id of the key <paramref name="node"/> seals <paramref name="group"/>'s region under (0: none).</summary>
    private static Task<uint> RegionKey(QuickSilverNode node, string group) => node.Core.InvokeAsync(() =>
    {
        var client = node.Stack.Get<MembershipLayer>().Client;
        return client.FindGroup(group) is { } view && node.Stack.Security is { } security
               && security.ScopedKeys.TryCurrent(view.Regions[0].Region.Value, out var key) ? key.Id : 0u;
    });

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task Nodes_keep_ids_and_views_across_a_leader_stop_a_new_node_joins_via_the_new_leader_and_a_full_restart_keeps_the_state(bool secure)
    {
        _security = secure ? new DatagramSecurityOptions { Mode = DatagramSecurity.Authenticate, ClusterSecret = DatagramSecurityOptions.GenerateSecret() } : null;
        var peers = ReplicatedGms.FreeLoopbackAddresses(3);
        var replicas = new List<ReplicatedGms>();
        for (int id = 1; id <= 3; id++)
        {
            replicas.Add(await StartReplica(peers, id));
        }

        var leader = await LeaderOf(replicas);
        var a = await StartNode(peers);
        var b = await StartNode(peers);
        await a.JoinGroupAsync("g");
        await b.JoinGroupAsync("g");
        await Eventually(() => Members(a, "g"), n => n == 2, "a sees both members of g");
        await Eventually(() => Members(b, "g"), n => n == 2, "b sees both members of g");
        var ids = (a.Id, b.Id);
        var views = (await ViewNumber(a, "g"), await ViewNumber(b, "g"));
        Assert.Equal(views.Item1, views.Item2);
        ulong epoch = (await leader.GetStatusAsync()).Epoch;
        Assert.NotEqual(0ul, epoch);
        uint key = await Eventually(() => RegionKey(a, "g"), k => secure ? k != 0 : k == 0, "a holds g's region key (if secure)");
        Assert.Equal(key, await Eventually(() => RegionKey(b, "g"), k => k == key, "b holds the same key"));

        // A follower answers a's read of its views from its own applied state: over the engine it has learned the
        // leader's commit index (SynchronizeAsync) recently and applied it (docs/membership.md, "Reads").
        ReplicatedGms? answered = null;
        await Eventually(async () =>
        {
            // A replica that follows now (an election may have moved the leader on a loaded machine), and still does after.
            ReplicatedGms? follower = null;
            foreach (var replica in replicas)
            {
                if (!(await replica.GetStatusAsync()).IsLeading)
                {
                    follower = replica;
                    break;
                }
            }

            if (follower is null)
            {
                return false;
            }

            await a.Core.InvokeAsync(() =>
            {
                a.Stack.Get<MembershipLayer>().Client.RequestViews(follower.Address);
                return true;
            });
            await Task.Delay(150);
            var from = await a.Core.InvokeAsync(() => a.Stack.Get<MembershipLayer>().Client.LastReadFrom);
            answered = follower;
            return from == follower.Address && !(await follower.GetStatusAsync()).IsLeading;
        }, yes => yes, "a follower answers a's read");
        Assert.Equal(views.Item1, await ViewNumber(a, "g"));
        Assert.True((await answered!.GetStatusAsync()).ReadsServed >= 1);
        leader = await LeaderOf(replicas);

        // Stop the leader; another replica takes over and the nodes move to it.
        await leader.DisposeAsync();
        replicas.Remove(leader);
        var next = await LeaderOf(replicas);
        Assert.NotEqual(leader.Address, next.Address);
        await Eventually(() => CurrentGms(a), g => g == next.Address, "a talks to the new leader");
        await Eventually(() => CurrentGms(b), g => g == next.Address, "b talks to the new leader");
        Assert.Equal((key, key), (await RegionKey(a, "g"), await RegionKey(b, "g"))); // re-sent by the new leader, unchanged

        // A new node registers and joins through the new leader: the next id, and one new view of g that every member sees.
        var c = await StartNode(peers);
        await c.JoinGroupAsync("g");
        await Eventually(() => Members(a, "g"), n => n == 3, "a sees c join g");
        await Eventually(() => Members(b, "g"), n => n == 3, "b sees c join g");
        Assert.Equal(ids, (a.Id, b.Id));
        Assert.Equal(Math.Max(a.Id, b.Id) + 1, c.Id);
        Assert.Equal(views.Item1 + 1, await ViewNumber(a, "g"));
        Assert.Equal(views.Item1 + 1, await ViewNumber(c, "g"));
        uint joined = await Eventually(() => RegionKey(c, "g"), k => secure ? k != key && k != 0 : k == 0, "c holds the key of the view it joined");
        Assert.Equal(joined, await Eventually(() => RegionKey(a, "g"), k => k == joined, "a moved to the same new key"));
        var status = await next.GetStatusAsync();
        Assert.Equal((epoch, 3, 0L), (status.Epoch, status.Nodes, status.FailuresDetected));

        // The two survivors hold the same state.
        var survivors = replicas.ToList();
        await Eventually(async () => (await survivors[0].GetStatusAsync()).CommandsApplied == (await survivors[1].GetStatusAsync()).CommandsApplied,
            same => same, "both survivors applied the same commands");
        Assert.Equal(await survivors[0].ExportStateAsync(), await survivors[1].ExportStateAsync());

        // Every replica stops and restarts from its directory: the epoch, ids and groups are still there.
        foreach (var replica in replicas)
        {
            await replica.DisposeAsync();
        }

        replicas.Clear();
        for (int id = 1; id <= 3; id++)
        {
            replicas.Add(await StartReplica(peers, id));
        }

        var restarted = await LeaderOf(replicas);
        status = await Eventually(() => restarted.GetStatusAsync(), s => s.Nodes == 3, "the restarted GMS knows the three nodes");
        Assert.Equal(epoch, status.Epoch);
        Assert.Equal(3, (await restarted.GetSnapshotAsync()).GroupsByName["g"].Members);
        await Eventually(() => CurrentGms(a), g => g == restarted.Address, "a talks to the restarted leader");
        Assert.Equal(ids, (a.Id, b.Id));
        Assert.Equal(joined, await RegionKey(a, "g")); // the restarted replicas hand out the key they had on disk
    }
}
