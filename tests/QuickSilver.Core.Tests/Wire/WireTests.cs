using System.Buffers.Binary;
using MessagePack;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Core.Tests.Wire;

/// <summary>A sample fast-path message: fixed fields in the header area, payload appended by reference.</summary>
public readonly record struct Quote(int Instrument, long Price, int PayloadOffset, int PayloadLength);

public sealed class QuoteCodec : IWireCodec<Quote>
{
    private readonly ReadOnlyMemory<byte> _payload;

    public QuoteCodec(ReadOnlyMemory<byte> payload = default) => _payload = payload;

    public ushort ClassId => 300;

    public void Write(in Quote value, ScatterGatherList output)
    {
        var header = output.AppendHeader(12);
        BinaryPrimitives.WriteInt32LittleEndian(header, value.Instrument);
        BinaryPrimitives.WriteInt64LittleEndian(header[4..], value.Price);
        output.AppendSegment(_payload);
    }

    public WireError TryRead(ReadOnlySpan<byte> body, out Quote value)
    {
        value = default;
        if (body.Length < 12)
        {
            return WireError.Truncated;
        }

        value = new Quote(BinaryPrimitives.ReadInt32LittleEndian(body), BinaryPrimitives.ReadInt64LittleEndian(body[4..]), 12, body.Length - 12);
        return WireError.None;
    }
}

[MessagePackObject]
public sealed class Note
{
    [Key(0)] public string Text { get; set; } = "";
    [Key(1)] public int[] Values { get; set; } = [];
}

public sealed class WireTests
{
    private static readonly NetAddress Peer = NetAddress.Loopback(1234);

    [Fact]
    public void Header_round_trips_and_every_bad_header_is_rejected_with_its_reason()
    {
        var datagram = new byte[40];
        new PacketHeader((PacketType)1, 0xDEADBEEF, 40, 7).Write(datagram);
        Assert.Equal(WireError.None, PacketHeader.TryRead(datagram, out var header));
        Assert.Equal(((PacketType)1, 0xDEADBEEFu, (ushort)40, (ushort)7), (header.Type, header.Sender, header.Length, header.Flags));

        for (int cut = 0; cut < datagram.Length; cut++)
        {
            Assert.Equal(WireError.Truncated, PacketHeader.TryRead(datagram.AsSpan(0, cut), out _));
        }

        Assert.Equal(WireError.Oversized, PacketHeader.TryRead(datagram.Concat(new byte[3]).ToArray(), out _));
        var bad = (byte[])datagram.Clone();
        bad[0] ^= 0xFF;
        Assert.Equal(WireError.BadMagic, PacketHeader.TryRead(bad, out _));
        bad = (byte[])datagram.Clone();
        bad[2] = 9;
        Assert.Equal(WireError.UnknownVersion, PacketHeader.TryRead(bad, out _));
        bad = (byte[])datagram.Clone();
        bad[3] = 0;
        Assert.Equal(WireError.UnknownType, PacketHeader.TryRead(bad, out _));
    }

    [Fact]
    public void A_class_id_frame_round_trips_with_its_payload_segment_uncopied_until_gathered()
    {
        var payload = new byte[1000];
        new Random(1).NextBytes(payload);
        var codec = new QuoteCodec(payload);
        var registry = new ClassRegistry();
        Quote got = default;
        byte[]? gotPayload = null;
        registry.Register(codec, (NetAddress from, in Quote q, ReadOnlySpan<byte> body) =>
        {
            got = q;
            gotPayload = body.Slice(q.PayloadOffset, q.PayloadLength).ToArray();
        });

        var message = new ScatterGatherList();
        ClassRegistry.WriteFrame(codec, new Quote(42, -7, 0, 0), message);
        Assert.Equal(ClassRegistry.FrameHeaderSize + 12, message.HeaderLength);
        Assert.Equal(1, message.SegmentCount);
        var frame = new byte[message.TotalLength];
        message.CopyTo(frame);

        Assert.Equal(frame.Length, registry.Dispatch(Peer, frame, out var error));
        Assert.Equal(WireError.None, error);
        Assert.Equal((42, -7L), (got.Instrument, got.Price));
        Assert.Equal(payload, gotPayload);
    }

    [Fact]
    public void Registering_a_class_id_twice_names_both_types()
    {
        var registry = new ClassRegistry();
        registry.Register(new QuoteCodec(), (NetAddress _, in Quote _, ReadOnlySpan<byte> _) => { });
        var e = Assert.Throws<ArgumentException>(() =>
            registry.Register(new MessagePackObjectCodec<Note>(300), (NetAddress _, in Note _, ReadOnlySpan<byte> _) => { }));
        Assert.Contains("Quote", e.Message, StringComparison.Ordinal);
        Assert.Contains("Note", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_lying_length_field_is_rejected_before_anything_is_allocated()
    {
        var registry = new ClassRegistry();
        registry.Register(new MessagePackObjectCodec<Note>(301), (NetAddress _, in Note _, ReadOnlySpan<byte> _) => { });
        var frame = new byte[32];
        BinaryPrimitives.WriteUInt16LittleEndian(frame, 301);
        BinaryPrimitives.WriteUInt32LittleEndian(frame.AsSpan(2), 0x7FFFFFFF);
        long before = GC.GetAllocatedBytesForCurrentThread();
        Assert.True(registry.Dispatch(Peer, frame, out var error) < 0);
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        Assert.Equal(WireError.Truncated, error);
        Assert.True(allocated < 1024, $"{allocated} bytes allocated for a rejected frame");

        BinaryPrimitives.WriteUInt16LittleEndian(frame, 999);
        BinaryPrimitives.WriteUInt32LittleEndian(frame.AsSpan(2), 4);
        Assert.True(registry.Dispatch(Peer, frame, out error) < 0);
        Assert.Equal(WireError.UnknownClassId, error);
    }

    [Fact]
    public void The_MessagePack_wrapper_round_trips_and_refuses_oversized_or_garbled_bodies()
    {
        var codec = new MessagePackObjectCodec<Note>(302, maxBodyBytes: 200);
        var message = new ScatterGatherList();
        codec.Write(new Note { Text = "hello", Values = [1, 2, 3] }, message);
        var body = new byte[message.TotalLength];
        message.CopyTo(body);
        Assert.Equal(WireError.None, codec.TryRead(body, out var note));
        Assert.Equal("hello", note.Text);
        Assert.Equal(new[] { 1, 2, 3 }, note.Values);

        Assert.Throws<ArgumentException>(() => codec.Write(new Note { Text = new string('x', 500) }, new ScatterGatherList()));
        Assert.Equal(WireError.Oversized, codec.TryRead(new byte[201], out _));
        var random = new Random(3);
        for (int i = 0; i < 2000; i++)
        {
            var junk = new byte[random.Next(0, 150)];
            random.NextBytes(junk);
            var result = codec.TryRead(junk, out _);
            Assert.True(result is WireError.None or WireError.Malformed);
        }

        for (int cut = 0; cut < body.Length; cut++)
        {
            Assert.Equal(WireError.Malformed, codec.TryRead(body.AsSpan(0, cut), out _));
        }
    }

    [Fact]
    public void Encoding_and_decoding_a_class_id_message_allocates_nothing()
    {
        var codec = new QuoteCodec(new byte[100]);
        var registry = new ClassRegistry();
        long sum = 0;
        registry.Register(codec, (NetAddress _, in Quote q, ReadOnlySpan<byte> _) => sum += q.Price);
        var message = new ScatterGatherList();
        var frame = new byte[256];
        for (int i = 0; i < 100; i++)
        {
            Cycle(i); // warm up
        }

        Assert.Equal(0, Property.FewestAllocated(() =>
        {
            for (int i = 0; i < 10_000; i++)
            {
                Cycle(i);
            }
        }));
        Assert.True(sum > 0);

        void Cycle(int i)
        {
            message.Clear();
            ClassRegistry.WriteFrame(codec, new Quote(i, i, 0, 0), message);
            int length = message.CopyTo(frame);
            registry.Dispatch(Peer, frame.AsSpan(0, length), out _);
        }
    }
}
