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

/// <summary>How <see cref="ClusterPair.RunAsync"/> builds its two gateways. g1 (island 1) is the root of both sessions
/// and has data node 101 when <see cref="RootClustered"/>; g2 (island 2) has data node 201 when
/// <see cref="LeafClustered"/>. With <see cref="Configured"/> every runtime is told the other side's data node, without
/// it they learn it from DATA_ENDPOINT and ASSIGN. Multicast groups 239.255.<see cref="GroupBase"/>.x to
/// 239.255.(<see cref="GroupBase"/> + 3).x, ports from <see cref="Ports"/>.</summary>
internal sealed record ClusterPairSetup(bool RootClustered, bool LeafClustered, bool Configured, int Ports, int GroupBase)
{
    /// <summary>Every gateway's and data node's peering secret (null: none).</summary>
    public byte[]? PeeringSecret { get; init; }

    /// <summary>Data node 201's, when it differs from <see cref="PeeringSecret"/>.</summary>
    public byte[]? LeafNodePeeringSecret { get; init; }

    /// <summary>Every n-th real-time DATA datagram towards or from a data node dropped before the socket (0: none).</summary>
    public int DropEveryNth { get; init; }

    /// <summary>Messages per session.</summary>
    public int Count { get; init; } = 500;
}

/// <summary>The two gateways and data nodes of a <see cref="ClusterPairSetup"/> while it runs.</summary>
internal sealed record ClusterPair(GatewayRuntime G1, GatewayRuntime G2, DataNodeRuntime? Root, DataNodeRuntime? Leaf)
{
    public static readonly GatewayId G1Id = new(1);
    public static readonly GatewayId G2Id = new(2);

    /// <summary>Builds the pair on loopback (control↔data frames authenticated with a cluster secret), joins a bulk and a
    /// real-time session rooted in island 1 at island 2's mediator, sends <see cref="ClusterPairSetup.Count"/> numbered
    /// 100-byte messages into each, and hands what island 2's receivers got (in arrival order) to
    /// <paramref name="check"/> while everything still runs. Waits are bounded; nothing asserts a duration.</summary>
    public static async Task RunAsync(ClusterPairSetup setup, Func<ClusterPair, List<int>, List<int>, Task> check)
    {
        var (rootClustered, leafClustered, b) = (setup.RootClustered, setup.LeafClustered, setup.GroupBase);
        var rootOptions = new ClusterOptions { DataNodes = [101], ClusterSecret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)] };
        var leafOptions = rootOptions with { DataNodes = [201] };
        var mediator = IPEndPoint.Parse($"239.255.{b}.2:{setup.Ports + 9}");
        var n1 = Island($"239.255.{b + 1}.0", setup.Ports);
        var n2 = Island($"239.255.{b + 2}.0", setup.Ports + 2, mediator);
        var rootNet = Island($"239.255.{b + 1}.0", setup.Ports);
        var leafNet = Island($"239.255.{b + 2}.0", setup.Ports + 2);
        var (g1Address, g2Address, rootAddress, leafAddress) = (FreePort(), FreePort(), FreePort(), FreePort());
        DataNodeAddress[] rootKnown = setup.Configured && rootClustered ? [new DataNodeAddress(G1Id, 101, rootAddress)] : [];
        DataNodeAddress[] leafKnown = setup.Configured && leafClustered ? [new DataNodeAddress(G2Id, 201, leafAddress)] : [];
        var root = rootClustered ? new DataNodeRuntime(101, G1Id, rootOptions, rootNet, rootAddress, g1Address, new Dictionary<GatewayId, IPEndPoint> { [G2Id] = g2Address }, leafKnown,
            peeringSecret: setup.PeeringSecret) : null;
        var leaf = leafClustered ? new DataNodeRuntime(201, G2Id, leafOptions, leafNet, leafAddress, g2Address, new Dictionary<GatewayId, IPEndPoint> { [G1Id] = g1Address }, rootKnown,
            peeringSecret: setup.LeafNodePeeringSecret ?? setup.PeeringSecret) : null;
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = G1Id, Island = new IslandId(1), PeeringSecret = setup.PeeringSecret }, n1, g1Address,
            [new PeerConfig(G2Id, g2Address, LinkCosts.Default)], rootClustered ? (rootOptions, new Dictionary<uint, IPEndPoint> { [101] = rootAddress }) : null, leafKnown);
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = G2Id, Island = new IslandId(2), PeeringSecret = setup.PeeringSecret }, n2, g2Address,
            [new PeerConfig(G1Id, g1Address, LinkCosts.Default)], leafClustered ? (leafOptions, new Dictionary<uint, IPEndPoint> { [201] = leafAddress }) : null, rootKnown);

        await using (g1)
        await using (g2)
        await using (root)
        await using (leaf)
        using (n1)
        using (n2)
        using (rootNet)
        using (leafNet)
        {
            foreach (var n in new[] { root, leaf })
            {
                if (n is not null)
                {
                    n.DropEveryNthDataDatagram = setup.DropEveryNth;
                    n.Start();
                }
            }

            g1.DropEveryNthDataDatagram = setup.DropEveryNth;
            g1.Start();
            g2.Start();
            Assert.True(await WaitAsync(async () => (await g2.SnapshotAsync()).Routes.Any(r => r.Destination == 1)
                && (!rootClustered || (await g1.InvokeAsync(g => g.Cluster!.Load.Count)) == 1)
                && (!leafClustered || (await g2.InvokeAsync(g => g.Cluster!.Load.Count)) == 1)), "no route or data node not up");

            var bulkNative = IPEndPoint.Parse($"239.255.{b + 3}.1:{setup.Ports + 8}");
            var realTimeNative = IPEndPoint.Parse($"239.255.{b + 3}.2:{setup.Ports + 7}");
            var groups = new List<IPEndPoint>();
            foreach (var session in new[] { $"bfed://1/{bulkNative.Address}/{bulkNative.Port}", $"bfed://1/{realTimeNative.Address}/{realTimeNative.Port}/?content=real-time" })
            {
                string? answer = await MediatorClient.RequestAsync(mediator, "JOIN", SessionName.Parse(session), TimeSpan.FromSeconds(5));
                Assert.NotNull(answer);
                Assert.StartsWith($"TRANSLATION 239.255.{b + 2}.", answer, StringComparison.Ordinal);
                groups.Add(IPEndPoint.Parse(answer.Split(' ')[1]));
            }

            using var bulkReceiver = Receiver(groups[0]);
            using var realTimeReceiver = Receiver(groups[1]);
            // Both trees reach the data nodes, each gateway knows the other's data node, and the data nodes know each other.
            Assert.True(await WaitAsync(async () =>
                (root is null || await root.InvokeAsync(n => n.SessionCount) == 2) && (leaf is null || await leaf.InvokeAsync(n => n.SessionCount) == 2)
                && (!leafClustered || await g1.InvokeAsync(g => g.Sessions.Values.Count(s => s.PeerEndpoints.GetValueOrDefault(G2Id) == 201)) == 2)
                && (!rootClustered || await g2.InvokeAsync(g => g.Sessions.Values.Count(s => s.PeerEndpoints.GetValueOrDefault(G1Id) == 101)) == 2)
                && (root is null || leaf is null || (root.KnownPeerDataNodes == 1 && leaf.KnownPeerDataNodes == 1))), "the trees did not reach the data nodes");
            await Task.Delay(300); // ASSIGNs with the downstream's labels

            var bulkTask = ReceiveAsync(bulkReceiver, setup.Count);
            var realTimeTask = ReceiveAsync(realTimeReceiver, setup.Count);
            using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            for (int i = 0; i < setup.Count; i++)
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

            await check(new ClusterPair(g1, g2, root, leaf), await bulkTask, await realTimeTask);
        }
    }
}
