using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;

namespace QuickSilver.Benchmarks;

/// <summary>
/// The replicated GMS end to end over loopback, in this process (not BenchmarkDotNet; docs/membership.md, "Replicated
/// GMS"):
/// <code>
/// dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- gmsfailover --kills 20
/// dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- gmsviewchange --joins 20 --groups 10000 --repeats 3
/// </code>
/// <c>gmsfailover</c>: three replicas and one node; each round stops the leader (in-process: its Raft cluster stops and
/// its core and socket close, as a crash would look to the others) and measures the time until another replica leads and
/// until the node's join of a new group completes through it; the stopped replica then restarts from its directory.
/// <c>gmsviewchange</c>: the time from <c>JoinGroupAsync</c> to the node's view of the group, one new group at a time,
/// then for one node joining <c>--groups</c> groups at once, and for it leaving them, with the single embedded GMS and with
/// three replicas, side by side.
/// </summary>
internal static class ReplicatedGmsBench
{
    public static async Task<int> RunAsync(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "";
        s_secret = args.Contains("--raft-tls") ? QuickSilver.Core.Security.DatagramSecurityOptions.GenerateSecret() : null;
        Console.WriteLine($"replica traffic: {(s_secret is null ? "plain TCP" : "TLS keyed by a cluster secret (--raft-tls)")}");
        int Arg(string name, int fallback)
        {
            int i = Array.IndexOf(args, name);
            return i >= 0 && i + 1 < args.Length ? int.Parse(args[i + 1], CultureInfo.InvariantCulture) : fallback;
        }

        return mode switch
        {
            "gmsfailover" => await FailoverAsync(Arg("--kills", 20)),
            "gmsviewchange" => await ViewChangeAsync(Arg("--joins", 20), Arg("--groups", 10_000), Arg("--repeats", 3)),
            _ => Usage(),
        };
    }

    private static int Usage()
    {
        Console.Error.WriteLine("usage: gmsfailover [--kills N] [--raft-tls] | gmsviewchange [--joins N] [--groups N] [--repeats N] [--raft-tls]");
        return 2;
    }

    /// <summary>The defaults, except room for one node in 10,000 groups plus a few (the limits are 8,192 groups per node
    /// and a burst of 10,000 requests).</summary>
    private static readonly GmsOptions Gms = new()
    {
        MaxGroupsPerNode = 32_768,
        RequestBurst = 100_000,
        MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
    };

    /// <summary>With --raft-tls: the replicas' Raft traffic is TLS keyed by this secret (docs/membership.md, "Replica traffic").</summary>
    private static byte[]? s_secret;

    private static Task<ReplicatedGms> Replica(NetAddress[] peers, int id, string root)
        => ReplicatedGms.StartAsync(new RaftGmsOptions { Id = id, Peers = peers, DataDirectory = Path.Combine(root, $"r{id}"), ClusterSecret = s_secret }, Gms);

    private static async Task<int> LeaderIndex(IReadOnlyList<ReplicatedGms?> replicas, TimeSpan limit)
    {
        var clock = Stopwatch.StartNew();
        while (clock.Elapsed < limit)
        {
            for (int i = 0; i < replicas.Count; i++)
            {
                if (replicas[i] is { } r && (await r.GetStatusAsync()).IsLeading)
                {
                    return i;
                }
            }

            await Task.Delay(2);
        }

        throw new TimeoutException($"No replica led within {limit}.");
    }

    private static async Task<int> FailoverAsync(int kills)
    {
        string root = Path.Combine(Path.GetTempPath(), $"qs-gmsfailover-{Guid.NewGuid():N}");
        var peers = ReplicatedGms.FreeLoopbackAddresses(3);
        var replicas = new ReplicatedGms?[3];
        for (int i = 0; i < 3; i++)
        {
            replicas[i] = await Replica(peers, i + 1, root);
        }

        await LeaderIndex(replicas, TimeSpan.FromSeconds(30));
        await using var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { GmsReplicas = peers });
        await node.JoinGroupAsync("base");
        var toLeader = new List<double>();
        var toJoin = new List<double>();
        try
        {
            for (int k = 0; k < kills; k++)
            {
                int leader = await LeaderIndex(replicas, TimeSpan.FromSeconds(30));
                var stopped = replicas[leader]!;
                replicas[leader] = null;
                var clock = Stopwatch.StartNew();
                var dispose = stopped.DisposeAsync().AsTask();
                var join = node.JoinGroupAsync($"after-kill-{k}");
                await LeaderIndex(replicas, TimeSpan.FromSeconds(30));
                toLeader.Add(clock.Elapsed.TotalMilliseconds);
                await join.WaitAsync(TimeSpan.FromSeconds(60));
                toJoin.Add(clock.Elapsed.TotalMilliseconds);
                await dispose;
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"kill {k + 1}: new leader after {toLeader[^1]:F0} ms, join through it after {toJoin[^1]:F0} ms"));
                replicas[leader] = await Replica(peers, leader + 1, root);
                await Task.Delay(1000); // the restarted replica catches up before the next round
            }
        }
        finally
        {
            foreach (var r in replicas)
            {
                if (r is not null)
                {
                    await r.DisposeAsync();
                }
            }

            Directory.Delete(root, recursive: true);
        }

        Console.WriteLine($"failover over {kills} leader stops (ms): new leader {Summary(toLeader)}; a join through the new leader {Summary(toJoin)}");
        return 0;
    }

    private static async Task<int> ViewChangeAsync(int joins, int groups, int repeats)
    {
        foreach (bool replicated in new[] { false, true })
        {
            string root = Path.Combine(Path.GetTempPath(), $"qs-gmsview-{Guid.NewGuid():N}");
            var peers = ReplicatedGms.FreeLoopbackAddresses(3);
            var owned = new List<IAsyncDisposable>();
            try
            {
                QuickSilverNodeOptions nodeOptions;
                if (replicated)
                {
                    for (int i = 0; i < 3; i++)
                    {
                        owned.Add(await Replica(peers, i + 1, root));
                    }

                    await LeaderIndex(owned.Cast<ReplicatedGms>().ToList(), TimeSpan.FromSeconds(30));
                    nodeOptions = new QuickSilverNodeOptions { GmsReplicas = peers };
                }
                else
                {
                    owned.Add(await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { Gms = peers[0], EmbeddedGms = true, GmsServer = Gms }));
                    nodeOptions = new QuickSilverNodeOptions { Gms = peers[0] };
                }

                var node = await QuickSilverNode.StartAsync(nodeOptions);
                owned.Add(node);
                string name = replicated ? "3 replicas" : "1 GMS";
                var single = new List<double>();
                for (int j = 0; j < joins; j++)
                {
                    var clock = Stopwatch.StartNew();
                    await node.JoinGroupAsync($"one-{j}");
                    single.Add(clock.Elapsed.TotalMilliseconds);
                }

                Console.WriteLine($"{name}: join of one new group (ms) {Summary(single)}");
                var many = new List<double>();
                var leave = new List<double>();
                for (int r = 0; r < repeats; r++)
                {
                    var clock = Stopwatch.StartNew();
                    var joined = await Task.WhenAll(Enumerable.Range(0, groups).Select(g => node.JoinGroupAsync($"many-{r}-{g}")));
                    many.Add(clock.Elapsed.TotalMilliseconds);
                    clock.Restart();
                    await Task.WhenAll(joined.Select(g => g.LeaveAsync()));
                    while (await node.Core.InvokeAsync(() => node.Stack.Get<MembershipLayer>().Client.Groups.Count()) > joins)
                    {
                        await Task.Delay(1);
                    }

                    leave.Add(clock.Elapsed.TotalMilliseconds); // until the node's views no longer list any of them
                }

                Console.WriteLine($"{name}: one node joins {groups:N0} groups at once (ms) {Summary(many)}; leaves them {Summary(leave)}");
            }
            finally
            {
                foreach (var o in Enumerable.Reverse(owned))
                {
                    await o.DisposeAsync();
                }

                if (Directory.Exists(root))
                {
                    Directory.Delete(root, recursive: true);
                }
            }
        }

        return 0;
    }

    private static string Summary(List<double> values)
    {
        if (values.Count == 0)
        {
            return "(none)";
        }

        var sorted = values.Order().ToArray();
        double P(double q) => sorted[Math.Min(sorted.Length - 1, (int)Math.Ceiling(q * sorted.Length) - 1)];
        return string.Create(CultureInfo.InvariantCulture, $"n={sorted.Length} min {sorted[0]:F0} median {P(0.5):F0} p90 {P(0.9):F0} max {sorted[^1]:F0}");
    }
}
