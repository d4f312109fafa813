using System.Buffers.Binary;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Federation.Tests.CoreCast;

/// <summary>CoreCast as a per-session forwarding mode of the gateway (seed 004 over the federation's trees), on virtual
/// time: transit bytes per receiver count, delivery to every receiver, the fallback to unicast.</summary>
public class CoreCastGatewayTests(ITestOutputHelper output)
{
    private const int Packets = 20;
    private const int Size = 1000;

    private static byte[] Packet(int i)
    {
        var p = new byte[Size];
        BinaryPrimitives.WriteInt32LittleEndian(p, i);
        p[Size - 1] = (byte)i;
        return p;
    }

    private static List<int> Ids(FederationSim.SimClient c) => c.Received.Select(p => BinaryPrimitives.ReadInt32LittleEndian(p)).ToList();

    /// <summary>Island 1 (owner, g1) and island 2 (g2, <paramref name="receivers"/> numbered clients): the bytes of data
    /// frames that crossed g1 → g2 while <see cref="Packets"/> packets were published.</summary>
    private static (long Bytes, FederationSim.SimClient[] Clients, FederationSim Sim) Run(string delivery, int receivers, bool g2CoreCast = true, int seed = 1)
    {
        var sim = new FederationSim(seed);
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        sim.AddGateway(1, i1);
        sim.AddGateway(2, i2, o => o with { CoreCast = g2CoreCast });
        sim.Connect(1, 2, TimeSpan.FromMilliseconds(5));
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse($"bfed://1/tv/d?delivery={delivery}");
        var clients = Enumerable.Range(1, receivers).Select(r => i2.Join(session, receiver: (uint)r)).ToArray();
        sim.RunFor(TimeSpan.FromSeconds(1));
        long before = sim.DataBytesSent;
        for (int i = 0; i < Packets; i++)
        {
            i1.Publish("tv/d", Packet(i));
            sim.RunFor(TimeSpan.FromMilliseconds(10));
        }

        sim.RunFor(TimeSpan.FromMilliseconds(200));
        return (sim.DataBytesSent - before, clients, sim);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(10)]
    [InlineData(100)]
    public void CoreCastSendsThePayloadOncePerDomainAndAHeaderPerReceiverAndEveryReceiverGetsEveryPacket(int receivers)
    {
        var (coreCast, ccClients, ccSim) = Run("corecast", receivers);
        var (unicast, ucClients, _) = Run("unicast", receivers);
        foreach (var c in ccClients.Concat(ucClients))
        {
            Assert.Equal(Enumerable.Range(0, Packets), Ids(c)); // every packet, once, in order
            Assert.All(c.Received, p => Assert.Equal(Size, p.Length));
        }

        // Exactly: per packet one payload frame and one header per receiver, against one full frame per receiver.
        Assert.Equal(Packets * ((long)BroadcastGateway.CoreCastPayloadOverhead + Size + (long)receivers * BroadcastGateway.CoreCastHeaderBytes), coreCast);
        Assert.Equal(Packets * (long)receivers * (BroadcastGateway.ReceiverDataOverhead + Size), unicast);
        Assert.Equal(Packets, ccSim[1].Counters.CoreCastPayloadsSent);
        Assert.Equal(Packets * receivers, ccSim[1].Counters.CoreCastHeadersSent);
        Assert.Equal(Packets * receivers, ccSim[2].Counters.ReceiverDelivered);
        output.WriteLine($"{receivers} receivers: CoreCast {coreCast:N0} B, unicast {unicast:N0} B, ratio {(double)coreCast / unicast:F3}");
        if (receivers == 1)
        {
            Assert.True(coreCast > unicast); // one receiver: the header is pure overhead
        }
        else
        {
            Assert.True(coreCast < unicast);
        }
    }

    [Fact]
    public void ADomainWithoutCoreCastGetsPlainUnicastAndStillEveryPacket()
    {
        var (fallback, clients, sim) = Run("corecast", 10, g2CoreCast: false);
        var (unicast, _, _) = Run("unicast", 10);
        Assert.Equal(unicast, fallback);
        Assert.Equal(0, sim[1].Counters.CoreCastPayloadsSent);
        Assert.All(clients, c => Assert.Equal(Enumerable.Range(0, Packets), Ids(c)));
    }

    [Fact]
    public void CoreCastCrossesATransitGatewayAndReachesReceiversInTwoIslands()
    {
        // 1 - 2 - 3 in a line; 3 receivers in island 2 and 5 in island 3: g2 is an egress and a transit.
        var sim = new FederationSim(4);
        var islands = new[] { sim.AddIsland(1), sim.AddIsland(2), sim.AddIsland(3) };
        for (uint i = 1; i <= 3; i++)
        {
            sim.AddGateway(i, islands[i - 1]);
        }

        sim.Connect(1, 2, TimeSpan.FromMilliseconds(5));
        sim.Connect(2, 3, TimeSpan.FromMilliseconds(5));
        sim.RunFor(TimeSpan.FromSeconds(1));
        var session = SessionName.Parse("bfed://1/tv/d?delivery=corecast");
        var clients = Enumerable.Range(1, 3).Select(r => islands[1].Join(session, receiver: (uint)r))
            .Concat(Enumerable.Range(1, 5).Select(r => islands[2].Join(session, receiver: (uint)r))).ToArray();
        sim.RunFor(TimeSpan.FromSeconds(1));
        for (int i = 0; i < Packets; i++)
        {
            islands[0].Publish("tv/d", Packet(i));
            sim.RunFor(TimeSpan.FromMilliseconds(10));
        }

        sim.RunFor(TimeSpan.FromMilliseconds(200));
        Assert.All(clients, c => Assert.Equal(Enumerable.Range(0, Packets), Ids(c)));
        Assert.Equal(Packets, sim[1].Counters.CoreCastPayloadsSent); // once to g2 for all 8 receivers
        Assert.Equal(Packets * 8, sim[1].Counters.CoreCastHeadersSent);
        Assert.Equal(Packets, sim[2].Counters.CoreCastPayloadsSent); // once to g3 for its 5
        Assert.Equal(Packets * 5, sim[2].Counters.CoreCastHeadersSent);
    }

    [Fact]
    public void HeadersWithoutTheirPayloadAndPayloadsWithAWrongHashAreCountedAndDropped()
    {
        var (_, clients, sim) = Run("corecast", 2);
        var g2 = sim[2];
        var tree = g2.Sessions.Values.Single();
        var label = tree.UpstreamLabels![0];
        int before = clients[0].Received.Count;

        var header = new byte[BroadcastGateway.CoreCastHeaderBytes];
        new QuickSilver.Federation.Forwarding.DataHeader(0, 32, label, new GatewayId(1), 9_999).Write(header, FrameType.CoreCastHeader);
        header.AsSpan(16, 20).Fill(0xAB); // a hash no payload has
        BinaryPrimitives.WriteUInt32LittleEndian(header.AsSpan(36), 2);
        BinaryPrimitives.WriteUInt32LittleEndian(header.AsSpan(40), 1);
        sim.Inject(1, 2, header);
        Assert.Equal(1, g2.Counters.CoreCastOrphanHeaders);

        var payload = new byte[BroadcastGateway.CoreCastPayloadOverhead + 10];
        new QuickSilver.Federation.Forwarding.DataHeader(0, 32, label, new GatewayId(1), 10_000).Write(payload, FrameType.CoreCastPayload);
        sim.Inject(1, 2, payload); // all-zero hash: not the SHA-1 of the data
        Assert.Equal(1, g2.Counters.CoreCastHashMismatch);

        sim.Inject(1, 2, header.AsSpan(0, 30).ToArray());
        Assert.True(g2.Counters.MalformedTotal >= 1);
        sim.Inject(3, 2, header); // not a peer
        sim.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal(before, clients[0].Received.Count);
    }

    [Fact]
    public void ReceiversFramesRoundTripAndBadOnesAreRefused()
    {
        var session = SessionName.Parse("bfed://1/tv/d?delivery=corecast");
        var frame = PeerCodec.Receivers(session, [new ReceiverId(new GatewayId(2), 5), new ReceiverId(new GatewayId(3), 1)]);
        Assert.Equal(FrameError.None, PeerCodec.Decode(frame, out var m));
        Assert.Equal([new ReceiverId(new GatewayId(2), 5), new ReceiverId(new GatewayId(3), 1)], ((ReceiversMessage)m!).Receivers);
        Assert.Equal(FrameError.Truncated, PeerCodec.Decode(frame.AsSpan(0, frame.Length - 1), out _));
        var zero = PeerCodec.Receivers(session, [new ReceiverId(new GatewayId(2), 0)]);
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(zero, out _));
        Assert.Equal(FrameError.None, PeerCodec.Decode(PeerCodec.Capabilities(1), out var caps));
        Assert.Equal(new CapabilitiesMessage(1), caps);
        Assert.False(SessionName.TryParse("bfed://1/tv/d?delivery=corecast&multi-source=true", out _, out var error));
        Assert.Contains("single-source", error, StringComparison.Ordinal);
        Assert.False(SessionName.TryParse("bfed://1/tv/d?delivery=broadcast", out _, out error));
        Assert.Contains("delivery", error, StringComparison.Ordinal);
    }
}
