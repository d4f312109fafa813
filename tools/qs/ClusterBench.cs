using System.Buffers.Binary;
using System.CommandLine;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text.Json;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// <c>qs cluster-bench</c>: aggregate cross-island messages per second through a clustered gateway with 1, 2, …
/// data nodes, in this process on loopback. g1 (island 1, unclustered) is the root of every session; g2 (island 2) is
/// a control node with N data nodes, each its own loop thread and UDP socket. S sessions (one multicast group each in
/// island 1) are joined at g2, so they spread over the data nodes; one source thread sends numbered messages to every
/// session in turn as fast as it can, one receiver thread per session counts distinct messages on the translated
/// group. Rate = all distinct messages received / time from the first to the last received. On a machine with few
/// cores every thread (source, receivers, g1, g2's data nodes) competes for them: the figure says what the machine
/// allows, not what the design scales to.
/// </summary>
internal static class ClusterBench
{
    private static readonly JsonSerializerOptions WebJson = new(JsonSerializerDefaults.Web);

    public static Command Create(Option<bool> json)
    {
        var nodes = new Option<int[]>("--nodes") { Description = "Data-node counts to run, one run each", DefaultValueFactory = _ => [1, 2], AllowMultipleArgumentsPerToken = true };
        var sessions = Cli.Int("--sessions", "Sessions (spread over the data nodes)", 4, 1, 32);
        var count = Cli.Int("--count", "Messages per session per run", 20_000, 100, 10_000_000);
        var size = Cli.Int("--size", "Message size in bytes", 1000, 4, 60_000);
        var basePort = Cli.Int("--port-base", "First UDP port used (100 ports)", 45_700, 1024, 65_000);
        var sealedOption = new Option<bool>("--sealed") { Description = "Give g1, g2 and every data node one random peering secret: bulk data channels authenticate and seal every frame (docs/federation.md, \"Peering authentication\")" };
        var command = new Command("cluster-bench", "Measure cross-island msgs/s through a clustered gateway with 1, 2, … data nodes on loopback.") { nodes, sessions, count, size, basePort, sealedOption };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (parse.GetValue(nodes)!.Any(n => n < 1 || n > 8))
            {
                await Console.Error.WriteLineAsync("--nodes: each count must be between 1 and 8.");
                return Cli.BadOptions;
            }

            var results = new List<object>();
            int run = 0;
            foreach (int n in parse.GetValue(nodes)!)
            {
                var r = await RunAsync(n, parse.GetValue(sessions), parse.GetValue(count), parse.GetValue(size), parse.GetValue(basePort) + 40 * (run++ % 2),
                    parse.GetValue(sealedOption) ? System.Security.Cryptography.RandomNumberGenerator.GetBytes(32) : null, cancellationToken);
                results.Add(new { nodes = n, r.Sent, r.Received, r.Seconds, r.Rate, r.PerNode, r.Path });
                if (!parse.GetValue(json))
                {
                    Console.WriteLine($"{n} data node(s): {r.Rate,10:N0} msg/s across {parse.GetValue(sessions)} sessions ({r.Received:N0}/{r.Sent:N0} received); delivered per data node: {string.Join(", ", r.PerNode.Select(p => $"{p.Key}: {p.Value:N0}"))}; "
                        + $"path: g1 took {r.Path.TakenByG1:N0} from its island, queued {r.Path.ChannelQueued:N0} on bulk data channels, dropped {r.Path.ChannelDropped:N0}; data nodes received {r.Path.ReceivedByDataNodes:N0}");
                }
            }

            if (parse.GetValue(json))
            {
                Console.WriteLine(JsonSerializer.Serialize(results, WebJson));
            }

            return 0;
        });
        return command;
    }

    private sealed record Result(int Sent, int Received, double Seconds, double Rate, Dictionary<uint, long> PerNode, Path Path);

    /// <summary>Counts along the path: packets g1 took from its island, queued on and dropped at its bulk data channels,
    /// and DATA frames the data nodes received.</summary>
    private sealed record Path(long TakenByG1, long ChannelQueued, long ChannelDropped, long ReceivedByDataNodes);

    private static async Task<Result> RunAsync(int nodeCount, int sessionCount, int count, int size, int ports, byte[]? peeringSecret, CancellationToken cancellationToken)
    {
        var loopback = new IPEndPoint(IPAddress.Loopback, 0);
        var cluster = new ClusterOptions { DataNodes = [.. Enumerable.Range(201, nodeCount).Select(i => (uint)i)] };
        var g1Address = FreeEndpoint();
        var g2Address = FreeEndpoint();
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.91.0"), PortBase = ports, PoolSize = 4 });
        var islandTwo = new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.92.0"), PortBase = ports + 4, PoolSize = 32 };
        using var n2 = new MulticastNativeNet(islandTwo);
        var nodeNets = Enumerable.Range(0, nodeCount).Select(_ => new MulticastNativeNet(islandTwo)).ToList();
        var peers = new Dictionary<GatewayId, IPEndPoint> { [new GatewayId(1)] = g1Address };
        var dataNodes = cluster.DataNodes.Select((id, i) => new DataNodeRuntime(id, new GatewayId(2), cluster, nodeNets[i], loopback, g2Address, peers, [], peeringSecret: peeringSecret)).ToList();
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(2), Island = new IslandId(2), PeeringSecret = peeringSecret }, n2, g2Address,
            [new PeerConfig(new GatewayId(1), g1Address, LinkCosts.Default)], (cluster, dataNodes.ToDictionary(d => d.Node.Id, d => d.ListenEndpoint)));
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1), PeeringSecret = peeringSecret }, n1, g1Address,
            [new PeerConfig(new GatewayId(2), g2Address, LinkCosts.Default)], null, [.. dataNodes.Select(d => new DataNodeAddress(new GatewayId(2), d.Node.Id, d.ListenEndpoint))]);
        try
        {
            dataNodes.ForEach(d => d.Start());
            g1.Start();
            g2.Start();
            var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(15);
            while (DateTime.UtcNow < deadline && !((await g2.SnapshotAsync()).Routes.Any(r => r.Destination == 1) && await g2.InvokeAsync(g => g.Cluster!.Load.Count) == nodeCount))
            {
                await Task.Delay(50, cancellationToken);
            }

            var natives = Enumerable.Range(0, sessionCount).Select(i => new IPEndPoint(IPAddress.Parse($"239.255.93.{i + 1}"), ports + 50 + i)).ToArray();
            var translated = new IPEndPoint[sessionCount];
            for (int i = 0; i < sessionCount; i++)
            {
                var session = SessionName.Parse($"bfed://1/{natives[i].Address}/{natives[i].Port}");
                var answer = new TaskCompletionSource<MediatorReply>();
                g2.Post(() => g2.Gateway.RecvdJoinRequest(new JoinRequest(session, r => answer.TrySetResult(r))));
                var reply = await answer.Task.WaitAsync(TimeSpan.FromSeconds(10), cancellationToken);
                translated[i] = reply.Kind == MediatorReplyKind.Translation ? IPEndPoint.Parse(reply.Addresses[0]) : throw new InvalidOperationException($"join failed: {reply.Reason}");
            }

            deadline = DateTime.UtcNow + TimeSpan.FromSeconds(15);
            while (DateTime.UtcNow < deadline && (await g1.SnapshotAsync()).Sessions.Count < sessionCount)
            {
                await Task.Delay(50, cancellationToken);
            }

            await Task.Delay(500, cancellationToken); // the DATA_ENDPOINTs reach g1
            var (received, seconds) = Blast(natives, translated, size, count);
            var perNode = new Dictionary<uint, long>();
            foreach (var d in dataNodes)
            {
                perNode[d.Node.Id] = await d.InvokeAsync(x => x.Counters.DataDelivered);
            }

            int sent = count * sessionCount;
            // Where messages were lost: g1's island socket (taken < sent), g1's bulk channel queue (dropped), the data nodes.
            long taken = (await g1.SnapshotAsync()).Counters.GetValueOrDefault("DataFromIsland");
            var channel = await g1.BulkCountersAsync();
            long atNodes = 0;
            foreach (var d in dataNodes)
            {
                atNodes += await d.InvokeAsync(x => x.Counters.DataReceived);
            }

            return new Result(sent, received, seconds, seconds > 0 ? (received - 1) / seconds : 0, perNode, new Path(taken, channel.Sent, channel.Dropped, atNodes));
        }
        finally
        {
            await g1.DisposeAsync();
            await g2.DisposeAsync();
            foreach (var d in dataNodes)
            {
                await d.DisposeAsync();
            }

            nodeNets.ForEach(x => x.Dispose());
        }
    }

    private static IPEndPoint FreeEndpoint()
    {
        using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return (IPEndPoint)probe.LocalEndPoint!;
    }

    private static (int Received, double Seconds) Blast(IPEndPoint[] natives, IPEndPoint[] translated, int size, int count)
    {
        int sessions = natives.Length;
        long first = long.MaxValue, last = 0;
        int total = 0;
        var threads = new List<Thread>();
        var sockets = new List<Socket>();
        for (int s = 0; s < sessions; s++)
        {
            var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
            receiver.ReceiveBufferSize = 8 << 20;
            receiver.Bind(translated[s]);
            receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(translated[s].Address, IPAddress.Loopback));
            receiver.ReceiveTimeout = 1000;
            sockets.Add(receiver);
            var thread = new Thread(() =>
            {
                var seen = new bool[count];
                int got = 0;
                var buffer = new byte[65_536];
                while (got < count)
                {
                    int n;
                    try
                    {
                        n = receiver.Receive(buffer);
                    }
                    catch (SocketException)
                    {
                        break; // a second of silence: the run is over
                    }

                    int i = BinaryPrimitives.ReadInt32LittleEndian(buffer);
                    if (n == size && i >= 0 && i < count && !seen[i])
                    {
                        seen[i] = true;
                        got++;
                        long now = Stopwatch.GetTimestamp();
                        InterlockedMin(ref first, now);
                        InterlockedMax(ref last, now);
                    }
                }

                Interlocked.Add(ref total, got);
            }) { IsBackground = true };
            threads.Add(thread);
            thread.Start();
        }

        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        sender.SendBufferSize = 8 << 20;
        var packet = new byte[size];
        for (int i = 0; i < count; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(packet, i);
            for (int s = 0; s < sessions; s++)
            {
                sender.SendTo(packet, natives[s]);
            }
        }

        threads.ForEach(t => t.Join(TimeSpan.FromSeconds(60)));
        sockets.ForEach(s => s.Dispose());
        return (total, total > 1 ? Stopwatch.GetElapsedTime(first, last).TotalSeconds : 0);
    }

    private static void InterlockedMin(ref long target, long value)
    {
        long seen;
        while (value < (seen = Interlocked.Read(ref target)) && Interlocked.CompareExchange(ref target, value, seen) != seen)
        {
        }
    }

    private static void InterlockedMax(ref long target, long value)
    {
        long seen;
        while (value > (seen = Interlocked.Read(ref target)) && Interlocked.CompareExchange(ref target, value, seen) != seen)
        {
        }
    }
}
