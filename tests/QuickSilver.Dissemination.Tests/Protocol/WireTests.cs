using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Protocol;

namespace QuickSilver.Dissemination.Tests.Protocol;

public class WireTests
{
    [Fact]
    public void FramesRoundTrip()
    {
        var w = new FrameWriter();
        Wire.WriteRequest(w, new RequestMessage(3, new[] { "a", "dir/é.bin" }));
        Assert.True(Wire.TryReadRequest(w.Written, out var request));
        Assert.Equal(3, request.Capacity);
        Assert.Equal(new[] { "a", "dir/é.bin" }, request.Names);

        var welcome = new WelcomeMessage(500, 30_000, new NetAddress(0xEFFF0001, 7), 10_000, new[] { new NetAddress(0xEFFF0002, 8) },
            new[] { new WelcomeFile(true, "a", 65_000, 42, 1234, Enumerable.Range(0, 32).Select(i => (byte)i).ToArray()), new WelcomeFile(false, "b", 0, 0, 0, new byte[32]) });
        Wire.WriteWelcome(w, welcome);
        Assert.True(Wire.TryReadWelcome(w.Written, out var back));
        Assert.Equal(welcome.Announce, back.Announce);
        Assert.Equal(welcome.Channels, back.Channels);
        Assert.Equal(welcome.Files[0].Sha256, back.Files[0].Sha256);
        Assert.Equal(1234, back.Files[0].Size);
        Assert.Equal(65_000, back.Files[0].Number);
        Assert.False(back.Files[1].Found);

        Wire.WriteWant(w, 2, new[] { new PageRun(1, 5), new PageRun(9, 1) });
        var runs = new List<PageRun>();
        Assert.True(Wire.TryReadWant(w.Written, out ushort file, runs));
        Assert.Equal(2, file);
        Assert.Equal(new[] { new PageRun(1, 5), new PageRun(9, 1) }, runs);

        var nak = new byte[24];
        Wire.WriteNak(nak, new NakMessage(7, 30_000, 99, 12));
        Assert.True(Wire.TryReadNak(nak, out var n));
        Assert.Equal(new NakMessage(7, 30_000, 99, 12), n);
    }

    [Fact]
    public void DatagramsRoundTrip()
    {
        var buffer = new byte[Wire.AnnounceHeaderBytes + (2 * Wire.AnnounceEntryBytes)];
        var e = new AnnounceEntry(3, 0x1122334455667788, 60_000, 77, 60, 72, 100_000, 3_816_000);
        Wire.WriteAnnounceHeader(buffer, 2, 5);
        Wire.WriteAnnounceEntry(buffer.AsSpan(Wire.AnnounceHeaderBytes), e);
        Wire.WriteAnnounceEntry(buffer.AsSpan(Wire.AnnounceHeaderBytes + Wire.AnnounceEntryBytes), e with { Channel = 4 });
        Assert.True(Wire.TryReadAnnounce(buffer, out int count, out uint seq));
        Assert.Equal((2, 5u), (count, seq));
        Assert.Equal(e, Wire.ReadAnnounceEntry(buffer, 0));
        Assert.Equal(4, Wire.ReadAnnounceEntry(buffer, 1).Channel);
        Assert.False(Wire.TryReadAnnounce(buffer.AsSpan(0, buffer.Length - 1), out _, out _));

        var data = new byte[Wire.DataHeaderBytes + 500];
        var h = new DataHeader(1, 65_000, 3_000_000_000, 0xDEADBEEF, 254, 65, 72);
        Wire.WriteDataHeader(data, h);
        Assert.True(Wire.TryReadDataHeader(data, out var hb));
        Assert.Equal(h, hb);
        Assert.Equal(16, Wire.DataHeaderBytes);
        Assert.False(Wire.TryReadDataHeader(data.AsSpan(0, Wire.DataHeaderBytes), out _)); // no payload
    }

    /// <summary>Every truncation and every single-byte corruption of valid messages is either rejected or decodes
    /// without throwing (a property over all positions).</summary>
    [Fact]
    public void DecodersNeverThrowOnTruncatedOrCorruptInput()
    {
        var w = new FrameWriter();
        var frames = new List<byte[]>();
        Wire.WriteRequest(w, new RequestMessage(1, new[] { "alpha", "beta" }));
        frames.Add(w.Written.ToArray());
        Wire.WriteWelcome(w, new WelcomeMessage(500, 30_000, new NetAddress(0xEFFF0001, 7), 10_000, new[] { new NetAddress(0xEFFF0002, 8) }, new[] { new WelcomeFile(true, "a", 3, 42, 1234, new byte[32]) }));
        frames.Add(w.Written.ToArray());
        Wire.WriteWant(w, 0, new[] { new PageRun(0, 3) });
        frames.Add(w.Written.ToArray());
        var nak = new byte[24];
        Wire.WriteNak(nak, new NakMessage(1, 0, 1, 1));
        frames.Add(nak);
        var runs = new List<PageRun>();
        int rejected = 0;
        foreach (var frame in frames)
        {
            for (int length = 2; length < frame.Length; length++)
            {
                var cut = frame.AsSpan(0, length);
                bool ok = (MessageType)frame[1] switch
                {
                    MessageType.Request => Wire.TryReadRequest(cut, out _),
                    MessageType.Welcome => Wire.TryReadWelcome(cut, out _),
                    MessageType.Want => Wire.TryReadWant(cut, out _, runs),
                    _ => Wire.TryReadNak(cut, out _),
                };
                Assert.False(ok, $"a {(MessageType)frame[1]} cut to {length} of {frame.Length} bytes decoded");
                rejected++;
            }

            for (int i = 2; i < frame.Length; i++)
            {
                var bad = (byte[])frame.Clone();
                bad[i] ^= 0xFF;
                _ = Wire.TryReadRequest(bad, out _) | Wire.TryReadWelcome(bad, out _) | Wire.TryReadWant(bad, out _, runs) | Wire.TryReadNak(bad, out _);
            }
        }

        Assert.True(rejected > 50);
        _ = Wire.TryReadAnnounce(new byte[3], out _, out _);
    }
}
