using System.Buffers.Binary;
using CsCheck;
using MessagePack;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Core.Tests.Fuzz;

/// <summary>
/// The common header (PacketHeader), the dispatcher that routes on it, and class-id frames (ClassRegistry, with a
/// span codec and the MessagePack object wrapper) under hostile input: wrong magic and versions, length fields that
/// lie, types nobody registered, frames whose length claims more than arrived, noise after valid headers. Nothing may
/// throw; the header and the dispatcher allocate nothing; every datagram is either dispatched or counted as dropped.
/// </summary>
public sealed class WireProperties
{
    private const int Iterations = 4000;

    private static readonly Gen<byte[]> ValidDatagram = Gen.Select(Gen.Byte[1, 255], Hostile.U32, Hostile.U16, Gen.Byte.Array[0, 200], (type, sender, flags, body) =>
    {
        var datagram = new byte[PacketHeader.Size + body.Length];
        new PacketHeader((PacketType)type, sender, (ushort)datagram.Length, flags).Write(datagram);
        body.CopyTo(datagram, PacketHeader.Size);
        return datagram;
    });

    [Fact]
    public void Headers_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidDatagram), Iterations, seed: 101, example =>
        {
            var (bytes, _) = example;
            var (error, header) = Property.Decode(bytes, 0, b => (PacketHeader.TryRead(b, out var h), h), "PacketHeader.TryRead");
            if (error != WireError.None)
            {
                return false;
            }

            Assert.Equal(bytes.Length, header.Length);
            Assert.NotEqual(PacketType.None, header.Type);
            var again = new byte[PacketHeader.Size];
            header.Write(again);
            Assert.Equal(bytes.AsSpan(0, PacketHeader.Size).ToArray(), again);
            return true;
        });
    }

    private sealed class CountingHandler : IPacketHandler
    {
        public long Packets;
        public long Mismatched;

        public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
        {
            if (header.Length != datagram.Length)
            {
                Mismatched++; // counted, not asserted: an assertion here would allocate inside the measured loop
            }

            Packets++;
        }
    }

    [Fact]
    public void The_dispatcher_routes_or_counts_every_datagram_without_allocating()
    {
        // One pass first: the first drop of each kind and the first call of each path do one-time work (static
        // tables, tiered JIT) that is not the dispatcher's per-datagram cost.
        Property.ForAll(Hostile.Mutate(ValidDatagram).Array[1, 100], 20, seed: 1, datagrams => Dispatch(datagrams, warmUp: true));
        Property.ForAll(Hostile.Mutate(ValidDatagram).Array[1, 100], 300, seed: 102, datagrams => Dispatch(datagrams, warmUp: false));
    }

    private static void Dispatch((byte[] Bytes, Hostile.Mutation How)[] datagrams, bool warmUp)
    {
        {
            var drops = new DropCounters();
            var dispatcher = new PacketDispatcher(drops);
            var handler = new CountingHandler();
            for (int type = 1; type < 256; type += 2)
            {
                dispatcher.Register((PacketType)type, handler, "odd types");
            }

            long allocated = Property.Allocated(() =>
            {
                foreach (var (bytes, _) in datagrams)
                {
                    dispatcher.OnDatagram(NetAddress.Loopback(1), bytes);
                }
            });

            Assert.True(warmUp || allocated == 0, $"{allocated} bytes allocated dispatching {datagrams.Length} datagrams");
            Assert.Equal(datagrams.Length, dispatcher.Dispatched + drops.Total);
            Assert.Equal(dispatcher.Dispatched, handler.Packets);
            Assert.Equal(0, handler.Mismatched);
        }
    }

    /// <summary>A fixed-layout test message: <c>u32 a | u64 b | u16 n | n bytes</c>.</summary>
    private readonly record struct Fixed(uint A, ulong B, int Offset, int Length);

    private sealed class FixedCodec : IWireCodec<Fixed>
    {
        public ushort ClassId => 7;

        public void Write(in Fixed value, ScatterGatherList output)
        {
            var header = output.AppendHeader(14);
            BinaryPrimitives.WriteUInt32LittleEndian(header, value.A);
            BinaryPrimitives.WriteUInt64LittleEndian(header[4..], value.B);
            BinaryPrimitives.WriteUInt16LittleEndian(header[12..], (ushort)value.Length);
        }

        public WireError TryRead(ReadOnlySpan<byte> body, out Fixed value)
        {
            value = default;
            if (body.Length < 14)
            {
                return WireError.Truncated;
            }

            int length = BinaryPrimitives.ReadUInt16LittleEndian(body[12..]);
            if (body.Length != 14 + length)
            {
                return WireError.Malformed;
            }

            value = new Fixed(BinaryPrimitives.ReadUInt32LittleEndian(body), BinaryPrimitives.ReadUInt64LittleEndian(body[4..]), 14, length);
            return WireError.None;
        }
    }

    [MessagePackObject]
    public sealed class Note
    {
        [Key(0)] public string? Text { get; set; }

        [Key(1)] public long[]? Numbers { get; set; }
    }

    private static readonly Gen<byte[]> ValidFrames = Gen.Frequency(
        (2, Gen.Select(Hostile.U32, Hostile.U64, Gen.Byte.Array[0, 100], (a, b, tail) =>
        {
            var output = new ScatterGatherList();
            ClassRegistry.WriteFrame(new FixedCodec(), new Fixed(a, b, 14, tail.Length), output);
            output.AppendSegment(tail);
            var frame = new byte[output.TotalLength];
            output.CopyTo(frame);
            BinaryPrimitives.WriteUInt32LittleEndian(frame.AsSpan(2), (uint)(frame.Length - ClassRegistry.FrameHeaderSize));
            return frame;
        })),
        (1, Gen.Select(Gen.String[0, 40], Gen.Long.Array[0, 20], (text, numbers) =>
        {
            var output = new ScatterGatherList();
            ClassRegistry.WriteFrame(new MessagePackObjectCodec<Note>(300), new Note { Text = text, Numbers = numbers }, output);
            var frame = new byte[output.TotalLength];
            output.CopyTo(frame);
            return frame;
        })));

    [Fact]
    public void Frames_are_dispatched_or_rejected_and_never_allocate_beyond_the_body()
    {
        var registry = new ClassRegistry();
        int handled = 0;
        registry.Register(new FixedCodec(), (NetAddress _, in Fixed value, ReadOnlySpan<byte> body) =>
        {
            Assert.Equal(body.Length, value.Offset + value.Length);
            handled++;
        });
        registry.Register(new MessagePackObjectCodec<Note>(300), (NetAddress _, in Note value, ReadOnlySpan<byte> _) => handled++);
        Property.Decodes(Hostile.Mutate(ValidFrames, keepPrefix: 2), Iterations, seed: 103, example =>
        {
            var (bytes, _) = example;

            // The span codec allocates nothing; the MessagePack wrapper copies the body (at most 300 bytes) and builds
            // the object: a bound well above that, far below what a lying length or count field could ask for.
            var (used, error) = Property.Decode(bytes, 16 * 1024, b => (registry.Dispatch(NetAddress.Loopback(1), b, out var e), e), "ClassRegistry.Dispatch");
            if (used < 0)
            {
                Assert.NotEqual(WireError.None, error);
                return false;
            }

            Assert.Equal(WireError.None, error);
            Assert.InRange(used, ClassRegistry.FrameHeaderSize, bytes.Length);
            return true;
        });
    }
}
