using QuickSilver.Federation.CoreCast;

namespace QuickSilver.Federation.Tests.CoreCast;

public class DataPlaneTests
{
    private sealed class Out : IIngressOutput, IEgressOutput
    {
        public List<(uint Domain, byte Type)> ToDomains { get; } = [];

        public List<(uint Destination, byte[] Data)> Delivered { get; } = [];

        public List<uint> Unicasts { get; } = [];

        public int Multicasts { get; private set; }

        public void ToDomain(uint domain, ReadOnlySpan<byte> packet) => ToDomains.Add((domain, packet[1]));

        public void Unicast(uint domain, uint destination, ReadOnlySpan<byte> data) => Unicasts.Add(destination);

        public void Deliver(uint destination, ReadOnlySpan<byte> data) => Delivered.Add((destination, data.ToArray()));

        public void Multicast(uint channel, ReadOnlySpan<byte> data) => Multicasts++;
    }

    [Theory]
    [InlineData(1)]
    [InlineData(10)]
    [InlineData(100)]
    public void TransitBytesAreEquationThreeExactlyAndEveryReceiverGetsEveryChunkOnce(int perDomain)
    {
        var r = TransitExperiment.Run(domains: 3, receiversPerDomain: perDomain, chunks: 50);
        Assert.True(r.EveryReceiverGotEveryChunkOnce);
        Assert.Equal(50L * 3, r.PayloadPackets);               // once per domain per chunk
        Assert.Equal(50L * 3 * perDomain, r.HeaderPackets);    // once per receiver per chunk
        Assert.Equal(r.ModelTransitBytes, r.CoreCastTransitBytes);
        Assert.Equal(50L * 3 * perDomain, r.Delivered);
        if (perDomain == 1)
        {
            Assert.True(r.MeasuredRatio > 1, "one receiver per domain: the header is pure overhead");
        }
        else
        {
            Assert.True(r.MeasuredRatio < 1);
        }
    }

    [Fact]
    public void AlgorithmOneSendsThePayloadOncePerDomainThenHeadersAndDropsWhatDoesNotMatch()
    {
        var o = new Out();
        var ingress = new IngressRouter(o, d => d switch { < 10 => (1u, true), < 20 => (2u, true), < 30 => (3u, false), _ => null });
        var data = new byte[100];
        var hash = CoreCastWire.Hash(data);
        var header = CoreCastWire.Header(1, hash, 1);
        ingress.OnPacket(header);                                       // before any payload
        Assert.Equal(1, ingress.Counters.UnknownPayload);
        var bad = CoreCastWire.Payload(1, hash, data);
        bad[^1] = 9;                                                    // data no longer matches its hash
        ingress.OnPacket(bad);
        Assert.Equal(1, ingress.Counters.HashMismatch);
        ingress.OnPacket(CoreCastWire.Payload(1, hash, data));
        Assert.Empty(o.ToDomains);                                      // "no packet is sent upon receiving a payload"
        foreach (uint d in new uint[] { 1, 2, 11, 3, 12, 25, 99 })
        {
            ingress.OnPacket(CoreCastWire.Header(1, hash, d));
        }

        Assert.Equal([(1u, (byte)1), (1u, (byte)2), (1u, (byte)2), (2u, (byte)1), (2u, (byte)2), (1u, (byte)2), (2u, (byte)2)], o.ToDomains);
        Assert.Equal([25u], o.Unicasts);                                // domain 3 has no CoreCast
        Assert.Equal(1, ingress.Counters.UnknownDestination);
        ingress.OnPacket([1, 2, 3]);
        Assert.Equal(1, ingress.Counters.Malformed);
    }

    [Fact]
    public void ThePayloadIsResentAfterEveryNHeadersWhenAsked()
    {
        var o = new Out();
        var ingress = new IngressRouter(o, d => (1u, true)) { ResendEvery = 3 };
        var data = new byte[10];
        var hash = CoreCastWire.Hash(data);
        ingress.OnPacket(CoreCastWire.Payload(1, hash, data));
        for (uint d = 0; d < 7; d++)
        {
            ingress.OnPacket(CoreCastWire.Header(1, hash, d));
        }

        Assert.Equal("PHHHPHHHPH", string.Concat(o.ToDomains.Select(x => x.Type == 1 ? "P" : "H")));
    }

    [Fact]
    public void AlgorithmTwoRebuildsOnePacketPerHeaderOrMulticastsOncePerPayload()
    {
        var o = new Out();
        var egress = new EgressRouter(o);
        var data = "live video chunk"u8.ToArray();
        var hash = CoreCastWire.Hash(data);
        egress.OnPacket(CoreCastWire.Payload(4, hash, data));
        egress.OnPacket(CoreCastWire.Header(4, hash, 7));
        egress.OnPacket(CoreCastWire.Header(4, hash, 8));
        egress.OnPacket(CoreCastWire.Header(4, CoreCastWire.Hash([1]), 9));
        Assert.Equal([7u, 8u], o.Delivered.Select(x => x.Destination));
        Assert.All(o.Delivered, x => Assert.Equal(data, x.Data));
        Assert.Equal(1, egress.Counters.UnknownPayload);

        var m = new Out();
        var multicast = new EgressRouter(m) { LocalMulticast = true };
        multicast.OnPacket(CoreCastWire.Payload(4, hash, data));
        for (uint d = 0; d < 5; d++)
        {
            multicast.OnPacket(CoreCastWire.Header(4, hash, d));
        }

        Assert.Equal(1, m.Multicasts);
        Assert.Empty(m.Delivered);
    }

    [Fact]
    public void StateGrowsWithChannelsNotReceiversAndChannelsAreBounded()
    {
        var o = new Out();
        var ingress = new IngressRouter(o, d => (d % 4, true), maxChannels: 8);
        for (uint c = 0; c < 20; c++)
        {
            var data = BitConverter.GetBytes(c);
            ingress.OnPacket(CoreCastWire.Payload(c, CoreCastWire.Hash(data), data));
        }

        Assert.Equal(8, ingress.Channels);
        Assert.Equal(12, ingress.Counters.ChannelsFull);
    }

    [Fact]
    public void RandomPacketsNeverThrow()
    {
        var random = new Random(5);
        var o = new Out();
        var ingress = new IngressRouter(o, d => (1u, true));
        var egress = new EgressRouter(o);
        for (int i = 0; i < 20_000; i++)
        {
            var p = new byte[random.Next(0, 80)];
            random.NextBytes(p);
            if (p.Length > 1)
            {
                p[0] = CoreCastWire.Version;
                p[1] = (byte)random.Next(0, 4);
            }

            ingress.OnPacket(p);
            egress.OnPacket(p);
        }

        Assert.Empty(o.ToDomains);
        Assert.Empty(o.Delivered);
    }
}
