using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using static QuickSilver.Federation.Tests.Cluster.LoopbackSockets;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>A standby control node on real sockets (loopback): g1 (island 1, the session's root) and g2 (island 2) with
/// a primary and a standby control node and data node 201, all runtimes in this process, control↔data frames sealed.
/// The primary's runtime is disposed (its sockets close, as when the process dies); the standby takes over, g1 dials its
/// second address, and the island-2 receiver, which never joins again, gets the next messages on the same group.
/// Waits are bounded; nothing asserts a duration.</summary>
[Collection(nameof(StandbyLoopbackTests))]
public class StandbyLoopbackTests
{
    private static readonly int Ports = 42_000 + (Environment.ProcessId % 200) * 10;
    private static readonly GatewayId G1 = new(1);
    private static readonly GatewayId G2 = new(2);

    [Fact]
    public async Task ThePrimaryControlNodeDiesTheStandbyTakesOverAndTheReceiverGetsTheNextMessagesWithoutRejoining()
    {
        var options = new ClusterOptions { DataNodes = [201], ControlNodes = 2, ClusterSecret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)] };
        var mediator = IPEndPoint.Parse($"239.255.90.2:{Ports + 9}");
        var n1 = Island("239.255.91.0", Ports);
        var primaryNet = Island("239.255.92.0", Ports + 2, mediator);
        var standbyNet = Island("239.255.92.0", Ports + 2, mediator);
        var nodeNet = Island("239.255.92.0", Ports + 2);
        var (g1Address, primaryAddress, standbyAddress, nodeAddress) = (FreePort(), FreePort(), FreePort(), FreePort());
        var g2Options = new GatewayOptions { Gateway = G2, Island = new IslandId(2) };
        var own = new Dictionary<uint, IPEndPoint> { [201] = nodeAddress };
        var node = new DataNodeRuntime(201, G2, options, nodeNet, nodeAddress, primaryAddress, new Dictionary<GatewayId, IPEndPoint> { [G1] = g1Address }, [],
            standbyControl: standbyAddress);
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = G1, Island = new IslandId(1) }, n1, g1Address,
            [new PeerConfig(G2, primaryAddress, LinkCosts.Default) { Standby = standbyAddress }]);
        var primary = new GatewayRuntime(g2Options, primaryNet, primaryAddress, [new PeerConfig(G1, g1Address, LinkCosts.Default)], (options, own), null, standbyAddress);
        var standby = new GatewayRuntime(g2Options, standbyNet, standbyAddress, [new PeerConfig(G1, g1Address, LinkCosts.Default)], (options with { Standby = true }, own), null, primaryAddress);
        await using (g1)
        await using (primary) // disposed in the middle too (idempotent)
        await using (standby)
        await using (node)
        using (n1)
        using (primaryNet)
        using (standbyNet)
        using (nodeNet)
        {
            node.Start();
            standby.Start();
            primary.Start();
            g1.Start();
            Assert.True(await WaitAsync(async () => (await g1.SnapshotAsync()).Routes.Any(r => r.Destination == 2)
                && await primary.InvokeAsync(g => g.Cluster!.Load.Count) == 1), "no route to g2 or the data node not up");
            Assert.False(await standby.InvokeAsync(g => g.IsActive));

            var native = IPEndPoint.Parse($"239.255.93.1:{Ports + 8}");
            string? answer = await MediatorClient.RequestAsync(mediator, "JOIN", SessionName.Parse($"bfed://1/{native.Address}/{native.Port}"), TimeSpan.FromSeconds(5));
            Assert.NotNull(answer);
            Assert.StartsWith("TRANSLATION 239.255.92.", answer, StringComparison.Ordinal);
            using var receiver = Receiver(IPEndPoint.Parse(answer.Split(' ')[1]));
            Assert.True(await WaitAsync(async () => await node.InvokeAsync(n => n.SessionCount) == 1
                && await g1.InvokeAsync(g => g.Sessions.Values.Count(s => s.PeerEndpoints.GetValueOrDefault(G2) == 201)) == 1), "the tree did not reach the data node");
            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            Assert.True(await ThroughAsync(source, native, receiver), "no message got through before the crash");
            var before = ReceiveAsync(receiver, 100);
            Send(source, native, 0, 100);
            Assert.Equal(Enumerable.Range(0, 100), (await before).Order());

            await primary.DisposeAsync(); // the primary's process dies: its links reset, its heartbeats stop
            primaryNet.Dispose();
            Assert.True(await WaitAsync(async () => await standby.InvokeAsync(g => g.IsActive && g.Sessions.Values.Any(s => s.Upstream == G1 && s.UpstreamLabels is not null))
                && await node.InvokeAsync(n => n.Term) == 2, TimeSpan.FromSeconds(30)), "the standby did not take over and re-join");
            Assert.True(await ThroughAsync(source, native, receiver), "no message got through after the takeover");

            var after = ReceiveAsync(receiver, 200);
            Send(source, native, 100, 100);
            var got = await after;
            Assert.Equal(Enumerable.Range(100, 100), got.Order());
            Assert.Equal(201u, await standby.InvokeAsync(g => g.Cluster!.NodeOf(g.Sessions.Keys.Single())));
            Assert.Equal(1, await standby.InvokeAsync(g => g.Counters.TreesRebuilt));
        }
    }

    /// <summary>Sends an uncounted probe (id 1,000,000, which <see cref="LoopbackSockets.ReceiveAsync"/> ignores) every
    /// 100 ms until one reaches the receiver (the data node has its ASSIGN with the upstream's labels), for at most 20 s.</summary>
    private static async Task<bool> ThroughAsync(Socket source, IPEndPoint group, Socket receiver)
    {
        var probe = new byte[100];
        BinaryPrimitives.WriteInt32LittleEndian(probe, 1_000_000);
        var buffer = new byte[2048];
        for (int attempt = 0; attempt < 200; attempt++)
        {
            source.SendTo(probe, group);
            using var cts = new CancellationTokenSource(TimeSpan.FromMilliseconds(100));
            try
            {
                int n = await receiver.ReceiveAsync(buffer, SocketFlags.None, cts.Token);
                if (n == 100 && BinaryPrimitives.ReadInt32LittleEndian(buffer) == 1_000_000)
                {
                    return true;
                }
            }
            catch (OperationCanceledException)
            {
            }
        }

        return false;
    }

    private static void Send(Socket source, IPEndPoint group, int first, int count)
    {
        for (int i = first; i < first + count; i++)
        {
            var packet = new byte[100];
            BinaryPrimitives.WriteInt32LittleEndian(packet, i);
            source.SendTo(packet, group);
            if (i % 20 == 19)
            {
                Thread.Sleep(5);
            }
        }
    }
}

/// <summary>Runs <see cref="StandbyLoopbackTests"/> alone: its g1 redials a dead control node's freed port every other
/// second and its five runtimes load the machine during the takeover; in parallel with the peering-authentication
/// tests (whose gateways bind ephemeral ports and count handshakes within 10 s) one of those failed 3 times in 8 runs.</summary>
[CollectionDefinition(nameof(StandbyLoopbackTests), DisableParallelization = true)]
public sealed class StandbyLoopbackCollection;
