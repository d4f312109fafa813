using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary>Two real gateways on loopback: TCP peering, IP multicast islands (two group ranges), the multicast mediator.
/// Waits are bounded (seconds); nothing asserts a duration.</summary>
public class LoopbackGatewayTests
{
    private static readonly int Ports = 46_000 + (Environment.ProcessId % 200) * 20;

    private static async Task<(GatewayRuntime G1, GatewayRuntime G2, MulticastNativeNet N1, MulticastNativeNet N2)> StartPairAsync(int offset, byte[]? peeringSecret = null)
    {
        var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.71.0"), PortBase = Ports + offset, PoolSize = 4, Mediator = IPEndPoint.Parse($"239.255.70.1:{Ports + offset + 8}") });
        var n2 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.72.0"), PortBase = Ports + offset + 4, PoolSize = 4, Mediator = IPEndPoint.Parse($"239.255.70.2:{Ports + offset + 9}") });
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5), peeringSecret: peeringSecret);
        return (g1, g2, n1, n2);
    }

    /// <summary>With <paramref name="sealedLink"/> both gateways share a peering secret: the link is authenticated and
    /// every frame sealed (docs/federation.md, "Peering authentication"); data crosses as without.</summary>
    [Theory]
    [InlineData(false, false)]
    [InlineData(true, false)]
    [InlineData(false, true)]
    [InlineData(true, true)]
    public async Task PublishInOneIslandReceiveInTheOtherThroughTwoGateways(bool realTime, bool sealedLink)
    {
        int o = (realTime ? 0 : 24) + (sealedLink ? 36 : 0);
        var (g1, g2, n1, n2) = await StartPairAsync(o, sealedLink ? PeeringSecrets.A : null);
        await using (g1)
        await using (g2)
        using (n1)
        using (n2)
        {
            var s2 = await g2.SnapshotAsync();
            Assert.Single(s2.Peers);
            Assert.Contains(s2.Routes, r => r.Destination == 1 && r.Metric == "Hops");

            var session = SessionName.Parse($"bfed://1/239.255.73.1/{Ports + o + 10}" + (realTime ? "/?content=real-time" : ""));
            string? answer = await MediatorClient.RequestAsync(IPEndPoint.Parse($"239.255.70.2:{Ports + o + 9}"), "JOIN", session, TimeSpan.FromSeconds(5));
            Assert.NotNull(answer);
            Assert.StartsWith("TRANSLATION 239.255.72.0:", answer, StringComparison.Ordinal);
            var translated = IPEndPoint.Parse(answer.Split(' ')[1]);

            using var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
            receiver.Bind(new IPEndPoint(translated.Address, translated.Port));
            receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(translated.Address, IPAddress.Loopback));

            // Wait until the tree reaches g1 (it subscribes to the native session), then publish in island 1.
            for (int i = 0; i < 100 && (await g1.SnapshotAsync()).Sessions.Count == 0; i++)
            {
                await Task.Delay(50);
            }

            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            var native = IPEndPoint.Parse($"239.255.73.1:{Ports + o + 10}");
            var got = new HashSet<int>();
            var buffer = new byte[2048];
            for (int i = 0; i < 200; i++)
            {
                var packet = new byte[100];
                BinaryPrimitives.WriteInt32LittleEndian(packet, i);
                source.SendTo(packet, native);
                if (i % 20 == 19)
                {
                    await Task.Delay(5);
                }
            }

            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
            try
            {
                while (got.Count < 200)
                {
                    var r = await receiver.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                    Assert.Equal(100, r);
                    got.Add(BinaryPrimitives.ReadInt32LittleEndian(buffer));
                }
            }
            catch (OperationCanceledException)
            {
            }

            // A bulk session loses nothing (TCP between the gateways). A real-time one is best effort end to end (UDP
            // from the source, between the gateways and to the receiver, docs/federation.md): on a loaded machine one
            // datagram in 200 was seen lost in CI, and 20 under a parallel test load, so it must carry most (a broken or
            // systematically lossy path carries none or few), not all; what it lost is counted by the gateways.
            if (realTime)
            {
                Assert.InRange(got.Count, 100, 200);
            }
            else
            {
                Assert.Equal(200, got.Count);
            }

            var s1 = await g1.SnapshotAsync();
            Assert.True(s1.Sessions.Single().Root);
            Assert.Equal([2u], s1.Sessions.Single().Downstream);
            // A real-time session crosses the peering link as UDP datagrams (seed §5.3), a bulk one inside the TCP link.
            if (realTime)
            {
                Assert.InRange(s1.Counters["DataDatagrams"], got.Count, 200);
            }
            else
            {
                Assert.Equal(0, s1.Counters["DataDatagrams"]);
            }

            // A datagram from anywhere but g1's announced address is refused and counted, never forwarded.
            long delivered = (await g2.SnapshotAsync()).Counters["DataDelivered"];
            using var stranger = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            var fake = new byte[116];
            new QuickSilver.Federation.Forwarding.DataHeader(0, 32, new FlowLabel(1), new GatewayId(1), 999_999).Write(fake);
            stranger.SendTo(fake, g2.ListenEndpoint);
            for (int i = 0; i < 100 && g2.DatagramsRefused == 0; i++)
            {
                await Task.Delay(20);
            }

            Assert.Equal(1, g2.DatagramsRefused);
            Assert.Equal(delivered, (await g2.SnapshotAsync()).Counters["DataDelivered"]);
            foreach (var g in new[] { g1, g2 })
            {
                Assert.Equal(0, g.PeeringUnauthenticated + g.PeeringHandshakesFailed + g.PeeringFramesRejected + g.DatagramsUnauthenticated);
            }
        }
    }

    [Fact]
    public async Task AConnectionThatDoesNotStartWithAHelloFromAConfiguredPeerIsClosedAndCounted()
    {
        var (g1, g2, n1, n2) = await StartPairAsync(12);
        await using (g1)
        await using (g2)
        using (n1)
        using (n2)
        {
            // 1: a HELLO from an unknown gateway; 2: a keep-alive first; 3: a bulk data channel from a data node no one
            // configured; 4: a length prefix of 4 GiB.
            byte[][] openings =
            [
                Frame(PeerCodec.Hello(new GatewayId(77), new IslandId(7))),
                Frame(PeerCodec.KeepAlive()),
                Frame(PeerCodec.DataChannel(new GatewayId(1), 999)),
                [0xff, 0xff, 0xff, 0xff, 1, 2],
            ];
            foreach (var opening in openings)
            {
                using var s = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await s.ConnectAsync(g2.ListenEndpoint);
                await s.SendAsync(opening);
                var buffer = new byte[4096];
                using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(10));
                int total = 0, n;
                while ((n = await s.ReceiveAsync(buffer, SocketFlags.None, cts.Token)) > 0)
                {
                    total += n; // its HELLO, then the close
                }
            }

            Assert.True(g2.HelloRefused >= 3);
            var snapshot = await g2.SnapshotAsync();
            Assert.Single(snapshot.Peers); // g1 only: nothing grew
        }
    }

    private static byte[] Frame(byte[] body)
    {
        var f = new byte[4 + body.Length];
        BinaryPrimitives.WriteUInt32LittleEndian(f, (uint)body.Length);
        body.CopyTo(f, 4);
        return f;
    }
}
