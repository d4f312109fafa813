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

using static QuickSilver.Federation.Tests.Cluster.LoopbackSockets;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>Peering authentication with a clustered gateway on real sockets (loopback; docs/federation.md, "Peering
/// authentication", "Bulk data channels"): bulk data channels authenticate both ends and seal their frames, and real-time
/// datagrams between gateways are sealed under their channel's keys. Waits are bounded; nothing asserts a duration.</summary>
public class ClusteredPeeringAuthenticationTests
{
    private static readonly int Ports = 44_000 + (Environment.ProcessId % 200) * 10;

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
        await ClusterPair.RunAsync(new ClusterPairSetup(rootClustered, leafClustered, false, Ports, 94) { PeeringSecret = PeeringSecrets.A, Count = 300 }, async (pair, bulk, realTime) =>
        {
            var (g1, g2, root, leaf) = pair;
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
        await ClusterPair.RunAsync(new ClusterPairSetup(false, true, false, Ports, 94) { PeeringSecret = PeeringSecrets.A, LeafNodePeeringSecret = PeeringSecrets.B, Count = 300 }, async (pair, bulk, realTime) =>
        {
            var (g1, _, _, leaf) = pair;
            Assert.Empty(bulk);
            Assert.Empty(realTime);
            Assert.True(await WaitAsync(() => Task.FromResult(leaf!.ChannelsUnauthenticated >= 1)), "no refusal counted");
            Assert.Equal(leaf!.ChannelsRefused, leaf.ChannelsUnauthenticated); // every refusal was an authentication failure
            Assert.Equal(0, await leaf.InvokeAsync(n => n.Counters.DataReceived));
            Assert.Equal(0, g1.DataDatagramsToNodes); // no channel was confirmed, so no datagram was sealed and sent
            var channels = await g1.BulkCountersAsync();
            Assert.True(channels.Failed >= 1, $"channels {channels}");
        });
    }

    private static byte[] SealedFrame(FrameSealer sealer, byte[] body)
    {
        var buffer = new byte[body.Length + sealer.Overhead];
        body.CopyTo(buffer, 0);
        sealer.Seal(buffer, body.Length);
        return Frame(buffer);
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
    /// opening, and an honest channel's later frame replayed or altered are each refused, closed and counted; on the honest
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

                // 6. A sealed DATA frame taken once, then replayed on the channel: the copy does not open (the counter moved
                // on), and the channel closes.
                var frame = SealedFrame(secondKeys.Frames, DataFrame(14));
                await second.SendAsync(frame);
                Assert.True(await WaitAsync(async () => await Received() == 3), "the sealed DATA frame was not taken");
                await second.SendAsync(frame);
                Assert.True(await ClosedByPeerAsync(second));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 4)), $"channels unauthenticated {node.ChannelsUnauthenticated}");

            // 7. A sealed DATA frame altered on the channel: it does not open, and the channel closes.
            var (third, thirdKeys) = await OpenChannelAsync(node.ListenEndpoint, PeeringSecrets.A);
            using (third)
            {
                var frame = SealedFrame(thirdKeys.Frames, DataFrame(15));
                frame[10] ^= 1;
                await third.SendAsync(frame);
                Assert.True(await ClosedByPeerAsync(third));
            }

            Assert.True(await WaitAsync(() => Task.FromResult(node.ChannelsUnauthenticated == 5)), $"channels unauthenticated {node.ChannelsUnauthenticated}");
            Assert.Equal(3, await Received());
            Assert.Equal(5, node.ChannelsRefused);
        }
    }
}
