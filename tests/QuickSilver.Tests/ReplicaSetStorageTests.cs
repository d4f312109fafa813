using System.Net;
using DotNext.IO;
using DotNext.Net.Cluster.Consensus.Raft.Membership;
using DotNext.Net.Cluster.Consensus.Raft.StateMachine;
using Microsoft.Extensions.Logging.Abstractions;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Raft;

namespace QuickSilver.Tests;

/// <summary>
/// The replica set a replica keeps on disk (<see cref="ReplicaSetStorage"/>, docs/membership.md "Changing the replica
/// set"): a configuration is installed and saved only if its log index is newer than the set held, and a restarted
/// replica starts from the newest of its saved set and the configuration entries its log replays. Deterministic: no
/// peers run, the restarted replica's set is read as soon as it has started.
/// </summary>
public sealed class ReplicaSetStorageTests : IDisposable
{
    private static readonly NetAddress A = NetAddress.Loopback(47101), B = NetAddress.Loopback(47102), C = NetAddress.Loopback(47103), D = NetAddress.Loopback(47104);
    private readonly string _root = Path.Combine(Path.GetTempPath(), $"qs-replicaset-{Guid.NewGuid():N}");

    public ReplicaSetStorageTests() => Directory.CreateDirectory(_root);

    public void Dispose()
    {
        if (Directory.Exists(_root))
        {
            Directory.Delete(_root, recursive: true);
        }
    }

    private static async Task<IClusterConfiguration<EndPoint>> Configuration(IClusterConfigurationStorage<EndPoint> storage, params NetAddress[] members)
    {
        var configuration = await storage.LoadConfigurationAsync();
        foreach (var member in configuration.Members.ToList())
        {
            configuration = configuration.Remove(member);
        }

        return members.Aggregate(configuration, (c, m) => c.Add(m.ToIPEndPoint()));
    }

    private static string Members(IClusterConfiguration<EndPoint> configuration)
        => string.Join(",", configuration.Members.OfType<IPEndPoint>().Select(NetAddress.FromIPEndPoint).OrderBy(a => a.Port));

    [Fact]
    public async Task A_configuration_not_newer_than_the_saved_set_is_refused_and_a_newer_one_is_saved_with_its_index()
    {
        File.WriteAllLines(Path.Combine(_root, ReplicaSetStorage.FileName), [A.ToString(), B.ToString(), D.ToString(), "index 7"]);
        var saved = ReplicaSetStorage.Load(_root);
        Assert.NotNull(saved);
        Assert.Equal(7, saved.Index);

        using var storage = new ReplicaSetStorage(_root, A, givenOthers: true, NullLogger.Instance, 1);
        IClusterConfigurationStorage<EndPoint> engine = storage;
        await storage.SeedAsync(saved, [A, B, C, D], CancellationToken.None);
        Assert.Equal($"{A},{B},{D}", Members(await engine.LoadConfigurationAsync()));

        // The log replays the entry that added D (index 5) and the one that removed C (index 7): neither is newer.
        Assert.False(await storage.SaveConfigurationAsync(await Configuration(engine, A, B, C, D), 5));
        Assert.False(await storage.SaveConfigurationAsync(await Configuration(engine, A, B, D), 7));
        Assert.Equal($"{A},{B},{D}", Members(await engine.LoadConfigurationAsync()));

        // A later change (index 9) is installed and saved with its index.
        Assert.True(await storage.SaveConfigurationAsync(await Configuration(engine, A, D), 9));
        Assert.Equal($"{A},{D}", Members(await engine.LoadConfigurationAsync()));
        Assert.Equal(new SavedReplicaSet([A, D], 9), ReplicaSetStorage.Load(_root), SavedEquality.Instance);

        // A set without this replica is installed (the engine must know it) but not saved.
        Assert.True(await storage.SaveConfigurationAsync(await Configuration(engine, B, D), 11));
        Assert.Equal(9, ReplicaSetStorage.Load(_root)!.Index);
    }

    [Fact]
    public void A_file_without_an_index_is_older_than_any_configuration_entry()
    {
        File.WriteAllLines(Path.Combine(_root, ReplicaSetStorage.FileName), [B.ToString(), A.ToString()]);
        Assert.Equal(new SavedReplicaSet([A, B], 0), ReplicaSetStorage.Load(_root), SavedEquality.Instance);
    }

    /// <summary>Writes a replica's log as a change would have left it: one committed configuration entry per set, at
    /// indices 1, 2, …, and nothing else.</summary>
    private async Task WriteLogAsync(string directory, NetAddress self, params NetAddress[][] sets)
    {
        using var scratch = new ReplicaSetStorage(Path.Combine(_root, "scratch"), self, givenOthers: true, NullLogger.Instance, 0);
        await using var wal = new WriteAheadLog(new WriteAheadLog.Options { Location = Path.Combine(directory, "wal") }, new NothingApplied(new DirectoryInfo(Path.Combine(_root, "scratch-snapshots"))));
        long last = 0;
        foreach (var set in sets)
        {
            last = await wal.AppendAsync(await Configuration(scratch, set));
        }

        await wal.CommitAsync(last);
        await wal.WaitForApplyAsync(last);
        await wal.FlushAsync();
    }

    private static async Task<string> RestartedSetAsync(NetAddress[] peers, string directory)
    {
        var restarted = await ReplicatedGms.StartAsync(new RaftGmsOptions { Id = peers.Length, Peers = peers, DataDirectory = directory }).WaitAsync(TimeSpan.FromSeconds(60));
        try
        {
            return string.Join(",", restarted.Replicas); // as soon as it has started
        }
        finally
        {
            await restarted.DisposeAsync();
        }
    }

    /// <summary>The restart of ReplicaSetChangeTests without the cluster: a fourth replica was added (log index 1), then
    /// another removed (index 2), and the replica saved the set of three; it is restarted with the stale list of four.
    /// Its log holds the removal too, or lost it (a restart drops the entries after the log's last checkpoint). Before,
    /// the engine installed the log's configuration entries while it started, racing with loading the saved set: a
    /// restarted replica reported the set of four (ReplicaSetChangeTests, 2 runs in 60).</summary>
    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task A_restarted_replica_starts_from_its_saved_set_when_its_log_has_nothing_newer(bool logHasTheRemoval)
    {
        var four = ReplicatedGms.FreeLoopbackAddresses(4);
        NetAddress[] three = [.. four.Where(p => p != four[1])];
        string directory = Path.Combine(_root, "r4");
        await WriteLogAsync(directory, four[3], logHasTheRemoval ? [four, three] : [four]);
        File.WriteAllLines(Path.Combine(directory, ReplicaSetStorage.FileName), [.. three.Select(a => a.ToString()), "index 2"]);

        Assert.Equal(string.Join(",", three.OrderBy(a => a.Port)), await RestartedSetAsync(four, directory));
    }

    /// <summary>The replica stopped after it applied the removal but before it saved it (the file says four, from the
    /// addition): the log's newer entry decides, and is saved.</summary>
    [Fact]
    public async Task A_restarted_replica_starts_from_its_log_when_the_log_has_a_newer_set()
    {
        var four = ReplicatedGms.FreeLoopbackAddresses(4);
        NetAddress[] three = [.. four.Where(p => p != four[1])];
        string directory = Path.Combine(_root, "r4");
        await WriteLogAsync(directory, four[3], four, three);
        File.WriteAllLines(Path.Combine(directory, ReplicaSetStorage.FileName), [.. four.Select(a => a.ToString()), "index 1"]);

        Assert.Equal(string.Join(",", three.OrderBy(a => a.Port)), await RestartedSetAsync(four, directory));
        Assert.Equal(new SavedReplicaSet([.. three.OrderBy(a => a.Ip).ThenBy(a => a.Port)], 2), ReplicaSetStorage.Load(directory), SavedEquality.Instance);
    }

    /// <summary>A state machine for writing a log in a test: it applies nothing and takes no snapshot.</summary>
    private sealed class NothingApplied(DirectoryInfo location) : SimpleStateMachine(location)
    {
        protected override ValueTask<bool> ApplyAsync(LogEntry entry, CancellationToken token) => ValueTask.FromResult(false);

        protected override ValueTask PersistAsync(IAsyncBinaryWriter writer, CancellationToken token) => ValueTask.CompletedTask;

        protected override ValueTask RestoreAsync(FileInfo snapshotFile, CancellationToken token) => ValueTask.CompletedTask;
    }

    private sealed class SavedEquality : IEqualityComparer<SavedReplicaSet?>
    {
        public static readonly SavedEquality Instance = new();

        public bool Equals(SavedReplicaSet? x, SavedReplicaSet? y)
            => x is not null && y is not null && x.Index == y.Index && x.Replicas.SequenceEqual(y.Replicas);

        public int GetHashCode(SavedReplicaSet obj) => obj.Index.GetHashCode();
    }
}
