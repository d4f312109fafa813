using System.Buffers.Binary;
using System.CommandLine;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text.Json;
using Microsoft.Extensions.Logging;
using QuickSilver.Core.Security;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// The federation gateway's commands (docs/federation.md): <c>qs gateway</c> runs one gateway with an IP-multicast
/// island and TCP peers; <c>qs sessions</c> asks a running gateway's admin endpoint for its sessions and routes;
/// <c>qs island-send</c> and <c>qs island-recv</c> are a source and a client of a multicast island (the two-island
/// sample); <c>qs gateway-bench</c> measures cross-island against island-local messages per second.
/// </summary>
internal static class GatewayVerbs
{
    private static readonly JsonSerializerOptions WebJson = new(JsonSerializerDefaults.Web);

    public static IEnumerable<Command> Create(Option<bool> json)
    {
        yield return Gateway();
        yield return Sessions(json);
        yield return IslandSend();
        yield return IslandRecv();
        yield return GatewayBench.Create(json);
        yield return CoreCastTransitVerb.Create(json);
        yield return ClusterBench.Create(json);
        yield return NatsBench.Create(json);
    }

    internal static Option<IPEndPoint> Endpoint(string name, string description, bool multicast, bool loopbackOnly = false)
        => new(name)
        {
            Description = description,
            CustomParser = result =>
            {
                string text = result.Tokens.Count > 0 ? result.Tokens[0].Value : "";
                if (!IPEndPoint.TryParse(text, out var endpoint) || endpoint.AddressFamily != AddressFamily.InterNetwork || endpoint.Port == 0)
                {
                    result.AddError($"{name} must be an IPv4 address with a non-zero port (e.g. {(multicast ? "239.255.0.1:40000" : "127.0.0.1:47101")}); got '{text}'.");
                    return null;
                }

                bool isMulticast = (endpoint.Address.GetAddressBytes()[0] & 0xF0) == 0xE0;
                if (isMulticast != multicast)
                {
                    result.AddError($"{name} must be {(multicast ? "an IPv4 multicast group" : "a unicast address")}; got '{text}'.");
                }
                else if (loopbackOnly && !IPAddress.IsLoopback(endpoint.Address))
                {
                    result.AddError($"{name} must be a loopback address; got '{text}'.");
                }

                return endpoint;
            },
        };

    private static Option<uint> Number(string name, string description)
        => new(name)
        {
            Description = description + " (1..4294967295)",
            Required = true,
            CustomParser = result =>
            {
                string text = result.Tokens.Count > 0 ? result.Tokens[0].Value : "";
                if (!uint.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out uint v) || v == 0)
                {
                    result.AddError($"{name} must be a number between 1 and 4294967295; got '{text}'.");
                }

                return v;
            },
        };

    private static Command Gateway()
    {
        var id = Number("--id", "This gateway's number, unique in the federation");
        var island = Number("--island", "The island (broadcast network) this gateway belongs to");
        var listen = Endpoint("--listen", "TCP address the gateway accepts peering links (and peers' bulk data channels) on; UDP on the same address", multicast: false);
        listen.Required = true;
        var peers = new Option<PeerConfig[]>("--peer")
        {
            Description = "A peer: <gateway>@<ip>:<port>[,<standby ip>:<port>][/hops,latency,bandwidth]; repeat for each. Both ends list each other; the lower number dials (a peer with a standby control node: each address in turn).",
            AllowMultipleArgumentsPerToken = false,
            DefaultValueFactory = _ => [],
            CustomParser = result =>
            {
                var list = new List<PeerConfig>();
                foreach (var token in result.Tokens)
                {
                    try
                    {
                        list.Add(PeerConfig.Parse(token.Value));
                    }
                    catch (FormatException e)
                    {
                        result.AddError($"--peer: {e.Message}");
                    }
                }

                return [.. list];
            },
        };
        var admin = Endpoint("--admin", "Loopback TCP address of the admin endpoint qs sessions talks to", multicast: false, loopbackOnly: true);
        var mediator = Endpoint("--mediator", "The island's well-known mediator group clients send JOIN to", multicast: true);
        var poolBase = new Option<string>("--pool-base") { Description = "First multicast group of the island's channel pool", DefaultValueFactory = _ => "239.255.10.0" };
        var poolSize = Cli.Int("--pool-size", "Multicast groups in the channel pool", 64, 1, 4096);
        var portBase = Cli.Int("--port-base", "UDP port of the pool's first group (channel k: port base + k)", 41_000, 1024, 65_000);
        var keepAlive = Cli.Int("--keepalive-seconds", "Send KEEPALIVE on a link silent for this long", 10, 1, 3600);
        var hold = Cli.Int("--hold-seconds", "Declare a peer dead after this long without a frame", 30, 2, 86_400);
        var refresh = Cli.Int("--refresh-seconds", "Period of refresh JOINs (the seed's example: 30)", 30, 1, 3600);
        var joinHold = Cli.Int("--join-hold-seconds", "Drop tree state not refreshed for this long", 95, 2, 86_400);
        var noTransit = new Option<bool>("--no-transit") { Description = "Advertise only this island's gateways to external peers (a policy filter)" };
        var seconds = Cli.Int("--seconds", "Stop after this many seconds (0: until Ctrl-C)", 0, 0, 30 * 86_400);
        var fanout = Endpoint("--fanout", "Make the island a TCP fan-out island (no multicast): members connect here", multicast: false, loopbackOnly: true);
        var qsmGms = Cli.Address("--qsm-gms", "Make the island a set of QuickSilver groups: the gateway's node uses the GMS at this address", loopbackOnly: false);
        var qsmEmbedded = new Option<bool>("--qsm-embedded-gms") { Description = "With --qsm-gms: run that GMS inside the gateway's node" };
        var clusterNodes = AddressList("--cluster-node", "Make this gateway a clustered gateway's control node: one of its data nodes, <node>@<ip>:<port> (the data node's --listen); repeat for each", DataNodeAddress.ParseOwn);
        var peerDataNodes = AddressList("--peer-data-node", "A data node of a clustered peer gateway, <gateway>:<node>@<ip>:<port>; repeat for each", DataNodeAddress.Parse);
        var dataNode = new Option<bool>("--data-node") { Description = "Run a data node of a clustered gateway instead of a gateway: --id is the node's number, --gateway and --island its gateway's, --listen its address (UDP for control frames and real-time DATA, TCP for bulk data channels), --control the control node's --listen, --peer the peer gateways" };
        var control = Endpoint("--control", "With --data-node: the control node's peering address (it takes HEARTBEATs there, over UDP)", multicast: false);
        var clusterGateway = new Option<uint>("--gateway") { Description = "With --data-node: the number of the gateway this data node belongs to" };
        var otherControl = Endpoint("--other-control", "Clustered gateway with a standby control node: on a control node, the other control node's --listen (LEAD frames go there over UDP); give the same --id, --cluster-node list and secret to both", multicast: false);
        var standby = new Option<bool>("--standby") { Description = "With --other-control: this control node starts as the standby (no peering, no mediator answers) and takes over when the primary falls silent" };
        var standbyControl = Endpoint("--standby-control", "With --data-node: the gateway's second control node's --listen (HEARTBEATs go to both; the higher term leads)", multicast: false);
        var takeoverMs = Cli.Int("--takeover-ms", "Clustered gateway with a standby: a passive control node takes over after this long without a sign of the leader (more than twice --heartbeat-ms)", 3000, 30, 600_000);
        var heartbeatMs = Cli.Int("--heartbeat-ms", "Clustered gateway: a data node sends HEARTBEAT this often", 1000, 10, 60_000);
        var heartbeatTimeoutMs = Cli.Int("--heartbeat-timeout-ms", "Clustered gateway: the control node moves a silent data node's sessions after this long", 3000, 20, 600_000);
        var clusterSecretFile = new Option<string?>("--cluster-secret-file")
        {
            Description = "Clustered gateway (control node and every data node): a file holding the secret they share, base64 of at least 32 random bytes "
                          + "(e.g. 'head -c 32 /dev/urandom | base64 > cluster-secret'); control↔data frames then carry an HMAC-SHA256 tag, and forged or replayed ones are dropped",
        };
        var peeringSecretFile = new Option<string?>("--peering-secret-file")
        {
            Description = "A file holding the secret every gateway of the federation shares, base64 of at least 32 random bytes "
                          + "(e.g. 'head -c 32 /dev/urandom | base64 > peering-secret'); peering links then authenticate both ends and seal every frame (AEGIS-128L), "
                          + "and a peer without the secret never peers. On a clustered gateway give it to the control node and every data node: "
                          + "bulk data channels then authenticate and seal too, and real-time datagrams between gateways are sealed",
        };
        var command = new Command("gateway", "Run a federation gateway (an IP-multicast island on loopback, TCP peering links, an admin endpoint), a clustered gateway's control node (--cluster-node) or one of its data nodes (--data-node).")
        {
            id, island, listen, peers, admin, mediator, poolBase, poolSize, portBase, keepAlive, hold, refresh, joinHold, noTransit, seconds, fanout, qsmGms, qsmEmbedded,
            clusterNodes, peerDataNodes, dataNode, control, clusterGateway, heartbeatMs, heartbeatTimeoutMs, clusterSecretFile, peeringSecretFile,
            otherControl, standby, standbyControl, takeoverMs,
        };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (!IPAddress.TryParse(parse.GetValue(poolBase), out var pool))
            {
                await Console.Error.WriteLineAsync($"--pool-base must be an IPv4 multicast address; got '{parse.GetValue(poolBase)}'.");
                return Cli.BadOptions;
            }

            var islandId = new IslandId(parse.GetValue(island));
            var options = new GatewayOptions
            {
                Gateway = new GatewayId(parse.GetValue(id)),
                Island = islandId,
                KeepAliveInterval = TimeSpan.FromSeconds(parse.GetValue(keepAlive)),
                HoldTime = TimeSpan.FromSeconds(parse.GetValue(hold)),
                JoinRefreshInterval = TimeSpan.FromSeconds(parse.GetValue(refresh)),
                JoinHoldTime = TimeSpan.FromSeconds(parse.GetValue(joinHold)),
                Policy = parse.GetValue(noTransit) ? new NoTransitPolicy(islandId) : OpenPolicy.Instance,
            };
            var nativeOptions = new MulticastNativeNetOptions { PoolBase = pool, PoolSize = parse.GetValue(poolSize), PortBase = parse.GetValue(portBase), Mediator = parse.GetValue(mediator) };
            var (clusterSecret, clusterSecretError) = await ReadSecretFileAsync(parse.GetValue(clusterSecretFile), "--cluster-secret-file", cancellationToken);
            var (peeringSecret, peeringSecretError) = await ReadSecretFileAsync(parse.GetValue(peeringSecretFile), "--peering-secret-file", cancellationToken);
            if ((clusterSecretError ?? peeringSecretError) is { } secretError)
            {
                await Console.Error.WriteLineAsync(secretError);
                return Cli.BadOptions;
            }

            bool isDataNode = parse.GetValue(dataNode);
            if (parse.GetValue(standby) && parse.GetValue(otherControl) is null)
            {
                await Console.Error.WriteLineAsync("--standby: a standby control node needs --other-control (the primary's --listen).");
                return Cli.BadOptions;
            }

            if (isDataNode ? parse.GetValue(otherControl) is not null || parse.GetValue(standby) : parse.GetValue(standbyControl) is not null)
            {
                await Console.Error.WriteLineAsync(isDataNode ? $"--{(parse.GetValue(standby) ? "standby" : "other-control")}: a data node takes --standby-control (its gateway's second control node), not a control node's options."
                    : "--standby-control: only a data node (--data-node) takes it; a control node names the other one with --other-control.");
                return Cli.BadOptions;
            }

            if (!isDataNode && parse.GetValue(otherControl) is not null && parse.GetValue(clusterNodes)!.Length == 0)
            {
                await Console.Error.WriteLineAsync("--other-control: only a clustered gateway's control node (--cluster-node) has a standby.");
                return Cli.BadOptions;
            }

            bool twoControls = isDataNode ? parse.GetValue(standbyControl) is not null : parse.GetValue(otherControl) is not null;
            var cluster = new ClusterOptions
            {
                ControlNodes = twoControls ? 2 : 1,
                Standby = parse.GetValue(standby),
                TakeoverTimeout = TimeSpan.FromMilliseconds(parse.GetValue(takeoverMs)),
                ClusterSecret = clusterSecret,
                DataNodes = parse.GetValue(dataNode) ? [parse.GetValue(id)] : [.. parse.GetValue(clusterNodes)!.Select(n => n.Node)],
                HeartbeatInterval = TimeSpan.FromMilliseconds(parse.GetValue(heartbeatMs)),
                HeartbeatTimeout = TimeSpan.FromMilliseconds(parse.GetValue(heartbeatTimeoutMs)),
            };
            if (parse.GetValue(dataNode) || cluster.DataNodes.Count > 0)
            {
                try
                {
                    cluster.Validate();
                }
                catch (ArgumentOutOfRangeException e)
                {
                    string name = e.ParamName switch
                    {
                        nameof(ClusterOptions.HeartbeatTimeout) => "--heartbeat-timeout-ms", nameof(ClusterOptions.DataNodes) => "--cluster-node",
                        nameof(ClusterOptions.ClusterSecret) => "--cluster-secret-file", nameof(ClusterOptions.TakeoverTimeout) => "--takeover-ms",
                        nameof(ClusterOptions.ControlNodes) => "--other-control", nameof(ClusterOptions.Standby) => "--standby", _ => "--heartbeat-ms",
                    };
                    await Console.Error.WriteLineAsync($"{name}: {e.Message.Split(" (Parameter")[0]}");
                    return Cli.BadOptions;
                }
            }

            if (parse.GetValue(dataNode))
            {
                return await RunDataNodeAsync(parse.GetValue(id), parse.GetValue(clusterGateway), parse.GetValue(control), parse.GetValue(listen)!, parse.GetValue(peers)!,
                    parse.GetValue(peerDataNodes)!, cluster, nativeOptions with { Mediator = null }, peeringSecret, parse.GetValue(seconds), cancellationToken, parse.GetValue(standbyControl));
            }
            var optionNames = new Dictionary<string, string>(StringComparer.Ordinal)
            {
                [nameof(GatewayOptions.HoldTime)] = "--hold-seconds", [nameof(GatewayOptions.JoinHoldTime)] = "--join-hold-seconds",
                [nameof(MulticastNativeNetOptions.PoolBase)] = "--pool-base", [nameof(MulticastNativeNetOptions.PortBase)] = "--port-base",
                [nameof(MulticastNativeNetOptions.PoolSize)] = "--pool-size", [nameof(GatewayOptions.PeeringSecret)] = "--peering-secret-file",
            };
            options = options with { PeeringSecret = peeringSecret };
            try
            {
                options.Validate();
                nativeOptions.Validate();
            }
            catch (ArgumentOutOfRangeException e)
            {
                string name = e.ParamName is { } p && optionNames.TryGetValue(p, out var o) ? o : e.ParamName ?? "option";
                await Console.Error.WriteLineAsync($"{name}: {e.Message.Split(" (Parameter")[0]}");
                return Cli.BadOptions;
            }

            if (parse.GetValue(fanout) is not null && parse.GetResult(qsmGms) is not null)
            {
                await Console.Error.WriteLineAsync("--qsm-gms: an island has one medium; give --fanout or --qsm-gms, not both.");
                return Cli.BadOptions;
            }

            QuickSilverNode? qsmNode = null;
            QsmNativeNet? qsm = null;
            if (parse.GetResult(qsmGms) is not null)
            {
                qsmNode = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { Gms = parse.GetValue(qsmGms), EmbeddedGms = parse.GetValue(qsmEmbedded) }, cancellationToken);
                qsm = new QsmNativeNet(qsmNode);
            }

            await using var qsmNodeOwner = qsmNode;
            using var multicast = parse.GetValue(fanout) is null && qsm is null ? new MulticastNativeNet(nativeOptions) : null;
            TcpFanoutNativeNet? hub = null;
            if (parse.GetValue(fanout) is { } hubAddress)
            {
                try
                {
                    hub = new TcpFanoutNativeNet(hubAddress, parse.GetValue(poolSize));
                }
                catch (SocketException e)
                {
                    await Console.Error.WriteLineAsync($"--fanout: cannot listen on {hubAddress}: {e.Message}");
                    return Cli.BadOptions;
                }
            }

            QuickSilver.Federation.NativeNet.INativeNet native = (QuickSilver.Federation.NativeNet.INativeNet?)multicast ?? (QuickSilver.Federation.NativeNet.INativeNet?)hub ?? qsm!;
            GatewayRuntime runtime;
            try
            {
                var own = parse.GetValue(clusterNodes)!;
                runtime = own.Length == 0 && parse.GetValue(peerDataNodes)!.Length == 0
                    ? new GatewayRuntime(options, native, parse.GetValue(listen)!, parse.GetValue(peers)!) { Logger = QsLogging.Factory.CreateLogger("gateway") }
                    : new GatewayRuntime(options, native, parse.GetValue(listen)!, parse.GetValue(peers)!,
                        own.Length == 0 ? null : (cluster, own.ToDictionary(n => n.Node, n => n.Address)), parse.GetValue(peerDataNodes), parse.GetValue(otherControl)) { Logger = QsLogging.Factory.CreateLogger("gateway") };
            }
            catch (ArgumentException e)
            {
                await Console.Error.WriteLineAsync($"--peer: {e.Message.Split(" (Parameter")[0]}");
                return Cli.BadOptions;
            }
            catch (SocketException e)
            {
                await Console.Error.WriteLineAsync($"--listen: cannot listen on {parse.GetValue(listen)}: {e.Message}");
                return Cli.BadOptions;
            }

            await using (runtime)
            {
                runtime.Start(); // binds the plug-in (IHostedNativeNet)
                AdminEndpoint? adminEndpoint = parse.GetValue(admin) is { } a ? new AdminEndpoint(runtime, a) : null;
                adminEndpoint?.Start();
                Console.WriteLine($"gateway {options.Gateway} of island {options.Island} listening on {runtime.ListenEndpoint}"
                    + (parse.GetValue(clusterNodes)!.Length > 0 ? $", {(cluster.ControlNodes == 2 ? cluster.Standby ? "standby " : "primary " : "")}control node of data nodes {string.Join(", ", parse.GetValue(clusterNodes)!.Select(n => n.Node))}" : "") + (adminEndpoint is null ? "" : $", admin {adminEndpoint.Endpoint}") + (hub is not null ? $", island medium: TCP fan-out hub {hub.Endpoint}" : qsm is not null ? $", island medium: QuickSilver groups (node {qsmNode!.Address})" : ", island medium: IP multicast"));
                try
                {
                    int limit = parse.GetValue(seconds);
                    await Task.Delay(limit == 0 ? Timeout.InfiniteTimeSpan : TimeSpan.FromSeconds(limit), cancellationToken);
                }
                catch (OperationCanceledException)
                {
                }

                if (adminEndpoint is not null)
                {
                    await adminEndpoint.DisposeAsync();
                }
            }

            if (hub is not null)
            {
                await hub.DisposeAsync();
            }

            return 0;
        });
        return command;
    }

    /// <summary>A secret file's bytes (base64, as <c>--secret-file</c>), none without a path, or the message that names
    /// <paramref name="option"/> when the file cannot be read or is not base64.</summary>
    private static async Task<(byte[]? Secret, string? Error)> ReadSecretFileAsync(string? path, string option, CancellationToken cancellationToken)
    {
        if (path is null)
        {
            return (null, null);
        }

        try
        {
            return (DatagramSecurityOptions.DecodeSecret(await File.ReadAllTextAsync(path, cancellationToken), option), null);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException or ArgumentException)
        {
            return (null, e is ArgumentException ? e.Message.Split(" (Parameter")[0] : $"{option}: cannot read '{path}': {e.Message}");
        }
    }

    private static Option<DataNodeAddress[]> AddressList(string name, string description, Func<string, DataNodeAddress> parse)
        => new(name)
        {
            Description = description,
            AllowMultipleArgumentsPerToken = false,
            DefaultValueFactory = _ => [],
            CustomParser = result =>
            {
                var list = new List<DataNodeAddress>();
                foreach (var token in result.Tokens)
                {
                    try
                    {
                        list.Add(parse(token.Value));
                    }
                    catch (FormatException e)
                    {
                        result.AddError($"{name}: {e.Message}");
                    }
                }

                return [.. list];
            },
        };

    private static async Task<int> RunDataNodeAsync(uint node, uint gateway, IPEndPoint? control, IPEndPoint listen, PeerConfig[] peers,
        DataNodeAddress[] peerDataNodes, ClusterOptions cluster, MulticastNativeNetOptions island, byte[]? peeringSecret, int seconds, CancellationToken cancellationToken,
        IPEndPoint? standbyControl = null)
    {
        if (standbyControl is not null && standbyControl.Equals(control))
        {
            await Console.Error.WriteLineAsync("--standby-control: the second control node's address equals --control.");
            return Cli.BadOptions;
        }

        if (control is null)
        {
            await Console.Error.WriteLineAsync("--control: a data node needs its control node's address (the control node's --listen).");
            return Cli.BadOptions;
        }

        if (gateway == 0 || gateway == node)
        {
            await Console.Error.WriteLineAsync("--gateway: a data node needs its gateway's number (1 or more, not the node's own --id).");
            return Cli.BadOptions;
        }

        if (peeringSecret is { Length: < PeeringHandshake.MinSecretBytes })
        {
            await Console.Error.WriteLineAsync($"--peering-secret-file: a peering secret is at least {PeeringHandshake.MinSecretBytes} bytes (e.g. 'head -c 32 /dev/urandom | base64'); got {peeringSecret.Length}.");
            return Cli.BadOptions;
        }

        using var native = new MulticastNativeNet(island);
        DataNodeRuntime runtime;
        try
        {
            runtime = new DataNodeRuntime(node, new GatewayId(gateway), cluster, native, listen, control, peers.ToDictionary(p => p.Gateway, p => p.Address), peerDataNodes, peeringSecret: peeringSecret, standbyControl: standbyControl);
        }
        catch (SocketException e)
        {
            await Console.Error.WriteLineAsync($"--listen: cannot listen on {listen}: {e.Message}");
            return Cli.BadOptions;
        }
        catch (ArgumentException e)
        {
            await Console.Error.WriteLineAsync($"--peer: {e.Message.Split(" (Parameter")[0]}");
            return Cli.BadOptions;
        }

        await using (runtime)
        {
            runtime.Start();
            Console.WriteLine($"data node {node} of gateway {gateway} listening on {runtime.ListenEndpoint}, control {control}" + (standbyControl is null ? "" : $" and {standbyControl}"));
            try
            {
                await Task.Delay(seconds == 0 ? Timeout.InfiniteTimeSpan : TimeSpan.FromSeconds(seconds), cancellationToken);
            }
            catch (OperationCanceledException)
            {
            }
        }

        return 0;
    }

    private static Command Sessions(Option<bool> json)
    {
        var admin = Endpoint("--admin", "The gateway's admin endpoint", multicast: false, loopbackOnly: true);
        admin.Required = true;
        var command = new Command("sessions", "List a running gateway's peers, routes and sessions (through its admin endpoint).") { admin };
        command.SetAction(async (parse, cancellationToken) =>
        {
            string answer;
            try
            {
                answer = await AdminEndpoint.RequestAsync(parse.GetValue(admin)!, "sessions", TimeSpan.FromSeconds(10));
            }
            catch (Exception e) when (e is SocketException or OperationCanceledException)
            {
                await Console.Error.WriteLineAsync($"--admin: no gateway answered at {parse.GetValue(admin)}: {e.Message}");
                return 1;
            }

            if (parse.GetValue(json))
            {
                Console.WriteLine(answer);
                return 0;
            }

            var s = JsonSerializer.Deserialize<GatewaySnapshot>(answer, WebJson)!;
            Console.WriteLine($"gateway {s.Gateway}, island {s.Island}");
            Console.WriteLine($"peers ({s.Peers.Count}):");
            foreach (var p in s.Peers)
            {
                Console.WriteLine($"  g{p.Gateway} island {p.Island} {p.Kind}, heard {p.SecondsSinceHeard:F1} s ago");
            }

            Console.WriteLine($"routes ({s.Routes.Count}):");
            foreach (var r in s.Routes)
            {
                Console.WriteLine($"  {r.Metric,-9} g{r.Destination} (island {r.Island}) cost {r.Cost} via g{r.NextHop} path [{string.Join(' ', r.Path.Select(g => "g" + g))}]");
            }

            Console.WriteLine($"sessions ({s.Sessions.Count}):");
            foreach (var t in s.Sessions)
            {
                string up = t.Root ? "root (owner island)" : t.Upstream is { } u ? $"upstream g{u}" : "no upstream";
                Console.WriteLine($"  {t.Name}: {up}; downstream [{string.Join(' ', t.Downstream.Select(g => "g" + g))}]; local clients {(t.LocalClients ? "yes" : "no")}; labels [{string.Join(' ', t.Labels)}]; channels [{string.Join(' ', t.Channels)}]{(t.DataNode is { } dn ? $"; data node {dn}" : "")}");
            }

            Console.WriteLine("counters: " + string.Join(", ", s.Counters.Where(c => c.Value != 0).Select(c => $"{c.Key} {c.Value}")));
            return 0;
        });
        return command;
    }

    private static Command IslandSend()
    {
        var group = Endpoint("--group", "Native multicast group:port to publish on (a flow of a session owned by this island)", multicast: true);
        group.Required = true;
        var count = Cli.Int("--count", "Messages to send", 10_000, 1, 100_000_000);
        var size = Cli.Int("--size", "Message size in bytes (the first 4 carry its number)", 100, 4, 65_000);
        var rate = Cli.Int("--rate", "Messages per second (0: as fast as possible)", 1000, 0, 10_000_000);
        var first = Cli.Int("--first", "Number of the first message (a second batch continues the numbering)", 0, 0, 1_000_000_000);
        var command = new Command("island-send", "Publish numbered messages to a multicast group on loopback (a source in an island).") { group, count, size, rate, first };
        command.SetAction(async (parse, cancellationToken) =>
        {
            using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            var target = parse.GetValue(group)!;
            int n = parse.GetValue(count), perSecond = parse.GetValue(rate);
            var packet = new byte[parse.GetValue(size)];
            var clock = Stopwatch.StartNew();
            for (int i = 0; i < n && !cancellationToken.IsCancellationRequested; i++)
            {
                BinaryPrimitives.WriteInt32LittleEndian(packet, parse.GetValue(first) + i);
                socket.SendTo(packet, target);
                if (perSecond > 0)
                {
                    var due = TimeSpan.FromSeconds((double)(i + 1) / perSecond);
                    if (due > clock.Elapsed + TimeSpan.FromMilliseconds(2))
                    {
                        await Task.Delay(due - clock.Elapsed, cancellationToken);
                    }
                }
            }

            Console.WriteLine($"sent {n} messages of {packet.Length} B to {target} in {clock.Elapsed.TotalSeconds:F2} s");
            return 0;
        });
        return command;
    }

    private static Command IslandRecv()
    {
        var mediator = Endpoint("--mediator", "The island's mediator group", multicast: true);
        mediator.Required = true;
        var session = new Option<string>("--session") { Description = "The bfed:// session name to join", Required = true };
        var flow = Cli.Int("--flow", "Which flow of the session to receive (0 = first)", 0, 0, 15);
        var count = Cli.Int("--count", "Stop after this many distinct messages", 10_000, 1, 100_000_000);
        var seconds = Cli.Int("--seconds", "Stop after this many seconds whatever happens", 60, 1, 86_400);
        var receiver = Cli.Int("--receiver", "Join as numbered receiver N (1..2^31): a per-receiver session's packets (delivery=unicast|corecast) come by unicast to a socket of this process, not on the session's channel (0: an anonymous client)", 0, 0, int.MaxValue);
        var command = new Command("island-recv", "Join a federation session through the island's mediator and count the messages received.") { mediator, session, flow, count, seconds, receiver };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (!SessionName.TryParse(parse.GetValue(session), out var name, out string error))
            {
                await Console.Error.WriteLineAsync($"--session: {error}");
                return Cli.BadOptions;
            }

            var group = parse.GetValue(mediator)!;
            using var deadline = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            deadline.CancelAfter(TimeSpan.FromSeconds(parse.GetValue(seconds)));
            string? answer = null;
            uint number = (uint)parse.GetValue(receiver);
            using var own = number == 0 ? null : new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            (uint, int)? numbered = null;
            if (own is not null)
            {
                own.ReceiveBufferSize = 4 << 20;
                own.Bind(new IPEndPoint(IPAddress.Loopback, 0));
                numbered = (number, ((IPEndPoint)own.LocalEndPoint!).Port);
            }

            for (int attempt = 0; attempt < 10 && answer is null && !deadline.IsCancellationRequested; attempt++)
            {
                answer = await MediatorClient.RequestAsync(group, "JOIN", name, TimeSpan.FromSeconds(2), receiver: numbered);
            }

            if (answer is null || !answer.StartsWith("TRANSLATION ", StringComparison.Ordinal))
            {
                await Console.Error.WriteLineAsync($"join failed: {answer ?? "no answer from the mediator"}");
                return 1;
            }

            var addresses = answer.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1..];
            int index = parse.GetValue(flow);
            if (index >= addresses.Length)
            {
                await Console.Error.WriteLineAsync($"--flow: the session has {addresses.Length} flows");
                return Cli.BadOptions;
            }

            var channel = IPEndPoint.Parse(addresses[index]);
            Console.WriteLine($"joined {name}: {answer}" + (numbered is { } r ? $" as receiver {r.Item1} at port {r.Item2}" : ""));
            using var multicast = own is null ? new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp) : null;
            if (multicast is not null)
            {
                multicast.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
                multicast.ReceiveBufferSize = 4 << 20;
                multicast.Bind(channel);
                multicast.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(channel.Address, IPAddress.Loopback));
            }

            var socket = own ?? multicast!;
            var seen = new HashSet<int>();
            var buffer = new byte[65_536];
            int target = parse.GetValue(count);
            var refresh = Stopwatch.StartNew();
            var clock = Stopwatch.StartNew();
            try
            {
                while (seen.Count < target)
                {
                    int n = await socket.ReceiveAsync(buffer, SocketFlags.None, deadline.Token);
                    if (n >= 4)
                    {
                        seen.Add(BinaryPrimitives.ReadInt32LittleEndian(buffer));
                    }

                    if (refresh.Elapsed > TimeSpan.FromSeconds(20))
                    {
                        refresh.Restart();
                        _ = MediatorClient.RequestAsync(group, "JOIN", name, TimeSpan.FromSeconds(1), receiver: numbered); // soft state
                    }
                }
            }
            catch (OperationCanceledException)
            {
            }

            await MediatorClient.RequestAsync(group, "LEAVE", name, TimeSpan.FromSeconds(1));
            Console.WriteLine($"received {seen.Count} distinct messages in {clock.Elapsed.TotalSeconds:F2} s");
            if (seen.Count > 0 && seen.Count < target)
            {
                // Where the losses were: the longest run of missing numbers between the first and the last received.
                int low = seen.Min(), high = seen.Max(), run = 0, longest = 0, longestEnd = 0;
                for (int i = low; i <= high; i++)
                {
                    run = seen.Contains(i) ? 0 : run + 1;
                    if (run > longest)
                    {
                        longest = run;
                        longestEnd = i;
                    }
                }

                Console.WriteLine($"missing between {low} and {high}: {high - low + 1 - seen.Count}; longest gap {longest} messages ({longestEnd - longest + 1}..{longestEnd})");
            }

            return seen.Count >= target ? 0 : 1;
        });
        return command;
    }
}
