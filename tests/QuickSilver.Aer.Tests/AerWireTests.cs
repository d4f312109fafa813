using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer.Tests;

public sealed class AerWireTests
{
    private static PacketHeader Header(ReadOnlySpan<byte> datagram)
    {
        Assert.Equal(WireError.None, PacketHeader.TryRead(datagram, out var header));
        return header;
    }

    [Fact]
    public void Every_message_round_trips()
    {
        var buffer = new byte[1500];
        "hello"u8.CopyTo(buffer.AsSpan(AerWire.DataHeaderSize));
        int n = AerWire.WriteDataHeader(buffer, new AerData(9, 42, 123456, Repair: true), 5);
        Assert.True(AerWire.TryReadData(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out var data, out var payload));
        Assert.Equal(new AerData(9, 42, 123456, true), data);
        Assert.Equal("hello"u8.ToArray(), payload.ToArray());

        var spm = new SourcePathMessage(9, new NetAddress(0x7F000001, 7000), new NetAddress(0x7F000002, 7001), 3, 17, 100, 50, 84_000);
        n = AerWire.WriteSpm(buffer, spm);
        Assert.True(AerWire.TryReadSpm(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out var spm2));
        Assert.Equal(spm, spm2);

        n = AerWire.WriteNak(buffer, new AerNak(9, 77, Downstream: true));
        Assert.True(AerWire.TryReadNak(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out var nak));
        Assert.Equal(new AerNak(9, 77, true), nak);

        var csm = new CongestionStateMessage(9, new NetAddress(0x7F000003, 7000), 0.04, 90_000, Leaving: false);
        n = AerWire.WriteCsm(buffer, csm);
        Assert.True(AerWire.TryReadCsm(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out var csm2));
        Assert.Equal(csm, csm2);
        Assert.Equal(0.09 * Math.Sqrt(0.04), csm2.G, 12);

        n = AerWire.WriteNominate(buffer, 9, 5, stop: true);
        Assert.True(AerWire.TryReadNominate(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out uint s, out uint e, out bool stop));
        Assert.Equal((9u, 5u, true), (s, e, stop));

        n = AerWire.WriteAck(buffer, 9, 5, 1000, 777);
        Assert.True(AerWire.TryReadAck(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out s, out e, out long seq, out long echo));
        Assert.Equal((9u, 5u, 1000L, 777L), (s, e, seq, echo));

        n = AerWire.WriteProbe(buffer, 9, 555, reply: true);
        Assert.True(AerWire.TryReadProbe(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out s, out long ticks, out bool reply));
        Assert.Equal((9u, 555L, true), (s, ticks, reply));
    }

    [Fact]
    public void Readers_reject_truncated_padded_and_out_of_range_input()
    {
        var buffer = new byte[200];
        int n = AerWire.WriteNak(buffer, new AerNak(1, 5, false));
        // A datagram one byte short or long of the fixed size (its common header's length field agreeing) is rejected.
        foreach (int length in new[] { n - 1, n + 1 })
        {
            var copy = buffer.AsSpan(0, length).ToArray();
            new PacketHeader(AerWire.NakType, 0, (ushort)length).Write(copy);
            Assert.False(AerWire.TryReadNak(Header(copy), copy, out _));
        }

        // Unknown flag bits.
        new PacketHeader(AerWire.NakType, 0, (ushort)n, 2).Write(buffer);
        Assert.False(AerWire.TryReadNak(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _));

        // Sequence number 0.
        n = AerWire.WriteNak(buffer, new AerNak(1, 0, false));
        Assert.False(AerWire.TryReadNak(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _));

        // A loss rate outside [0, 1] or not a number; a negative round trip.
        foreach (var (loss, rtt) in new[] { (1.5, 1), (-0.1, 1), (double.NaN, 1), (0.1, -5) })
        {
            n = AerWire.WriteCsm(buffer, new CongestionStateMessage(1, new NetAddress(0x7F000001, 1), loss, rtt, false));
            Assert.False(AerWire.TryReadCsm(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _));
        }

        // An SPM deeper than the bound, or claiming repairs start beyond what was sent.
        n = AerWire.WriteSpm(buffer, new SourcePathMessage(1, new NetAddress(1, 1), new NetAddress(1, 1), AerWire.MaxDepth + 1, 1, 10, 1, 0));
        Assert.False(AerWire.TryReadSpm(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _));
        n = AerWire.WriteSpm(buffer, new SourcePathMessage(1, new NetAddress(1, 1), new NetAddress(1, 1), 0, 1, 10, 12, 0));
        Assert.False(AerWire.TryReadSpm(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _));

        // Data: too short for its header; sequence 0.
        n = AerWire.WriteDataHeader(buffer, new AerData(1, 0, 0, false), 0);
        Assert.False(AerWire.TryReadData(Header(buffer.AsSpan(0, n)), buffer.AsSpan(0, n), out _, out _));
        var shortData = buffer.AsSpan(0, AerWire.DataHeaderSize - 1).ToArray();
        new PacketHeader(AerWire.DataType, 0, (ushort)shortData.Length).Write(shortData);
        Assert.False(AerWire.TryReadData(Header(shortData), shortData, out _, out _));
    }

    [Fact]
    public void Random_bytes_never_throw()
    {
        var random = new Random(5);
        var buffer = new byte[128];
        for (int i = 0; i < 20_000; i++)
        {
            int length = random.Next(12, buffer.Length);
            random.NextBytes(buffer.AsSpan(0, length));
            var type = (PacketType)(7 + random.Next(7));
            new PacketHeader(type, 0, (ushort)length, (ushort)random.Next(3)).Write(buffer);
            var d = buffer.AsSpan(0, length);
            var h = Header(d);
            _ = AerWire.TryReadData(h, d, out _, out _);
            _ = AerWire.TryReadSpm(h, d, out _);
            _ = AerWire.TryReadNak(h, d, out _);
            _ = AerWire.TryReadCsm(h, d, out _);
            _ = AerWire.TryReadNominate(h, d, out _, out _, out _);
            _ = AerWire.TryReadAck(h, d, out _, out _, out _, out _);
            _ = AerWire.TryReadProbe(h, d, out _, out _, out _);
        }
    }
}
