using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Tests.Peering;

public class PeerCodecTests
{
    private static readonly SessionName Session = SessionName.Parse("bfed://3/239.1.2.3/5000/5001/?metric=latency");

    public static IEnumerable<byte[]> ValidFrames()
    {
        var update = new RouteUpdate();
        update.Withdrawals.Add(new RouteWithdrawal(RouteMetric.Latency, new GatewayId(9)));
        update.Adverts.Add(new RouteAdvert(RouteMetric.Hops, new GatewayId(5), new IslandId(2), 3, [new GatewayId(4), new GatewayId(5)]));
        yield return PeerCodec.Hello(new GatewayId(1), new IslandId(2), 47001);
        yield return PeerCodec.KeepAlive();
        yield return PeerCodec.Routes(update);
        yield return PeerCodec.SrouteRequest(new SrouteRequestMessage(7, Session, new GatewayId(5), [new GatewayId(5), new GatewayId(6)], [new GatewayId(1)]));
        yield return PeerCodec.SrouteResponse(new SrouteResponseMessage(7, Session, [new SrouteCost(new GatewayId(5), 10)], [new GatewayId(1), new GatewayId(5)]));
        yield return PeerCodec.Join(new JoinMessage(Session, new GatewayId(5), [new GatewayId(1)]));
        yield return PeerCodec.Translation(new TranslationMessage(Session, [new FlowLabel(11), new FlowLabel(12)]));
        yield return PeerCodec.Leave(Session);
        yield return PeerCodec.NoRoute(Session);
        yield return PeerCodec.DataChannel(new GatewayId(2), 201);
        yield return PeerCodec.DataChannel(new GatewayId(2), 0);
        yield return PeerCodec.PeerAuth(new GatewayId(3), Enumerable.Range(0, PeeringHandshake.NonceBytes).Select(i => (byte)(i * 7)).ToArray());
    }

    [Fact]
    public void EveryControlFrameRoundTrips()
    {
        foreach (var frame in ValidFrames())
        {
            Assert.Equal(FrameError.None, PeerCodec.Decode(frame, out var message));
            Assert.NotNull(message);
            byte[] again = message switch
            {
                HelloMessage m => PeerCodec.Hello(m.Gateway, m.Island, m.UdpPort),
                KeepAliveMessage => PeerCodec.KeepAlive(),
                RouteUpdateMessage m => PeerCodec.Routes(m.Update),
                SrouteRequestMessage m => PeerCodec.SrouteRequest(m),
                SrouteResponseMessage m => PeerCodec.SrouteResponse(m),
                JoinMessage m => PeerCodec.Join(m),
                TranslationMessage m => PeerCodec.Translation(m),
                LeaveMessage m => PeerCodec.Leave(m.Session),
                NoRouteMessage m => PeerCodec.NoRoute(m.Session),
                DataChannelMessage m => PeerCodec.DataChannel(m.Gateway, m.Node),
                PeerAuthMessage m => PeerCodec.PeerAuth(m.Gateway, m.Nonce),
                _ => throw new InvalidOperationException(),
            };
            Assert.Equal(frame, again);
        }
    }

    [Fact]
    public void DataChannelRefusesGatewayZeroAndANodeNumberedAsItsGateway()
    {
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(PeerCodec.DataChannel(new GatewayId(0), 201), out _));
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(PeerCodec.DataChannel(new GatewayId(7), 7), out _));
        Assert.Equal(FrameError.None, PeerCodec.Decode(PeerCodec.DataChannel(new GatewayId(7), 0), out var m));
        Assert.Equal(new DataChannelMessage(new GatewayId(7), 0), m);
    }

    [Fact]
    public void EveryTruncationAndEveryExtensionOfAValidFrameIsRefused()
    {
        foreach (var frame in ValidFrames())
        {
            for (int n = 0; n < frame.Length; n++)
            {
                Assert.NotEqual(FrameError.None, PeerCodec.Decode(frame.AsSpan(0, n), out var m));
                Assert.Null(m);
            }

            Assert.Equal(FrameError.TrailingBytes, PeerCodec.Decode([.. frame, 0], out _));
        }
    }

    [Fact]
    public void RandomBytesAndSingleByteCorruptionsNeverThrow()
    {
        var random = new Random(1234);
        var frames = ValidFrames().ToList();
        for (int i = 0; i < 20_000; i++)
        {
            byte[] bytes;
            if (i % 2 == 0)
            {
                bytes = new byte[random.Next(0, 64)];
                random.NextBytes(bytes);
                if (bytes.Length > 1)
                {
                    bytes[0] = PeerCodec.Version;
                    bytes[1] = (byte)random.Next(0, 12);
                }
            }
            else
            {
                bytes = (byte[])frames[random.Next(frames.Count)].Clone();
                bytes[random.Next(bytes.Length)] = (byte)random.Next(256);
            }

            var error = PeerCodec.Decode(bytes, out var message);
            Assert.Equal(error == FrameError.None, message is not null);
        }
    }

    [Fact]
    public void CountsBeyondTheBoundsAreRefusedBeforeAllocating()
    {
        // A route update that claims 65,535 withdrawals in a 6-byte frame.
        Assert.Equal(FrameError.BadLength, PeerCodec.Decode([1, 3, 0xff, 0xff, 0, 0], out _));
        // A JOIN whose path claims 255 gateways.
        var join = PeerCodec.Join(new JoinMessage(Session, default, [new GatewayId(1)]));
        join[^5] = 255;
        Assert.Equal(FrameError.BadLength, PeerCodec.Decode(join, out _));
        // A session name whose length prefix says 60,000.
        Assert.Equal(FrameError.BadLength, PeerCodec.Decode([1, 8, 0x60, 0xea], out _));
        Assert.Equal(FrameError.BadVersion, PeerCodec.Decode([2, 2], out _));
        Assert.Equal(FrameError.UnknownType, PeerCodec.Decode([1, 99], out _));
        Assert.Equal(FrameError.UnknownType, PeerCodec.Decode([1, 10, 0, 0], out _)); // DATA is not a control frame
    }

    [Fact]
    public void DataHeaderRoundTripsAndRefusesZeroLabelsAndShortFrames()
    {
        var frame = new byte[DataHeader.Size + 3];
        new DataHeader(0, 7, new FlowLabel(42), new GatewayId(3), uint.MaxValue).Write(frame);
        Assert.True(DataHeader.TryRead(frame, out var h));
        Assert.Equal(new DataHeader(0, 7, new FlowLabel(42), new GatewayId(3), uint.MaxValue), h);
        Assert.False(DataHeader.TryRead(frame.AsSpan(0, DataHeader.Size - 1), out _));
        new DataHeader(0, 7, default, new GatewayId(3), 1).Write(frame);
        Assert.False(DataHeader.TryRead(frame, out _));
    }
}
