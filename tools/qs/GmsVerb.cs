using System.CommandLine;
using System.Text.Json;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary><c>qs gms</c>: a standalone GMS (a node with an embedded GMS that joins no group) until Ctrl+C or --seconds;
/// with <c>--id N --peers a,b,c --data DIR</c>, replica N of a replicated GMS (<see cref="ReplicatedGms"/>).</summary>
internal static class GmsVerb
{
    public static Command Create(Option<bool> json)
    {
        var listen = Cli.Address("--listen", "Address the GMS listens on.", loopbackOnly: false, NetAddress.Loopback(47001));
        var pool = new Option<string>("--multicast") { Description = "First multicast address:port of the regions' pool.", DefaultValueFactory = _ => "239.255.1.0:47000" };
        pool.Validators.Add(r =>
        {
            string text = r.GetValueOrDefault<string>() ?? "";
            if (!IsMulticast(text))
            {
                r.AddError($"--multicast must be an IPv4 multicast address with a port (e.g. 239.255.1.0:47000); got '{text}'.");
            }
        });
        var seconds = Cli.Int("--seconds", "Stop after this many seconds; 0 runs until Ctrl+C", 0, 0, 30 * 86_400);
        var security = SecurityFlags.Create();
        var id = Cli.Int("--id", "With --peers: this replica's position in --peers, from 1", 1, 1, GmsOptions.MaxReplicas);
        var peers = AddressList("--peers", "Run as one replica of a replicated GMS (Raft): every replica's address, comma-separated, the same list on each; Raft uses TCP on the same ports.");
        var data = new Option<string>("--data") { Description = "With --peers: the directory for this replica's Raft log and snapshots (created if missing)." };
        var joinSet = new Option<bool>("--join") { Description = "With --peers: this replica is new to a running GMS; it asks the leader to add it to the replica set (--peers lists it with the running replicas)." };
        var election = Cli.Int("--election-timeout", "With --peers: the shortest Raft election timeout in ms (the longest is twice it; Raft requests time out at a third of it, 250 ms at the default)", 300, 30, 60_000);
        var leaveOnExit = new Option<bool>("--leave-on-exit") { Description = "With --peers: when stopping (Ctrl+C or --seconds), ask the leader to remove this replica from the replica set first." };
        var command = new Command("gms", "Run a standalone group membership service, or one replica of a replicated one.") { listen, pool, seconds, security.SecretFile, security.Mode, security.Cipher, id, peers, data, joinSet, leaveOnExit, election };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (!security.TryRead(parse, out var datagrams))
            {
                return Cli.BadOptions;
            }

            if (parse.GetValue(peers) is { Length: > 0 } replicas)
            {
                return await RunReplicaAsync(parse.GetValue(id), replicas, parse.GetValue(data), NetAddress.Parse(parse.GetValue(pool)!), datagrams, parse.GetValue(seconds),
                    parse.GetValue(joinSet), parse.GetValue(leaveOnExit), parse.GetValue(election), cancellationToken);
            }

            if (parse.GetResult(data) is { Implicit: false } || parse.GetResult(id) is { Implicit: false } || parse.GetValue(joinSet) || parse.GetValue(leaveOnExit) || parse.GetResult(election) is { Implicit: false })
            {
                await Console.Error.WriteLineAsync("--id, --data, --join, --leave-on-exit and --election-timeout go with --peers (a replica of a replicated GMS).");
                return Cli.BadOptions;
            }

            var options = new QuickSilverNodeOptions
            {
                Gms = parse.GetValue(listen),
                EmbeddedGms = true,
                GmsServer = new GmsOptions { MulticastPoolStart = NetAddress.Parse(parse.GetValue(pool)!) },
                Security = datagrams,
                LoggerFactory = QsLogging.Factory,
            };
            int limit = parse.GetValue(seconds);
            using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            if (limit > 0)
            {
                stop.CancelAfter(TimeSpan.FromSeconds(limit));
            }

            await using var node = await QuickSilverNode.StartAsync(options, stop.Token);
            bool asJson = parse.GetValue(json);
            Console.WriteLine(asJson
                ? JsonSerializer.Serialize(new { @event = "listening", gms = options.Gms.ToString(), multicast = options.GmsServer.MulticastPoolStart.ToString(), security = datagrams.Mode.ToString() })
                : $"gms listening on {options.Gms}, multicast pool from {options.GmsServer.MulticastPoolStart}, datagram security {datagrams.Mode}{(datagrams.Enabled ? $" ({datagrams.Cipher})" : "")}; Ctrl+C stops it");
            while (!stop.IsCancellationRequested)
            {
                await Task.Delay(TimeSpan.FromSeconds(5), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
                var snapshot = await node.GetGmsSnapshotAsync();
                var (nodes, groups, regions) = (snapshot.Nodes, snapshot.Groups, snapshot.Regions);
                Console.WriteLine(asJson
                    ? JsonSerializer.Serialize(new { @event = "snapshot", nodes = nodes - 1, groups, regions })
                    : $"gms: {nodes - 1} nodes, {groups} groups, {regions} regions");
            }

            return 0;
        });
        return command;
    }

    /// <summary>A replica of a replicated GMS until Ctrl+C or --seconds; prints its role every 5 seconds.</summary>
    private static async Task<int> RunReplicaAsync(int id, NetAddress[] peers, string? data, NetAddress pool, QuickSilver.Core.Security.DatagramSecurityOptions security,
        int limit, bool join, bool leaveOnExit, int electionMs, CancellationToken cancellationToken)
    {
        var options = new RaftGmsOptions
        {
            Id = id,
            Peers = peers,
            DataDirectory = data ?? "",
            Join = join,
            LowerElectionTimeout = TimeSpan.FromMilliseconds(electionMs),
            UpperElectionTimeout = TimeSpan.FromMilliseconds(electionMs * 2),
            RequestTimeout = TimeSpan.FromMilliseconds(electionMs == 300 ? 250 : electionMs / 3.0), // the default keeps RaftGmsOptions' 250 ms
        };
        try
        {
            options.Validate();
        }
        catch (ArgumentException e)
        {
            await Console.Error.WriteLineAsync(e.Message.Replace("RaftGmsOptions.DataDirectory", "--data", StringComparison.Ordinal)
                .Replace("RaftGmsOptions.Id", "--id", StringComparison.Ordinal).Replace("RaftGmsOptions.Peers", "--peers", StringComparison.Ordinal));
            return Cli.BadOptions;
        }

        using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        if (limit > 0)
        {
            stop.CancelAfter(TimeSpan.FromSeconds(limit));
        }

        await using var replica = await ReplicatedGms.StartAsync(options, new GmsOptions { MulticastPoolStart = pool }, security, QsLogging.Factory, stop.Token);
        Console.WriteLine($"gms replica {id} of {peers.Length} listening on {options.Self} (UDP for nodes, TCP for Raft{(security.ClusterSecret is not null ? " under TLS keyed by the secret" : "")}), data in {Path.GetFullPath(options.DataDirectory)}, pid {Environment.ProcessId}; Ctrl+C stops it");
        while (!stop.IsCancellationRequested)
        {
            await Task.Delay(TimeSpan.FromSeconds(1), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
            var status = await replica.GetStatusAsync();
            Console.WriteLine($"gms replica {id}: {(status.IsLeading ? "leader" : $"follower of {status.Leader?.ToString() ?? "nobody yet"}")}, epoch {status.Epoch}, {status.Nodes} nodes, {status.IdsIssued} ids issued, {status.Groups} groups, {status.CommandsApplied} commands, {status.FailuresDetected} failures detected, {status.Replicas} replicas, term {status.Term}, lag {status.FollowerLag}, reads {status.ReadsServed} served {status.ReadsRedirected} redirected, raft {(status.RaftAuthenticated ? $"tls, {status.RaftPeersRefused} peers refused" : "plain tcp")}");
        }

        if (leaveOnExit)
        {
            bool left = await replica.LeaveReplicaSetAsync(TimeSpan.FromSeconds(10));
            Console.WriteLine(left ? $"gms replica {id}: left the replica set" : $"gms replica {id}: the leader did not confirm leaving the replica set within 10 s");
        }

        return 0;
    }

    /// <summary>A comma-separated list of unicast "a.b.c.d:port" addresses, each once, at most
    /// <see cref="GmsOptions.MaxReplicas"/>.</summary>
    internal static Option<NetAddress[]> AddressList(string name, string description) => new(name)
    {
        Description = description,
        CustomParser = result =>
        {
            string text = result.Tokens.Count > 0 ? result.Tokens[0].Value : "";
            try
            {
                var list = text.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries).Select(NetAddress.Parse).ToArray();
                GmsOptions.ValidateReplicas(list, name);
                if (list.Length == 0)
                {
                    result.AddError($"{name} needs at least one address (e.g. 127.0.0.1:47001,127.0.0.1:47002,127.0.0.1:47003).");
                }

                return list;
            }
            catch (Exception e) when (e is FormatException or ArgumentException)
            {
                result.AddError($"{name}: {e.Message}");
                return [];
            }
        },
    };

    private static bool IsMulticast(string text)
    {
        try
        {
            return NetAddress.Parse(text) is { IsMulticast: true, Port: > 0 };
        }
        catch (FormatException)
        {
            return false;
        }
    }
}
