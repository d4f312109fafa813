using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Federation.Tests.Runtime;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>Peering authentication with a clustered gateway on real sockets (loopback; docs/federation.md, "Peering
/// authentication", "Bulk data channels"): bulk data channels authenticate both ends and seal their frames, and real-time
/// datagrams between gateways are sealed under their channel's keys. Waits are bounded; nothing asserts a duration.</summary>
public class ClusteredPeeringAuthenticationTests
{
    private static readonly int Ports = 44_000 + (Environment.ProcessId % 200) * 10;

    private static MulticastNativeNet Island(string pool, int portBase, IPEndPoint? mediator = null)
        => new(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse(pool), PortBase = portBase, PoolSize = 2, Mediator = mediator });

    private static IPEndPoint FreePort()
    {
        using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return (IPEndPoint)probe.LocalEndPoint!;
    }

    private static async Task<bool> WaitAsync(Func<Task<bool>> condition, int seconds = 10)
    {
        var end = DateTime.UtcNow + TimeSpan.FromSeconds(seconds);
        while (DateTime.UtcNow < end)
        {
            if (await condition())
            {
                return true;
            }

            await Task.Delay(50);
        }

        return await condition();
    }

    private static Socket Receiver(IPEndPoint group)
    {
        var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        receiver.Bind(group);
        receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group.Address, IPAddress.Loopback));
        return receiver;
    }

    // Receives ids [0, count) in arrival order until all came or nothing arrived for 3 s.
    private static async Task<List<int>> ReceiveAsync(Socket receiver, int count)
    {
        var got = new List<int>();
        var buffer = new byte[2048];
        while (got.Count < count)
        {
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(3));
            try
            {
                int n = await receiver.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                int id = BinaryPrimitives.ReadInt32LittleEndian(buffer);
                if (n == 100 && id >= 0 && id < count)
                {
                    got.Add(id);
                }
            }
            catch (OperationCanceledException)
            {
                break;
            }
        }

        return got;
    }

    /// <summary>g1 (island 1, the root; data node 101 when <paramref name="rootClustered"/>) and g2 (island 2; data node
    /// 201 when <paramref name="leafClustered"/>), every one with the peering secret <paramref name="secret"/>, except
    /// data node 201, which has <paramref name="leafNodeSecret"/>. No runtime is told any peer's data node (they learn
    /// them from DATA_ENDPOINT and ASSIGN). A bulk and a real-time session, 300 messages each; returns what island 2's
    /// receivers got.</summary>
    private static async Task<(List<int> Bulk, List<int> RealTime)> RunPairAsync(bool rootClustered, bool leafClustered, byte[] secret, byte[] leafNodeSecret,
        Func<GatewayRuntime, GatewayRuntime, DataNodeRuntime?, DataNodeRuntime?, List<int>, List<int>, Task> check)
    {
        var rootOptions = new ClusterOptions { DataNodes = [101], ClusterSecret = [.. Enumerable.Range(7, 32).Select(i => (byte)i)] };
        var leafOptions = rootOptions with { DataNodes = [201] };
        var mediator = IPEndPoint.Parse($"239.255.94.2:{Ports + 9}");
        var n1 = Island("239.255.95.0", Ports);
        var n2 = Island("239.255.96.0", Ports + 2, mediator);
        var rootNet = Island("239.255.95.0", Ports);
        var leafNet = Island("239.255.96.0", Ports + 2);
        var (g1Address, g2Address, rootAddress, leafAddress) = (FreePort(), FreePort(), FreePort(), FreePort());
        var (g1Id, g2Id) = (new GatewayId(1), new GatewayId(2));
        var root = rootClustered ? new DataNodeRuntime(101, g1Id, rootOptions, rootNet, rootAddress, g1Address, new Dictionary<GatewayId, IPEndPoint> { [g2Id] = g2Address }, [], peeringSecret: secret) : null;
        var leaf = leafClustered ? new DataNodeRuntime(201, g2Id, leafOptions, leafNet, leafAddress, g2Address, new Dictionary<GatewayId, IPEndPoint> { [g1Id] = g1Address }, [], peeringSecret: leafNodeSecret) : null;
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = g1Id, Island = new IslandId(1), PeeringSecret = secret }, n1, g1Address,
            [new PeerConfig(g2Id, g2Address, LinkCosts.Default)], rootClustered ? (rootOptions, new Dictionary<uint, IPEndPoint> { [101] = rootAddress }) : null);
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = g2Id, Island = new IslandId(2), PeeringSecret = secret }, n2, g2Address,
            [new PeerConfig(g1Id, g1Address, LinkCosts.Default)], leafClustered ? (leafOptions, new Dictionary<uint, IPEndPoint> { [201] = leafAddress }) : null);
        await using (g1)
        await using (g2)
        await using (root)
        await using (leaf)
        using (n1)
        using (n2)
        using (rootNet)
        using (leafNet)
        {
            root?.Start();
            leaf?.Start();
            g1.Start();
            g2.Start();
            Assert.True(await WaitAsync(async () => (await g2.SnapshotAsync()).Routes.Any(r => r.Destination == 1)
                && (!rootClustered || (await g1.InvokeAsync(g => g.Cluster!.Load.Count)) == 1)
                && (!leafClustered || (await g2.InvokeAsync(g => g.Cluster!.Load.Count)) == 1)), "no route or data node not up");

            var bulkSession = SessionName.Parse($"bfed://1/239.255.97.1/{Ports + 8}");
            var realTimeSession = SessionName.Parse($"bfed://1/239.255.97.2/{Ports + 7}/?content=real-time");
            var groups = new List<IPEndPoint>();
            foreach (var session in new[] { bulkSession, realTimeSession })
            {
                string? answer = await MediatorClient.RequestAsync(mediator, "JOIN", session, TimeSpan.FromSeconds(5));
                Assert.NotNull(answer);
                Assert.StartsWith("TRANSLATION 239.255.96.", answer, StringComparison.Ordinal);
                groups.Add(IPEndPoint.Parse(answer.Split(' ')[1]));
            }

            using var bulkReceiver = Receiver(groups[0]);
            using var realTimeReceiver = Receiver(groups[1]);
            Assert.True(await WaitAsync(async () =>
                (root is null || await root.InvokeAsync(n => n.SessionCount) == 2) && (leaf is null || await leaf.InvokeAsync(n => n.SessionCount) == 2)
                && (!leafClustered || await g1.InvokeAsync(g => g.Sessions.Values.Count(s => s.PeerEndpoints.GetValueOrDefault(g2Id) == 201)) == 2)
                && (!rootClustered || await g2.InvokeAsync(g => g.Sessions.Values.Count(s => s.PeerEndpoints.GetValueOrDefault(g1Id) == 101)) == 2)
                && (root is null || leaf is null || (root.KnownPeerDataNodes == 1 && leaf.KnownPeerDataNodes == 1))), "the trees did not reach the data nodes");
            await Task.Delay(300); // ASSIGNs with the downstream's labels

            const int count = 300;
            var bulkTask = ReceiveAsync(bulkReceiver, count);
            var realTimeTask = ReceiveAsync(realTimeReceiver, count);
            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            var bulkNative = IPEndPoint.Parse($"239.255.97.1:{Ports + 8}");
            var realTimeNative = IPEndPoint.Parse($"239.255.97.2:{Ports + 7}");
            for (int i = 0; i < count; i++)
            {
                var packet = new byte[100];
                BinaryPrimitives.WriteInt32LittleEndian(packet, i);
                source.SendTo(packet, bulkNative);
                source.SendTo(packet, realTimeNative);
                if (i % 20 == 19)
                {
                    await Task.Delay(5);
                }
            }

            var bulk = await bulkTask;
            var realTime = await realTimeTask;
            await check(g1, g2, root, leaf, bulk, realTime);
            return (bulk, realTime);
        }
    }

    /// <summary>Issue 16, peering authentication for a clustered gateway: with one peering secret everywhere, a bulk
    /// session (sealed bulk data channels) and a real-time session (sealed datagrams, after the first frames rode the
    /// channel while it was confirmed) cross gateway → data node, data node → gateway and data node → data node, and no
    /// runtime refused anything; then a channel to g2's listener that names data node 101, from its IP, without the
    /// secret, is refused and counted.</summary>
    [Theory]
    [InlineData(false, true)]
    [InlineData(true, false)]
    [InlineData(true, true)]
    public async Task WithOnePeeringSecretBulkAndRealTimeSessionsCrossAClusteredPairSealed(bool rootClustered, bool leafClustered)
    {
        await RunPairAsync(rootClustered, leafClustered, PeeringSecrets.A, PeeringSecrets.A, async (g1, g2, root, leaf, bulk, realTime) =>
        {
            Assert.Equal(Enumerable.Range(0, 300), bulk); // every message, in order
            // Real-time is UDP: loopback may still drop under load, so not every one is required; most must arrive.
            Assert.True(realTime.Count >= 270, $"real-time got {realTime.Count} of 300");
            Assert.Equal(realTime.Distinct().Order(), realTime);
            foreach (var g in new[] { g1, g2 })
            {
                Assert.Equal(0, g.DatagramsUnauthenticated);
                Assert.Equal(0, g.PeeringHandshakesFailed);
                Assert.Equal(0, g.PeeringUnauthenticated);
                Assert.Equal(0, g.ChannelHandshakesFailed);
                Assert.Equal(0, g.HelloRefused);
            }

            foreach (var n in new[] { root, leaf })
            {
                if (n is not null)
                {
                    Assert.Equal(0, n.ChannelsRefused);
                    Assert.Equal(0, n.DatagramsUnauthenticated);
                    Assert.Equal(0, n.ChannelHandshakesFailed);
                }
            }

            // The real-time flow did travel as sealed datagrams once its channel was confirmed (not only on TCP).
            long datagrams = root is not null ? root.DataDatagramsSent : g1.DataDatagramsToNodes;
            Assert.True(datagrams > 0, "no real-time datagram was sent sealed");
            var c2 = (await g2.SnapshotAsync()).Counters;
            Assert.Equal(0, c2["DatagramsUnauthenticated"]);
            Assert.Equal(0, c2["ChannelHandshakesFailed"]);

            if (root is not null)
            {
                // A bulk data channel to g2's listener from data node 101's IP, naming 101, without the secret: refused.
                using var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await s.ConnectAsync(g2.ListenEndpoint);
                await s.SendAsync(Frame(PeerCodec.DataChannel(new GatewayId(1), 101)));
                await s.SendAsync(Frame(DataFrame(1)));
                Assert.True(await ClosedByPeerAsync(s));
                Assert.True(await WaitAsync(() => Task.FromResult(g2.PeeringUnauthenticated == 1)), $"g2 unauthenticated {g2.PeeringUnauthenticated}");
                Assert.Equal(1, g2.HelloRefused);
            }
        });
    }

    /// <summary>Data node 201 has another peering secret than every other runtime: g1's bulk data channel to it (for
    /// both sessions: bulk, and real-time until a channel is confirmed) never authenticates, so nothing is delivered, and
    /// each attempt is counted on the node as unauthenticated.</summary>
    [Fact]
    public async Task ADataNodeWithAnotherPeeringSecretTakesNothingAndCountsEveryAttempt()
    {
        var (bulk, realTime) = await RunPairAsync(false, true, PeeringSecrets.A, PeeringSecrets.B, async (g1, g2, root, leaf, bulk, realTime) =>
        {
            Assert.True(await WaitAsync(() => Task.FromResult(leaf!.ChannelsUnauthenticated >= 1)), "no refusal counted");
            Assert.Equal(leaf!.ChannelsRefused, leaf.ChannelsUnauthenticated); // every refusal was an authentication failure
            Assert.Equal(0, await leaf.InvokeAsync(n => n.Counters.DataReceived));
            Assert.Equal(0, g1.DataDatagramsToNodes); // no channel was confirmed, so no datagram was sealed and sent
            var channels = await g1.BulkCountersAsync();
            Assert.True(channels.Failed >= 1, $"channels {channels}");
        });
        Assert.Empty(bulk);
        Assert.Empty(realTime);
    }

    // The test plays gateway 1 towards a data node: a raw TCP connection, frames u32 length + body.
    private static byte[] Frame(ReadOnlySpan<byte> body)
    {
        var f = new byte[4 + body.Length];
        BinaryPrimitives.WriteUInt32LittleEndian(f, (uint)body.Length);
        body.CopyTo(f.AsSpan(4));
        return f;
    }

    private static byte[] SealedFrame(FrameSealer sealer, byte[] body)
    {
        var buffer = new byte[body.Length + sealer.Overhead];
        body.CopyTo(buffer, 0);
        sealer.Seal(buffer, body.Length);
        return Frame(buffer);
    }

    private static async Task<byte[]?> ReadFrameAsync(Socket s)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        var prefix = new byte[4];
        for (int got = 0; got < 4;)
        {
            int n = await s.ReceiveAsync(prefix.AsMemory(got), SocketFlags.None, cts.Token);
            if (n == 0)
            {
                return null;
            }

            got += n;
        }

        var body = new byte[BinaryPrimitives.ReadUInt32LittleEndian(prefix)];
        for (int got = 0; got < body.Length;)
        {
            int n = await s.ReceiveAsync(body.AsMemory(got), SocketFlags.None, cts.Token);
            if (n == 0)
            {
                return null;
            }

            got += n;
        }

        return body;
    }

    private static async Task<bool> ClosedByPeerAsync(Socket s)
    {
        var buffer = new byte[4096];
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        try
        {
            while (await s.ReceiveAsync(buffer, SocketFlags.None, cts.Token) > 0)
            {
            }

            return true;
        }
        catch (SocketException)
        {
            return true; // reset
        }
    }

    // Opens a bulk data channel to node 201 as gateway 1 with secret; returns the socket and the keys (null keys: the
    // node's PEER_AUTH never came). Sends the sealed DATA_CHANNEL when seal is true.
    private static async Task<(Socket Socket, PeeringLinkKeys Keys)> OpenChannelAsync(IPEndPoint node, byte[] secret, bool seal = true)
    {
        var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        await s.ConnectAsync(node);
        var handshake = new PeeringHandshake(secret, new GatewayId(1));
        await s.SendAsync(Frame(PeerCodec.DataChannel(new GatewayId(1), 0)));
        await s.SendAsync(Frame(handshake.AuthFrame));
        var first = await ReadFrameAsync(s);
        Assert.NotNull(first);
        Assert.Equal(FrameError.None, PeerCodec.Decode(first, out var message));
        var auth = Assert.IsType<PeerAuthMessage>(message);
        Assert.Equal(201u, auth.Gateway.Value);
        var keys = handshake.Complete(auth, PeeringPurpose.BulkChannel)!;
        if (seal)
        {
            await s.SendAsync(SealedFrame(keys.Frames, PeerCodec.DataChannel(new GatewayId(1), 0)));
        }

        return (s, keys);
    }

    private static byte[] DataFrame(uint sequence)
    {
        var frame = new byte[DataHeader.Size + 8];
        new DataHeader(0, 32, new FlowLabel(1), new GatewayId(1), sequence).Write(frame);
        return frame;
    }

    /// <summary>The test plays gateway 1 (its UDP socket is the address the node knows gateway 1 by, and every TCP
    /// connection comes from 127.0.0.1, gateway 1's IP) towards data node 201 with the peering secret: a channel from the
    /// right IP without the secret (DATA in the clear after DATA_CHANNEL), with another secret, with a forged sealed
    /// opening, and an honest channel's later frame altered are each refused, closed and counted; on the honest
    /// channel's keys a sealed datagram is taken, and a truncated one, an altered one, one in the clear and one replayed
    /// from an earlier connection are each dropped and counted; nothing of them reaches the node.</summary>
    [Fact]
    public async Task ForgedChannelsAndDatagramsFromTheRightAddressAreRefusedAndCounted()
    {
        using var g1Udp = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        g1Udp.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var options = new ClusterOptions { DataNodes = [201] };
        using var net = Island("239.255.98.0", Ports + 4);
        var node = new DataNodeRuntime(201, new GatewayId(2), options, net, new IPEndPoint(IPAddress.Loopback, 0), FreePort(),
            new Dictionary<GatewayId, IPEndPoint> { [new GatewayId(1)] = (IPEndPoint)g1Udp.LocalEndPoint! }, [], peeringSecret: PeeringSecrets.A);
        await using (node)
        {
            node.Start();
            Task<long> Received() => node.InvokeAsync(n => n.Counters.DataReceived);

            // 1. The right IP and a configured gateway's number, but no secret: DATA in the clear after DATA_CHANNEL.
            using (var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
            {
                await s.ConnectAsync(node.ListenEndpoint);
                await s.SendAsync(Frame(PeerCodec.DataChannel(new GatewayId(1), 0)));
                await s.SendAsync(Frame(DataFrame(1)));
                Assert.True(await ClosedByPeerAsync(s));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 1)));

            // 2. Another secret: the node's keys differ, so the sealed DATA_CHANNEL does not open.
            var (wrong, _) = await OpenChannelAsync(node.ListenEndpoint, PeeringSecrets.B);
            using (wrong)
            {
                Assert.True(await ClosedByPeerAsync(wrong));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 2)));

            // 3. The secret's handshake, then a truncated sealed opening (the tag cut off): does not open.
            var (cut, cutKeys) = await OpenChannelAsync(node.ListenEndpoint, PeeringSecrets.A, seal: false);
            using (cut)
            {
                var opening = SealedFrame(cutKeys.Frames, PeerCodec.DataChannel(new GatewayId(1), 0));
                var truncated = Frame(opening.AsSpan(4, opening.Length - 4 - 16));
                await cut.SendAsync(truncated);
                Assert.True(await ClosedByPeerAsync(cut));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 3)));
            Assert.Equal(0, await Received());

            // 4. An honest channel: the node confirms with a sealed frame, then takes a sealed datagram from gateway 1's address.
            var (first, firstKeys) = await OpenChannelAsync(node.ListenEndpoint, PeeringSecrets.A);
            var confirmation = await ReadFrameAsync(first);
            Assert.NotNull(confirmation);
            var plain = new byte[confirmation.Length];
            Assert.True(firstKeys.Frames.Open(confirmation, plain, out int confirmed));
            Assert.Equal(FrameError.None, PeerCodec.Decode(plain.AsSpan(0, confirmed), out var echo));
            Assert.Equal(new DataChannelMessage(new GatewayId(2), 201), echo);

            byte[] Sealed(PeeringDatagrams keys, uint sequence)
            {
                var data = DataFrame(sequence);
                var buffer = new byte[data.Length + keys.Overhead];
                data.CopyTo(buffer, 0);
                return buffer.AsSpan(0, keys.Seal(buffer, data.Length)).ToArray();
            }

            var recorded = Sealed(firstKeys.Datagrams, 10);
            await g1Udp.SendToAsync(recorded, node.ListenEndpoint);
            Assert.True(await WaitAsync(async () => await Received() == 1), "the sealed datagram was not taken");

            var altered = Sealed(firstKeys.Datagrams, 11);
            altered[5] ^= 1;
            foreach (var hostile in new[] { recorded[..20], altered, DataFrame(12) })
            {
                await g1Udp.SendToAsync(hostile, node.ListenEndpoint);
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.DatagramsUnauthenticated == 3)), $"unauthenticated {node.DatagramsUnauthenticated}");

            // 5. A second connection replaces the first one's keys: the datagram recorded under the first is a replay.
            first.Dispose();
            var (second, secondKeys) = await OpenChannelAsync(node.ListenEndpoint, PeeringSecrets.A);
            using (second)
            {
                Assert.NotNull(await ReadFrameAsync(second)); // confirmed: the new keys are in place
                await g1Udp.SendToAsync(recorded, node.ListenEndpoint);
                Assert.True(await WaitAsync(() => Task.FromResult(node.DatagramsUnauthenticated == 4)), $"unauthenticated {node.DatagramsUnauthenticated}");
                await g1Udp.SendToAsync(Sealed(secondKeys.Datagrams, 13), node.ListenEndpoint);
                Assert.True(await WaitAsync(async () => await Received() == 2), "the second channel's datagram was not taken");

                // 6. A sealed DATA frame altered on the channel: it does not open, and the channel closes.
                var frame = SealedFrame(secondKeys.Frames, DataFrame(14));
                frame[10] ^= 1;
                await second.SendAsync(frame);
                Assert.True(await ClosedByPeerAsync(second));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 4)), $"channels unauthenticated {node.ChannelsUnauthenticated}");
            Assert.Equal(2, await Received());
            Assert.Equal(4, node.ChannelsRefused);
        }
    }
}
