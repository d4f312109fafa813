using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Runtime;
using QuickSilver.Federation.Tests.Cluster;

namespace QuickSilver.Federation.Tests.CoreCast;

/// <summary>CoreCast to numbered receivers on a multicast island (docs/federation.md, "CoreCast as a gateway mode"):
/// clients join through the island's mediator with <c>RECEIVER n port</c>, and the egress gateway rebuilds each packet
/// for each of them and sends it by unicast to the port it named. Over real sockets on loopback; waits are bounded,
/// nothing asserts a duration.</summary>
public class CoreCastMulticastIslandTests
{
    [Fact]
    public async Task ThreeNumberedReceiversOnAMulticastIslandEachGetEveryPacketWhileThePayloadCrossesOnce()
    {
        int ports = 44_000 + (Environment.ProcessId % 300) * 7;
        var mediator = IPEndPoint.Parse($"239.255.78.2:{ports + 6}");
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.78.8"), PortBase = ports, PoolSize = 2 });
        using var n2 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.78.16"), PortBase = ports + 2, PoolSize = 2, Mediator = mediator });
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5));
        await using (g1)
        await using (g2)
        {
            var session = SessionName.Parse($"bfed://1/239.255.78.1/{ports + 5}/?delivery=corecast");
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
            var receivers = new List<Socket>();
            try
            {
                for (uint r = 1; r <= 3; r++)
                {
                    var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
                    socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
                    receivers.Add(socket);
                    string? answer = null;
                    for (int attempt = 0; attempt < 5 && answer is null; attempt++)
                    {
                        answer = await MediatorClient.RequestAsync(mediator, "JOIN", session, TimeSpan.FromSeconds(2),
                            receiver: (r, ((IPEndPoint)socket.LocalEndPoint!).Port));
                    }

                    Assert.NotNull(answer);
                    Assert.StartsWith("TRANSLATION ", answer, StringComparison.Ordinal);
                }

                Assert.Equal(3, await g2.InvokeAsync(_ => n2.ReceiverCount));
                for (int i = 0; i < 200 && await g1.InvokeAsync(g => g.Sessions.Values.Sum(t => t.ReceiversBehind.Values.Sum(x => x.Count))) < 3; i++)
                {
                    await Task.Delay(50, cts.Token);
                }

                await LoopbackSockets.SendNumberedAsync(IPEndPoint.Parse($"239.255.78.1:{ports + 5}"), 100, 500, cts.Token);

                var buffer = new byte[2048];
                foreach (var socket in receivers)
                {
                    var got = new List<int>();
                    while (got.Count < 100)
                    {
                        int n = await socket.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                        Assert.Equal(500, n);
                        got.Add(BinaryPrimitives.ReadInt32LittleEndian(buffer));
                    }

                    Assert.Equal(Enumerable.Range(0, 100), got); // each receiver its own copy of every packet, in order
                }

                var c1 = (await g1.SnapshotAsync()).Counters;
                Assert.Equal(100, c1["CoreCastPayloadsSent"]);
                Assert.Equal(300, c1["CoreCastHeadersSent"]);
                Assert.Equal(300, (await g2.SnapshotAsync()).Counters["ReceiverDelivered"]);
            }
            finally
            {
                foreach (var socket in receivers)
                {
                    socket.Dispose();
                }
            }
        }
    }

    [Theory]
    [InlineData("JOIN bfed://1/239.255.78.1/5000/ RECEIVER 0 4000")]
    [InlineData("JOIN bfed://1/239.255.78.1/5000/ RECEIVER 1 0")]
    [InlineData("JOIN bfed://1/239.255.78.1/5000/ RECEIVER x 4000")]
    [InlineData("JOIN bfed://1/239.255.78.1/5000/ RECIEVER 1 4000")]
    [InlineData("JOIN bfed://1/239.255.78.1/5000/ RECEIVER 1")]
    public async Task AMalformedReceiverJoinIsAnsweredNoRouteAndCounted(string request)
    {
        int ports = 45_500 + (Environment.ProcessId % 300) * 5;
        var mediator = IPEndPoint.Parse($"239.255.79.2:{ports + 4}");
        using var net = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.79.16"), PortBase = ports, PoolSize = 2, Mediator = mediator });
        var upcalls = new RecordingUpcalls();
        net.Bind(upcalls, new InlineLoop());
        using var client = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        client.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        client.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
        client.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        client.ReceiveTimeout = 5000;
        string? answer = null;
        var buffer = new byte[1024];
        for (int attempt = 0; attempt < 5 && answer is null; attempt++)
        {
            client.SendTo(System.Text.Encoding.UTF8.GetBytes(request), mediator);
            try
            {
                answer = System.Text.Encoding.UTF8.GetString(buffer, 0, client.Receive(buffer));
            }
            catch (SocketException)
            {
            }
        }

        Assert.NotNull(answer);
        Assert.StartsWith("NO_ROUTE ", answer, StringComparison.Ordinal);
        Assert.True(net.BadMediatorRequests >= 1);
        Assert.Equal(0, upcalls.Joins);
    }

    private sealed class RecordingUpcalls : NativeNet.INativeNetUpcalls
    {
        public int Joins;

        public void RecvdData(NativeNet.NativeChannel channel, ReadOnlySpan<byte> data)
        {
        }

        public void RecvdJoinRequest(NativeNet.JoinRequest request) => Interlocked.Increment(ref Joins);

        public void RecvdLeaveRequest(SessionName session)
        {
        }
    }

    private sealed class InlineLoop : NativeNet.INativeNetLoop
    {
        public bool TryPost(Action action)
        {
            action();
            return true;
        }

        public bool TryPostData(NativeNet.NativeChannel channel, ReadOnlySpan<byte> data) => true;
    }
}
