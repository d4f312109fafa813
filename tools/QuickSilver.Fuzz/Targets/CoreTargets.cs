using System.Buffers.Binary;
using MessagePack;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Fuzz;

/// <summary>The common header, the dispatcher and class-id frames.</summary>
internal static class CoreTargets
{
    private static readonly DropCounters Drops = new();
    private static readonly Sink Handler = new();
    private static readonly PacketDispatcher Dispatcher = MakeDispatcher();
    private static readonly ClassRegistry Registry = MakeRegistry();

    public static void Header(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        var error = PacketHeader.TryRead(input, out var header);
        Expect.AllocatedAtMost(mark, 0, "PacketHeader.TryRead");
        if (error == WireError.None)
        {
            Expect.That(header.Length == input.Length && header.Type != PacketType.None, $"accepted {header.Type}/{header.Length} for {input.Length} bytes");
            Span<byte> again = stackalloc byte[PacketHeader.Size];
            header.Write(again);
            Expect.SameBytes(input[..PacketHeader.Size], again, "the header");
        }

        long before = Dispatcher.Dispatched + Drops.Total;
        mark = Expect.Mark();
        Dispatcher.OnDatagram(NetAddress.Loopback(1), input);
        Expect.AllocatedAtMost(mark, 0, "PacketDispatcher.OnDatagram");
        Expect.That(Dispatcher.Dispatched + Drops.Total == before + 1, "a datagram neither dispatched nor counted");

        // The same bytes as a sequence of class-id frames.
        var frames = input;
        for (int i = 0; i < 64 && !frames.IsEmpty; i++)
        {
            mark = Expect.Mark();
            int used = Registry.Dispatch(NetAddress.Loopback(1), frames, out var frameError);
            Expect.AllocatedAtMost(mark, 16 * 1024, "ClassRegistry.Dispatch");
            if (used < 0)
            {
                Expect.That(frameError != WireError.None, "a rejected frame without a reason");
                break;
            }

            Expect.That(used >= ClassRegistry.FrameHeaderSize && used <= frames.Length, $"a frame used {used} of {frames.Length} bytes");
            frames = frames[used..];
        }
    }

    public static IEnumerable<byte[]> HeaderSeeds()
    {
        foreach (byte type in new byte[] { 1, 3, 4, 5, 6, 200 })
        {
            var datagram = new byte[PacketHeader.Size + 20];
            new PacketHeader((PacketType)type, 7, (ushort)datagram.Length).Write(datagram);
            yield return datagram;
        }

        var output = new ScatterGatherList();
        ClassRegistry.WriteFrame(new NoteCodec(), new Note { Text = "hello", Numbers = [1, 2, 3] }, output);
        var frame = new byte[output.TotalLength];
        output.CopyTo(frame);
        yield return frame;
    }

    private static PacketDispatcher MakeDispatcher()
    {
        var dispatcher = new PacketDispatcher(Drops);
        for (int type = 1; type < 256; type += 2)
        {
            dispatcher.Register((PacketType)type, Handler, "fuzz");
        }

        return dispatcher;
    }

    private static ClassRegistry MakeRegistry()
    {
        var registry = new ClassRegistry();
        registry.Register(new NoteCodec(), (NetAddress _, in Note _, ReadOnlySpan<byte> _) => { });
        registry.Register(new Fixed(), (NetAddress _, in ulong _, ReadOnlySpan<byte> _) => { });
        return registry;
    }

    private sealed class Sink : IPacketHandler
    {
        public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram) =>
            Expect.That(header.Length == datagram.Length, "dispatched with a length that disagrees");
    }

    private sealed class NoteCodec() : IWireCodec<Note>
    {
        private readonly MessagePackObjectCodec<Note> _inner = new(3, 4096);

        public ushort ClassId => 3;

        public void Write(in Note value, ScatterGatherList output) => _inner.Write(value, output);

        public WireError TryRead(ReadOnlySpan<byte> body, out Note value) => _inner.TryRead(body, out value);
    }

    /// <summary>A span codec: exactly 8 bytes, a u64.</summary>
    private sealed class Fixed : IWireCodec<ulong>
    {
        public ushort ClassId => 4;

        public void Write(in ulong value, ScatterGatherList output) => BinaryPrimitives.WriteUInt64LittleEndian(output.AppendHeader(8), value);

        public WireError TryRead(ReadOnlySpan<byte> body, out ulong value)
        {
            value = 0;
            if (body.Length != 8)
            {
                return body.Length < 8 ? WireError.Truncated : WireError.Oversized;
            }

            value = BinaryPrimitives.ReadUInt64LittleEndian(body);
            return WireError.None;
        }
    }
}

/// <summary>The MessagePack wrapper's test message (public: MessagePack's generated formatter must see it).</summary>
[MessagePackObject]
public sealed class Note
{
    [Key(0)] public string? Text { get; set; }

    [Key(1)] public long[]? Numbers { get; set; }
}
