using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Threading.Channels;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary>A multicast island federated with an island without multicast (TCP fan-out), on loopback.</summary>
public class TcpFanoutIslandTests
{

    [Fact]
    public async Task AMemberOfATcpFanoutIslandReceivesAMulticastIslandsSession()
    {
        int ports = 40_000 + (Environment.ProcessId % 400) * 10;
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.74.0"), PortBase = ports, PoolSize = 2 });
        var n2 = new TcpFanoutNativeNet(new IPEndPoint(IPAddress.Loopback, 0));
        await using var n2Owner = n2;
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5));
        await using (g1)
        await using (g2)
        {
            var inbox = Channel.CreateUnbounded<byte[]>();
            var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            await socket.ConnectAsync(n2.Endpoint);
            var member = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
            await using (member)
            {
                using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
                var run = member.RunAsync(f => inbox.Writer.TryWrite(f), cts.Token);
                var session = SessionName.Parse($"bfed://1/239.255.75.1/{ports + 5}");
                member.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Join, session.Text));
                var reply = await inbox.Reader.ReadAsync(cts.Token);
                Assert.True(TcpFanoutNativeNet.TryDecode(reply, out byte op, out string text, out _));
                Assert.Equal(TcpFanoutNativeNet.Reply, op);
                Assert.Equal("TRANSLATION fanout/0", text);
                member.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Sub, "fanout/0"));
                for (int i = 0; i < 100 && (await g1.SnapshotAsync()).Sessions.Count == 0; i++)
                {
                    await Task.Delay(50);
                }

                using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
                source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
                await Task.Delay(200); // let the SUB reach the hub before the first message
                for (int i = 0; i < 100; i++)
                {
                    var p = new byte[200];
                    BinaryPrimitives.WriteInt32LittleEndian(p, i);
                    source.SendTo(p, IPEndPoint.Parse($"239.255.75.1:{ports + 5}"));
                }

                var got = new List<int>();
                while (got.Count < 100)
                {
                    var frame = await inbox.Reader.ReadAsync(cts.Token);
                    Assert.True(TcpFanoutNativeNet.TryDecode(frame, out op, out text, out var payload));
                    Assert.Equal(TcpFanoutNativeNet.Pub, op);
                    Assert.Equal("fanout/0", text);
                    got.Add(BinaryPrimitives.ReadInt32LittleEndian(payload.Span));
                }

                Assert.Equal(Enumerable.Range(0, 100), got);

                // A malformed body (op 9) ends the member's connection and is counted.
                member.TrySend([9, 1, 0, (byte)'x']);
                await run.WaitAsync(TimeSpan.FromSeconds(10));
                Assert.Equal(1, n2.BadFrames);
            }
        }
    }
}
