using QuickSilver.Core.Io;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;

namespace QuickSilver.Tests;

/// <summary>
/// Changing the replica set of a running replicated GMS (docs/membership.md, "Changing the replica set"), real DotNext
/// Raft over loopback in this process: a fourth replica started with <see cref="RaftGmsOptions.Join"/> asks to be added
/// while the test adds it through the leader too (the two requests race; the change is idempotent and waits for a
/// concurrent one), and it catches up to the same state; a follower is removed and stopped; then the leader is stopped too, and
/// the remaining two (the added one among them) elect a leader, which is possible only if the added replica votes and
/// the removed one no longer counts (two of four would not be a majority). A node keeps its id throughout and joins a
/// group through the new leader. Restarted with the old list of four, the added replica starts from the set it saved
/// (three) and, with the other survivor, is a majority again. Assertions on outcomes with generous limits.
/// </summary>
/// <summary>Tests of real Raft timing that run with no other test class alongside: under the whole suite's parallel
/// load one such test waited for good (see <see cref="ReplicaSetChangeTests"/>).</summary>
[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class RealRaftTimingCollection
{
    public const string Name = "real Raft timing";
}

[Collection(RealRaftTimingCollection.Name)]
public sealed class ReplicaSetChangeTests : IAsyncLifetime
{
    private static readonly TimeSpan Limit = TimeSpan.FromSeconds(60);
    private readonly string _root = Path.Combine(Path.GetTempPath(), $"qs-raftgms-set-{Guid.NewGuid():N}");
    private readonly List<IAsyncDisposable> _owned = new();

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        foreach (var owned in Enumerable.Reverse(_owned))
        {
            try
            {
                await owned.DisposeAsync().AsTask().WaitAsync(Limit);
            }
            catch (ObjectDisposedException)
            {
            }
            catch (TimeoutException)
            {
            }
        }

        if (Directory.Exists(_root))
        {
            Directory.Delete(_root, recursive: true);
        }
    }

    private static readonly GmsOptions Gms = new()
    {
        BatchInterval = TimeSpan.FromMilliseconds(20),
        MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
    };

    private async Task<ReplicatedGms> StartReplica(NetAddress[] peers, int id, bool join = false)
    {
        var replica = await ReplicatedGms.StartAsync(new RaftGmsOptions { Id = id, Peers = peers, DataDirectory = Path.Combine(_root, $"r{id}"), Join = join }, Gms);
        _owned.Add(replica);
        return replica;
    }

    private static async Task<T> Eventually<T>(Func<Task<T>> probe, Func<T, bool> done, string what)
    {
        var deadline = DateTime.UtcNow + Limit;
        while (true)
        {
            var value = await probe().WaitAsync(Limit);
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
                if ((await list[i].GetStatusAsync().WaitAsync(Limit)).IsLeading)
                {
                    return i;
                }
            }

            return -1;
        }, i => i >= 0, "a replica leads");
        return list[index];
    }

    /// <summary>Runs a replica-set change at whichever replica leads, again if an election moved the lead between
    /// finding the leader and asking it (seen under the whole suite's load: "does not lead; the leader is unknown") or
    /// the engine answered false (seen once in six runs under load).</summary>
    private static async Task<ReplicatedGms> AtTheLeader(List<ReplicatedGms> replicas, Func<ReplicatedGms, Task<bool>> change)
    {
        var deadline = DateTime.UtcNow + Limit;
        while (true)
        {
            var leader = await LeaderOf(replicas);
            try
            {
                // False: the engine gave up on this attempt (it lost the lead, or the new replica did not catch up in
                // time); the change is idempotent, so it is asked again, as an operator would.
                if (await change(leader).WaitAsync(Limit))
                {
                    return leader;
                }

                Assert.True(DateTime.UtcNow < deadline, "the replica-set change was refused until the limit");
            }
            catch (InvalidOperationException e) when (e.Message.Contains("does not lead", StringComparison.Ordinal) && DateTime.UtcNow < deadline)
            {
                await Task.Delay(100);
            }
        }
    }

    [Fact]
    public async Task A_replica_is_added_and_another_removed_at_run_time_and_the_new_set_survives_losing_its_leader()
    {
        var addresses = ReplicatedGms.FreeLoopbackAddresses(4);
        var replicas = new List<ReplicatedGms>();
        for (int id = 1; id <= 3; id++)
        {
            replicas.Add(await StartReplica(addresses[..3], id).WaitAsync(Limit));
        }

        var leader = await LeaderOf(replicas);
        var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { GmsReplicas = addresses }).WaitAsync(Limit);
        _owned.Add(node);
        await node.JoinGroupAsync("g").WaitAsync(Limit);
        uint id0 = node.Id;

        // A fourth replica joins: it waits, unconfigured, until the leader adds it; then it holds the same state.
        var added = await StartReplica(addresses, 4, join: true).WaitAsync(Limit);
        leader = await LeaderOf(replicas); // (on a loaded machine an election may have moved it)
        var follower = replicas.First(r => r != leader);
        try
        {
            await follower.AddReplicaAsync(added.Address).WaitAsync(Limit); // an election made it the leader meanwhile
        }
        catch (InvalidOperationException refusal)
        {
            Assert.Contains("does not lead", refusal.Message, StringComparison.Ordinal);
        }

        leader = await AtTheLeader(replicas, l => l.AddReplicaAsync(added.Address));
        follower = replicas.First(r => r != leader);
        await Eventually(() => added.GetStatusAsync(), s => s.Nodes == 1 && s.Groups == 1 && replicas.Any(r => r.Address == s.Leader), "the added replica caught up and follows a leader");
        await Eventually(() => Task.FromResult(leader.Replicas.Count), n => n == 4, "the leader's replica set has four");
        await Eventually(async () => Convert.ToBase64String(await leader.ExportStateAsync()) == Convert.ToBase64String(await added.ExportStateAsync()),
            same => same, "the added replica holds the leader's state");

        // A follower is removed, then stopped.
        leader = await AtTheLeader(replicas, l => l.RemoveReplicaAsync(follower.Address));
        await Eventually(() => Task.FromResult(leader.Replicas), r => r.Count == 3 && !r.Contains(follower.Address), "the leader's replica set lost the follower");
        await follower.DisposeAsync().AsTask().WaitAsync(Limit);
        replicas.Remove(follower);
        var set = string.Join(",", leader.Replicas);
        foreach (var replica in replicas.Append(added))
        {
            await Eventually(() => Task.FromResult(string.Join(",", replica.Replicas)), r => r == set, $"replica {replica.Address} has the new replica set");
        }

        // The leader stops too: the two left (the added one among them) are a majority of the new set of three.
        await leader.DisposeAsync().AsTask().WaitAsync(Limit);
        replicas.Remove(leader);
        var next = await LeaderOf([.. replicas, added]);
        await node.JoinGroupAsync("h").WaitAsync(Limit);
        await Eventually(() => next.GetSnapshotAsync(), s => s.GroupsByName.ContainsKey("h"), "the node joined h through the new leader");
        Assert.Equal(id0, node.Id);
        Assert.Equal(0, (await next.GetStatusAsync().WaitAsync(Limit)).FailuresDetected);

        // The added replica restarts, given the stale list of four: it starts from the set it saved (three, without the
        // removed one), so with the other survivor it is a majority again (two of four would not be).
        var survivor = replicas.Single(); // the one of the first three neither removed nor stopped
        var set3 = await Eventually(() => Task.FromResult(string.Join(",", added.Replicas)), set => set.Split(',').Length == 3, "the added replica knows the set of three");
        string directory = Path.Combine(_root, "r4");
        await Eventually(() => Task.FromResult(ReplicaSetStorage.Load(directory) is { } saved ? string.Join(",", saved.Replicas.OrderBy(a => a.Port)) : ""),
            saved => saved == set3, "the added replica saved the set of three");
        string roles = $"removed {follower.Address}, stopped leader {leader.Address}, added {added.Address}, survivor {survivor.Address}";
        await added.DisposeAsync().AsTask().WaitAsync(Limit);
        var restarted = await StartReplica(addresses, 4).WaitAsync(Limit);
        Assert.True(set3 == string.Join(",", restarted.Replicas), $"{set3} vs {string.Join(",", restarted.Replicas)}: {roles}");
        var again = await LeaderOf([survivor, restarted]);
        await node.JoinGroupAsync("i").WaitAsync(Limit);
        await Eventually(() => again.GetSnapshotAsync(), s => s.GroupsByName.ContainsKey("i"), "the node joined i after the restart");
    }
}
