using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;

using static QuickSilver.Federation.Tests.Cluster.LoopbackSockets;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>A clustered gateway on real sockets (loopback, IP multicast on lo): g1 (island 1, unclustered) peers with
/// g2's control node (island 2); g2's data nodes 201 and 202 are separate runtimes with their own sockets. One is
/// stopped; its session moves. Waits are bounded; nothing asserts a duration.</summary>
public class ClusterLoopbackTests
{
    private static readonly int Ports = 44_000 + (Environment.ProcessId % 200) * 10;

    private static async Task<HashSet<int>> SendAndReceiveAsync(Socket source, IPEndPoint native, Socket receiver, int from, int count)
    {
        for (int i = from; i < from + count; i++)
        {
            var packet = new byte[100];
            BinaryPrimitives.WriteInt32LittleEndian(packet, i);
            source.SendTo(packet, native);
            if (i % 20 == 19)
            {
                await Task.Delay(5);
            }
        }

        var got = new HashSet<int>();
        var buffer = new byte[2048];
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(5));
        try
        {
            while (got.Count < count)
            {
                int n = await receiver.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                int id = BinaryPrimitives.ReadInt32LittleEndian(buffer);
                if (n == 100 && id >= from && id < from + count)
                {
                    got.Add(id);
                }
            }
        }
        catch (OperationCanceledException)
        {
        }

        return got;
    }

    // Where g1 sends the session's DATA: the data node g2 announced with DATA_ENDPOINT (0: none yet).
    private static Task<uint> EndpointAtG1Async(GatewayRuntime g1)
        => g1.InvokeAsync(g => g.Sessions.Values.FirstOrDefault()?.PeerEndpoints.GetValueOrDefault(new GatewayId(2)) ?? 0u);

    [Fact]
    public async Task StoppingADataNodeMovesItsSessionToTheOtherAndDataResumes()
    {
        var any = new IPEndPoint(IPAddress.Loopback, 0);
        var clusterOptions = new ClusterOptions { DataNodes = [201, 202] };
        var mediator = IPEndPoint.Parse($"239.255.80.2:{Ports + 9}");
        var n1 = Island("239.255.81.0", Ports);
        var n2 = Island("239.255.82.0", Ports + 2, mediator);
        var d1Net = Island("239.255.82.0", Ports + 2);
        var d2Net = Island("239.255.82.0", Ports + 2);

        // Listen sockets first (ports are ephemeral), then wire every address in.
        using var probe1 = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        probe1.Bind(any);
        var g1Address = (IPEndPoint)probe1.LocalEndPoint!;
        probe1.Dispose();
        using var probe2 = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        probe2.Bind(any);
        var g2Address = (IPEndPoint)probe2.LocalEndPoint!;
        probe2.Dispose();

        var peersOfNodes = new Dictionary<GatewayId, IPEndPoint> { [new GatewayId(1)] = g1Address };
        var d201 = new DataNodeRuntime(201, new GatewayId(2), clusterOptions, d1Net, any, g2Address, peersOfNodes, []);
        var d202 = new DataNodeRuntime(202, new GatewayId(2), clusterOptions, d2Net, any, g2Address, peersOfNodes, []);
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(2), Island = new IslandId(2) }, n2, g2Address,
            [new PeerConfig(new GatewayId(1), g1Address, LinkCosts.Default)],
            (clusterOptions, new Dictionary<uint, IPEndPoint> { [201] = d201.ListenEndpoint, [202] = d202.ListenEndpoint }));
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1) }, n1, g1Address,
            [new PeerConfig(new GatewayId(2), g2Address, LinkCosts.Default)], null,
            [new DataNodeAddress(new GatewayId(2), 201, d201.ListenEndpoint), new DataNodeAddress(new GatewayId(2), 202, d202.ListenEndpoint)]);
        await using (g1)
        await using (g2)
        await using (d201)
        await using (d202)
        using (n1)
        using (n2)
        using (d1Net)
        using (d2Net)
        {
            foreach (var start in new Action[] { d201.Start, d202.Start, g1.Start, g2.Start })
            {
                start();
            }

            Assert.True(await WaitAsync(async () => (await g2.SnapshotAsync()).Routes.Any(r => r.Destination == 1)
                && (await g2.InvokeAsync(g => g.Cluster!.Load.Count)) == 2, TimeSpan.FromSeconds(10)), "no route or data nodes not up");

            var session = SessionName.Parse($"bfed://1/239.255.83.1/{Ports + 8}");
            string? answer = await MediatorClient.RequestAsync(mediator, "JOIN", session, TimeSpan.FromSeconds(5));
            Assert.NotNull(answer);
            Assert.StartsWith("TRANSLATION 239.255.82.", answer, StringComparison.Ordinal);
            var translated = IPEndPoint.Parse(answer.Split(' ')[1]);
            using var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
            receiver.Bind(translated);
            receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(translated.Address, IPAddress.Loopback));
            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            var native = IPEndPoint.Parse($"239.255.83.1:{Ports + 8}");

            // The session lands on data node 201 (least loaded, ties to the lower number) and g1 learns it.
            Assert.True(await WaitAsync(async () => await EndpointAtG1Async(g1) == 201
                && (await d201.InvokeAsync(n => n.SessionCount)) == 1, TimeSpan.FromSeconds(10)), "the tree did not reach g1 or node 201");
            var before = await SendAndReceiveAsync(source, native, receiver, 0, 200);
            Assert.Equal(200, before.Count);
            Assert.True(await d201.InvokeAsync(n => n.Counters.DataDelivered) >= 200);

            await d201.DisposeAsync(); // the crash: heartbeats stop
            Assert.True(await WaitAsync(async () => (await g2.InvokeAsync(g => g.Cluster!.NodeOf(session))) == 202u
                && (await d202.InvokeAsync(n => n.SessionCount)) == 1 && await EndpointAtG1Async(g1) == 202, TimeSpan.FromSeconds(15)), "the session did not move to 202");

            var after = await SendAndReceiveAsync(source, native, receiver, 1000, 200);
            Assert.Equal(200, after.Count);
            Assert.True(await d202.InvokeAsync(n => n.Counters.DataDelivered) >= 200);
            var c2 = (await g2.SnapshotAsync()).Counters;
            Assert.Equal(0, c2["DataForwarded"]);
            Assert.Equal(0, c2["DataDelivered"]);
        }
    }

    /// <summary>Issue 16's retransmission between islands: with every 5th DATA datagram towards or from a data node
    /// dropped before the socket, a bulk session (TCP bulk data channel) delivers every message in order, and a
    /// real-time session (UDP, unchanged) loses exactly the dropped ones. g1 (island 1, the root) has data node 101
    /// when <paramref name="rootClustered"/>, g2 data node 201 when <paramref name="leafClustered"/>: gateway → data
    /// node, data node → gateway, and data node → data node channels. Without <paramref name="configured"/> no runtime
    /// is told any peer's data node: they learn the addresses from DATA_ENDPOINT and, on data nodes, from ASSIGN.</summary>
    [Theory]
    [InlineData(false, true, true)]
    [InlineData(true, false, true)]
    [InlineData(true, true, true)]
    [InlineData(false, true, false)]
    [InlineData(true, false, false)]
    [InlineData(true, true, false)]
    public Task UnderInjectedDatagramLossABulkSessionThroughADataNodeArrivesWholeAndInOrder(bool rootClustered, bool leafClustered, bool configured)
        => ClusterPair.RunAsync(new ClusterPairSetup(rootClustered, leafClustered, configured, Ports, 84) { DropEveryNth = 5 }, async (pair, bulk, realTime) =>
        {
            const int count = 500;
            var (g1, g2, root, leaf) = pair;
            var node = (leaf ?? root)!; // the data node whose listener the hostile part below tries
            long dropped = (root?.DataDatagramsDroppedForTest ?? 0) + (leaf?.DataDatagramsDroppedForTest ?? 0) + g1.DataDatagramsDroppedForTest;
            var channels = root is not null ? await root.BulkCountersAsync() : await g1.BulkCountersAsync();
            var c2 = (await g2.SnapshotAsync()).Counters;
            Assert.True(bulk.Count == count, $"bulk {bulk.Count}, real-time {realTime.Count}, channels {channels}, node {node.ChannelsRefused} refused, g2 hello refused {g2.HelloRefused}, g2 datagrams refused {g2.DatagramsRefused}, g2 counters {string.Join(", ", c2.Where(kv => kv.Value != 0))}, node counters {await node.InvokeAsync(n => $"fwd {n.Counters.DataForwarded} fromIsland {n.Counters.DataFromIsland} sendFailed {n.Counters.SendFailed}")}");
            Assert.Equal(Enumerable.Range(0, count), bulk); // every message, in order
            Assert.Equal(count / 5, dropped); // every 5th real-time datagram was dropped...
            Assert.True(realTime.Count <= count - dropped, $"real-time got {realTime.Count}"); // ...and nothing recovers it
            Assert.Equal(realTime.Distinct().Order(), realTime);
            Assert.Equal(1, channels.Opened);
            Assert.Equal(count, channels.Sent);
            Assert.Equal(0, channels.Dropped);
            Assert.Equal(0, node.ChannelsRefused);

            // Hostile channels to the data node: from a gateway it does not know, and a known one's channel that then
            // sends something other than DATA. Both closed and counted; nothing reaches the node.
            var peer = leaf is not null ? ClusterPair.G1Id : ClusterPair.G2Id;
            long received = await node.InvokeAsync(n => n.Counters.DataReceived);
            byte[][][] openings =
            [
                [Frame(PeerCodec.DataChannel(new GatewayId(77), 0))],
                [Frame(PeerCodec.DataChannel(peer, 0)), Frame(PeerCodec.KeepAlive())],
            ];
            foreach (var frames in openings)
            {
                using var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await s.ConnectAsync(node.ListenEndpoint);
                foreach (var f in frames)
                {
                    await s.SendAsync(f);
                }

                using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
                Assert.Equal(0, await s.ReceiveAsync(new byte[64], SocketFlags.None, cts.Token)); // closed by the node
            }

            Assert.Equal(2, node.ChannelsRefused);
            Assert.Equal(received, await node.InvokeAsync(n => n.Counters.DataReceived));
        });

    /// <summary>A data node whose cluster secret differs from its control node's: every HEARTBEAT it sends is dropped
    /// and counted, so it never comes up and gets no session.</summary>
    [Fact]
    public async Task ADataNodeWithAnotherClusterSecretNeverComesUp()
    {
        var any = new IPEndPoint(IPAddress.Loopback, 0);
        var controlOptions = new ClusterOptions { DataNodes = [201], ClusterSecret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)] };
        var nodeOptions = controlOptions with { ClusterSecret = [.. Enumerable.Range(2, 32).Select(i => (byte)i)], HeartbeatInterval = TimeSpan.FromMilliseconds(100), HeartbeatTimeout = TimeSpan.FromMilliseconds(300) };
        var n2 = Island("239.255.88.0", Ports + 2);
        var dNet = Island("239.255.88.0", Ports + 2);
        var g2Address = FreePort();
        var node = new DataNodeRuntime(201, new GatewayId(2), nodeOptions, dNet, any, g2Address, new Dictionary<GatewayId, IPEndPoint>(), []);
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(2), Island = new IslandId(2) }, n2, g2Address, [],
            (controlOptions, new Dictionary<uint, IPEndPoint> { [201] = node.ListenEndpoint }));
        await using (g2)
        await using (node)
        using (n2)
        using (dNet)
        {
            node.Start();
            g2.Start();
            Assert.True(await WaitAsync(async () => await g2.InvokeAsync(g => g.Cluster!.Counters.Unauthenticated) >= 5, TimeSpan.FromSeconds(10)), "no heartbeat reached the control node");
            Assert.Equal(0, await g2.InvokeAsync(g => g.Cluster!.Counters.Heartbeats));
            Assert.Equal(0, await g2.InvokeAsync(g => g.Cluster!.Counters.NodesUp));
            Assert.Empty(await g2.InvokeAsync(g => g.Cluster!.Load));
        }
    }
}
