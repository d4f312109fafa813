using System.Diagnostics;
using System.Globalization;
using QuickSilver.Core.Io;

namespace QuickSilver.Samples.QuickStart;

/// <summary>
/// The replicated GMS of <c>--gms-replicas N</c>: N replica processes on loopback, each with its Raft log and snapshots in
/// a directory of a temporary folder that is deleted at the end. Empty (no processes) for the default embedded GMS.
/// </summary>
internal sealed class ReplicaSet : IAsyncDisposable
{
    private readonly List<GmsReplicaProcess> _replicas;
    private readonly string? _root;

    private ReplicaSet(List<GmsReplicaProcess> replicas, string? root)
    {
        _replicas = replicas;
        _root = root;
        Addresses = [.. replicas.Select(r => r.Address)];
    }

    public int Count => _replicas.Count;

    /// <summary>The replicas' GMS addresses, in replica order (what nodes are given).</summary>
    public IReadOnlyList<NetAddress> Addresses { get; }

    /// <summary>The replica whose latest status line says it leads, if any.</summary>
    public GmsReplicaProcess? Leader => _replicas.FirstOrDefault(r => !r.HasExited && r.IsLeading);

    /// <summary>Starts <paramref name="count"/> replicas (none for 0) and waits until one leads.</summary>
    public static async Task<ReplicaSet> StartAsync(int count, TimeSpan lifetime, byte[] secret, TimeSpan timeout)
    {
        if (count == 0)
        {
            return new ReplicaSet([], null);
        }

        var root = Directory.CreateTempSubdirectory("quickstart-gms-").FullName;
        var peers = ReplicatedGms.FreeLoopbackAddresses(count); // free for UDP (the GMS) and TCP (Raft)
        var pool = Demo.RandomPool();
        var set = new ReplicaSet([.. Enumerable.Range(1, count).Select(id =>
            GmsReplicaProcess.Start(id, peers, Path.Combine(root, string.Create(CultureInfo.InvariantCulture, $"r{id}")), pool, lifetime, secret))], root);
        var clock = Stopwatch.StartNew();
        while (set.Leader is null)
        {
            if (clock.Elapsed > timeout || set._replicas.All(r => r.HasExited))
            {
                await set.DisposeAsync();
                throw new InvalidOperationException($"no GMS replica led within {timeout.TotalSeconds:F0} s");
            }

            await Task.Delay(50);
        }

        return set;
    }

    public string Describe() => string.Join(", ", _replicas.Select(r => $"{r.Name} at {r.Address} (pid {r.ProcessId})")) + $", Raft logs under {_root}";

    /// <summary>After <paramref name="delay"/>, kills the leading replica's process and reports how long the others took
    /// to elect a new leader (as their status lines, read every 200 ms, show it).</summary>
    public async Task KillLeaderAfterAsync(TimeSpan delay, Action<string> say)
    {
        await Task.Delay(delay);
        if (Leader is not { } leader)
        {
            say("GMS failover: no replica led at the time of the kill; nothing killed");
            return;
        }

        leader.Kill();
        var clock = Stopwatch.StartNew();
        say($"GMS failover: killed the leader {leader.Name} (pid {leader.ProcessId}), {delay.TotalMilliseconds:F0} ms after publishing started");
        while (Leader is null && clock.Elapsed < TimeSpan.FromSeconds(15))
        {
            await Task.Delay(20);
        }

        say(Leader is { } next
            ? $"GMS failover: {next.Name} leads, seen {clock.ElapsedMilliseconds} ms after the kill (the data path never waited for it)"
            : "GMS failover: no new leader within 15 s");
    }

    public async ValueTask DisposeAsync()
    {
        await Task.Run(() => Parallel.ForEach(_replicas, r => r.Dispose()));
        if (_root is not null)
        {
            try
            {
                Directory.Delete(_root, recursive: true);
            }
            catch (IOException)
            {
                // A replica still closing its log: the temporary folder stays.
            }
        }
    }
}
