using System.Security.Cryptography;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;
using Microsoft.Extensions.Logging.Abstractions;

namespace QuickSilver.Tests;

/// <summary>
/// Replica-to-replica Raft traffic under TLS keyed by the cluster secret (docs/membership.md, "Replica traffic"): three
/// replicas with the secret form a GMS that serves a node; a fourth replica with another secret, which lists the three
/// as its peers and keeps standing for election, is refused at every handshake (counted on both sides), never learns
/// the log, and changes nothing: same leader, same term, and the GMS keeps serving. Real DotNext Raft over loopback in
/// this process; assertions on outcomes with generous limits.
/// </summary>
[Collection(RealRaftTimingCollection.Name)]
public sealed class ReplicatedGmsTlsTests : IAsyncLifetime
{
    private static readonly TimeSpan Limit = TimeSpan.FromSeconds(60);
    private readonly string _root = Path.Combine(Path.GetTempPath(), $"qs-raftgms-tls-{Guid.NewGuid():N}");
    private readonly List<IAsyncDisposable> _owned = new();

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        foreach (var owned in Enumerable.Reverse(_owned))
        {
            await owned.DisposeAsync();
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

    /// <param name="patient">Long election timeouts (2 to 4 s): the three honest replicas must not hold an election of their
    /// own because parallel tests starve them of CPU, or a changed leader would prove nothing about the intruder.</param>
    private async Task<ReplicatedGms> StartReplica(NetAddress[] peers, int id, byte[] secret, bool patient = true)
    {
        var replica = await ReplicatedGms.StartAsync(new RaftGmsOptions
        {
            Id = id,
            Peers = peers,
            DataDirectory = Path.Combine(_root, $"r{id}"),
            ClusterSecret = secret,
            LowerElectionTimeout = TimeSpan.FromMilliseconds(patient ? 2000 : 300),
            UpperElectionTimeout = TimeSpan.FromMilliseconds(patient ? 4000 : 600),
            RequestTimeout = TimeSpan.FromMilliseconds(patient ? 1000 : 250),
        }, Gms);
        _owned.Add(replica);
        return replica;
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

    [Fact]
    public void The_replica_key_is_derived_from_the_secret_alone()
    {
        byte[] secret = RandomNumberGenerator.GetBytes(32);
        using var a = RaftTls.FromSecret(secret, NullLogger.Instance, 1);
        using var b = RaftTls.FromSecret(secret, NullLogger.Instance, 2);
        using var other = RaftTls.FromSecret(RandomNumberGenerator.GetBytes(32), NullLogger.Instance, 3);
        Assert.True(a.PublicKey.SequenceEqual(b.PublicKey));
        Assert.False(a.PublicKey.SequenceEqual(other.PublicKey));
        Assert.Throws<ArgumentException>(() => new RaftGmsOptions { Peers = [NetAddress.Loopback(1)], DataDirectory = "x", ClusterSecret = new byte[16] }.Validate());
    }

    [Fact]
    public async Task A_replica_with_another_secret_is_refused_and_changes_nothing()
    {
        byte[] secret = RandomNumberGenerator.GetBytes(32);
        var addresses = ReplicatedGms.FreeLoopbackAddresses(4);
        var peers = addresses[..3];
        var replicas = new List<ReplicatedGms>();
        for (int id = 1; id <= 3; id++)
        {
            replicas.Add(await StartReplica(peers, id, secret));
        }

        int leader = await Eventually(async () =>
        {
            for (int i = 0; i < 3; i++)
            {
                if ((await replicas[i].GetStatusAsync()).IsLeading)
                {
                    return i;
                }
            }

            return -1;
        }, i => i >= 0, "a replica leads over TLS");
        await using (var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { GmsReplicas = peers }))
        {
            await node.JoinGroupAsync("g");
            await Eventually(() => replicas[(leader + 1) % 3].GetStatusAsync(), s => s.Groups == 1 && s.Nodes == 1, "a follower applied the node's join");
        }

        await Task.Delay(TimeSpan.FromSeconds(1)); // the node's goodbye is committed
        var before = await Eventually(() => Task.WhenAll(replicas.Select(r => r.GetStatusAsync())),
            all => all.All(s => s.CommandsApplied == all[0].CommandsApplied), "every replica applied the same commands");
        Assert.All(before, s => Assert.True(s.RaftAuthenticated));
        Assert.All(before, s => Assert.Equal(0, s.RaftPeersRefused));

        // The intruder lists the three and itself, with another secret: it stands for election again and again.
        var intruder = await StartReplica([.. peers, addresses[3]], 4, RandomNumberGenerator.GetBytes(32), patient: false);
        await Eventually(async () => (await Task.WhenAll(replicas.Select(r => r.GetStatusAsync()))).Sum(s => s.RaftPeersRefused),
            refused => refused >= 3, "the replicas refused the intruder's handshakes");
        await Task.Delay(TimeSpan.FromSeconds(2)); // several of its election timeouts (300-600 ms)

        var after = await Task.WhenAll(replicas.Select(r => r.GetStatusAsync()));
        var lost = await intruder.GetStatusAsync();
        Assert.True(after[leader].IsLeading);
        Assert.Equal(before.Max(s => s.Term), after.Max(s => s.Term)); // no election was disturbed (followers persist the term lazily)
        Assert.Equal(before.Select(s => s.CommandsApplied), after.Select(s => s.CommandsApplied));
        Assert.True(lost.RaftPeersRefused > 0); // and it refused theirs
        Assert.Equal((false, 0UL, 0, 0L), (lost.IsLeading, lost.Epoch, lost.Nodes, lost.CommandsApplied));

        // The GMS still serves: a new node registers and joins.
        await using var late = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { GmsReplicas = peers });
        await late.JoinGroupAsync("h");
        await Eventually(() => replicas[leader].GetSnapshotAsync(), s => s.GroupsByName.TryGetValue("h", out var h) && h.Members == 1, "the leader applied the late node's join");
    }
}
