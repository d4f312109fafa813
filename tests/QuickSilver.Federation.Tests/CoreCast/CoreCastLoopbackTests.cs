using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Threading.Channels;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Runtime;
using QuickSilver.Federation.Tests.Cluster;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Tests.CoreCast;

/// <summary>CoreCast over a real peering link: a multicast island's session delivered to three members of a TCP
/// fan-out island one by one (the plug-in addresses each receiver). Waits are bounded; nothing asserts a duration.</summary>
public class CoreCastLoopbackTests
{
    [Fact]
    public async Task ThreeFanoutMembersEachGetEveryPacketWhileThePayloadCrossesOnce()
    {
        int ports = 42_000 + (Environment.ProcessId % 400) * 5;
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.76.0"), PortBase = ports, PoolSize = 2 });
        var n2 = new TcpFanoutNativeNet(new IPEndPoint(IPAddress.Loopback, 0));
        await using var n2Owner = n2;
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5));
        await using (g1)
        await using (g2)
        {
            var session = SessionName.Parse($"bfed://1/239.255.77.1/{ports + 3}/?delivery=corecast");
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
            var members = new List<(FramedConnection Connection, Channel<byte[]> Inbox, Task Run)>();
            for (int m = 0; m < 3; m++)
            {
                var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                await socket.ConnectAsync(n2.Endpoint);
                var connection = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
                var inbox = Channel.CreateUnbounded<byte[]>();
                var run = connection.RunAsync(f => inbox.Writer.TryWrite(f), cts.Token);
                connection.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Join, session.Text));
                var reply = await inbox.Reader.ReadAsync(cts.Token);
                Assert.True(TcpFanoutNativeNet.TryDecode(reply, out _, out string text, out _));
                Assert.StartsWith("TRANSLATION fanout/", text, StringComparison.Ordinal);
                members.Add((connection, inbox, run));
            }

            try
            {
                // g1 learns the three receivers behind g2 (RECEIVERS) and that g2 takes CoreCast (CAPABILITIES).
                for (int i = 0; i < 200 && await g1.InvokeAsync(g => g.Sessions.Values.Sum(t => t.ReceiversBehind.Values.Sum(r => r.Count))) < 3; i++)
                {
                    await Task.Delay(50);
                }

                await LoopbackSockets.SendNumberedAsync(IPEndPoint.Parse($"239.255.77.1:{ports + 3}"), 100, 500);

                foreach (var (_, inbox, _) in members)
                {
                    var got = new List<int>();
                    while (got.Count < 100)
                    {
                        var frame = await inbox.Reader.ReadAsync(cts.Token);
                        Assert.True(TcpFanoutNativeNet.TryDecode(frame, out byte op, out _, out var payload));
                        Assert.Equal(TcpFanoutNativeNet.Pub, op);
                        got.Add(BinaryPrimitives.ReadInt32LittleEndian(payload.Span));
                    }

                    Assert.Equal(Enumerable.Range(0, 100), got); // each member its own copy of every packet, in order
                }

                var c1 = (await g1.SnapshotAsync()).Counters;
                Assert.Equal(100, c1["CoreCastPayloadsSent"]);
                Assert.Equal(300, c1["CoreCastHeadersSent"]);
                Assert.Equal(0, c1["ReceiverDataSent"]);
                Assert.Equal(300, (await g2.SnapshotAsync()).Counters["ReceiverDelivered"]);
            }
            finally
            {
                foreach (var (connection, _, _) in members)
                {
                    await connection.DisposeAsync();
                }
            }
        }
    }
}
