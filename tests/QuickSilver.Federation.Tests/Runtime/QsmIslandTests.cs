using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Threading.Channels;
using QuickSilver.Core.Io;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Membership.Service;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary>A multicast island's session delivered into an island that is a QuickSilver (QSM) group, through the
/// public QuickSilverNode API, on loopback. Waits are bounded hang guards.</summary>
public class QsmIslandTests
{
    private static QuickSilverNodeOptions Options(NetAddress gms, bool embedded) => new()
    {
        Gms = gms,
        EmbeddedGms = embedded,
        Region = new() { TokenInterval = TimeSpan.FromMilliseconds(100) },
        GmsServer = new GmsOptions
        {
            BatchInterval = TimeSpan.FromMilliseconds(20),
            MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
        },
    };

    [Fact]
    public async Task AMemberOfAQsmGroupIslandReceivesAMulticastIslandsSession()
    {
        int ports = 38_000 + (Environment.ProcessId % 150) * 10;
        var gms = NetAddress.Loopback((ushort)Random.Shared.Next(30000, 60000));
        await using var gatewayNode = await QuickSilverNode.StartAsync(Options(gms, embedded: true));
        await using var client = await QuickSilverNode.StartAsync(Options(gms, embedded: false));
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.76.0"), PortBase = ports, PoolSize = 2 });
        var n2 = new QsmNativeNet(gatewayNode);
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5));
        await using (g1)
        await using (g2)
        {
            var session = SessionName.Parse($"bfed://1/239.255.77.1/{ports + 5}");
            var answer = new TaskCompletionSource<MediatorReply>(TaskCreationOptions.RunContinuationsAsynchronously);
            g2.Post(() => g2.Gateway.RecvdJoinRequest(new JoinRequest(session, r => answer.TrySetResult(r))));
            var reply = await answer.Task.WaitAsync(TimeSpan.FromSeconds(10));
            Assert.Equal(MediatorReplyKind.Translation, reply.Kind);
            Assert.StartsWith("bfed-down/1/", reply.Addresses[0], StringComparison.Ordinal);

            var inbox = Channel.CreateUnbounded<int>();
            var group = await client.JoinGroupAsync(reply.Addresses[0]);
            group.OnMessage = (sender, sequence, payload) => inbox.Writer.TryWrite(BinaryPrimitives.ReadInt32LittleEndian(payload));
            // Wait until both nodes are in the group's view and g1 has the tree, then publish in island 1.
            for (int i = 0; i < 200 && (await client.GetViewMemberCountAsync(group) < 2 || (await g1.SnapshotAsync()).Sessions.Count == 0); i++)
            {
                await Task.Delay(50);
            }

            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            for (int i = 0; i < 100; i++)
            {
                var p = new byte[200];
                BinaryPrimitives.WriteInt32LittleEndian(p, i);
                source.SendTo(p, IPEndPoint.Parse($"239.255.77.1:{ports + 5}"));
                await Task.Delay(2);
            }

            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
            var got = new List<int>();
            try
            {
                while (got.Count < 100)
                {
                    got.Add(await inbox.Reader.ReadAsync(cts.Token));
                }
            }
            catch (OperationCanceledException)
            {
            }

            Assert.Equal(Enumerable.Range(0, 100), got);
        }
    }
}
