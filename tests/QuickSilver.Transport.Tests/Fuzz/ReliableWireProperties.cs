using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Testing.Fuzz;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Transport.Tests.Fuzz;

/// <summary>
/// Reliable unicast segments and acknowledgements (ReliableWire) under hostile input, and a whole reliable unicast
/// endpoint fed hostile datagrams from many sources: epochs 0 and at the limits, sequences far outside the window,
/// SACK bitmaps naming what was never sent, lying lengths and noise. Decoding must not throw or allocate and must
/// round-trip what it accepts; the endpoint must not throw, keep at most MaxPeers conversations, hold at most a window
/// of segments and a message's worth of reassembly per peer, and deliver only messages within MaxMessageBytes.
/// </summary>
public sealed class ReliableWireProperties
{
    private const int Iterations = 4000;

    private static readonly Gen<byte[]> ValidData =
        Gen.Select(Gen.OneOf(Gen.Const(ReliableWire.DataType), Gen.Const(ReliableWire.FragmentType)), Hostile.U32, Hostile.U32, Hostile.U32, Hostile.U64, Gen.Byte.Array[0, 200],
            (type, sender, senderEpoch, receiverEpoch, seq, payload) =>
            {
                var datagram = new byte[PacketHeader.Size + ReliableWire.DataHeaderSize + payload.Length];
                ReliableWire.WriteData(datagram, type, sender, senderEpoch, receiverEpoch, seq, payload);
                return datagram;
            });

    private static readonly Gen<byte[]> ValidAck =
        Gen.Select(Hostile.U32, Hostile.U32, Hostile.U32, Hostile.U64, Hostile.U64, (sender, senderEpoch, receiverEpoch, next, sack) =>
        {
            var datagram = new byte[PacketHeader.Size + ReliableWire.AckBodySize];
            ReliableWire.WriteAck(datagram, sender, senderEpoch, receiverEpoch, next, sack);
            return datagram;
        });

    [Fact]
    public void Data_segments_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidData, keepPrefix: PacketHeader.Size), Iterations, seed: 301, example =>
        {
            var (bytes, _) = example;
            var (error, data) = Property.Decode(bytes, 0, b =>
            {
                if (PacketHeader.TryRead(b, out var header) != WireError.None)
                {
                    return (WireError.Malformed, default(ReliableWire.Data));
                }

                var e = ReliableWire.TryReadData(b.AsSpan(PacketHeader.Size), out var d);
                return (e, d);
            }, "ReliableWire.TryReadData");

            if (error != WireError.None)
            {
                return false;
            }

            Assert.NotEqual(0u, data.SenderEpoch);
            Assert.Equal(bytes.Length, data.PayloadOffset + data.PayloadLength);
            var again = new byte[bytes.Length];
            ReliableWire.WriteData(again, (PacketType)bytes[3], BinaryPrimitives.ReadUInt32LittleEndian(bytes.AsSpan(4)), data.SenderEpoch, data.ReceiverEpoch, data.Seq,
                bytes.AsSpan(data.PayloadOffset, data.PayloadLength));
            again.AsSpan(10, 2).CopyTo(bytes.AsSpan(10)); // the common header's flags: unused, ignored
            Assert.Equal(bytes, again);
            return true;
        });
    }

    [Fact]
    public void Acks_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidAck, keepPrefix: PacketHeader.Size), Iterations, seed: 302, example =>
        {
            var (bytes, _) = example;
            var (error, ack) = Property.Decode(bytes, 0, b =>
            {
                if (PacketHeader.TryRead(b, out var header) != WireError.None || header.Type != ReliableWire.AckType)
                {
                    return (WireError.Malformed, default(ReliableWire.Ack)); // the dispatcher routes by type
                }

                var e = ReliableWire.TryReadAck(b.AsSpan(PacketHeader.Size), out var a);
                return (e, a);
            }, "ReliableWire.TryReadAck");

            if (error != WireError.None)
            {
                return false;
            }

            Assert.True(ack.SenderEpoch != 0 && ack.ReceiverEpoch != 0);
            var again = new byte[bytes.Length];
            ReliableWire.WriteAck(again, BinaryPrimitives.ReadUInt32LittleEndian(bytes.AsSpan(4)), ack.SenderEpoch, ack.ReceiverEpoch, ack.Next, ack.Sack);
            again.AsSpan(10, 2).CopyTo(bytes.AsSpan(10));
            Assert.Equal(bytes, again);
            return true;
        });
    }

    private sealed record Input(int Source, int Kind, uint SenderEpoch, uint ReceiverEpoch, ulong Seq, ulong Sack, int PayloadLength, byte Channel, int Advance);

    private static readonly Gen<uint> Epoch = Gen.Frequency((4, Gen.UInt[0, 3]), (1, Hostile.U32));

    private static readonly Gen<ulong> SegmentSeq = Gen.Frequency((4, Gen.ULong[0, 80]), (1, Hostile.U64));

    private static readonly Gen<Input> Inputs =
        Gen.Select(Gen.Int[0, 40], Gen.Int[0, 3], Epoch, Epoch, SegmentSeq, Gen.Select(Hostile.U64, Gen.Int[0, 1500], Gen.Byte[199, 201], Gen.Int[0, 50]),
            (source, kind, senderEpoch, receiverEpoch, seq, rest) => new Input(source, kind, senderEpoch, receiverEpoch, seq, rest.Item1, rest.Item2, rest.Item3, rest.Item4));

    [Fact]
    public void Hostile_segments_from_many_sources_leave_an_endpoint_bounded()
    {
        var options = new ReliableUnicastOptions { MaxPeers = 16, Window = 8, MaxMessageBytes = 4096, SendBufferSegments = 64, MaxSegmentBytes = 1024 };
        Property.ForAll(Inputs.Array[50, 300], 200, seed: 303, inputs =>
        {
            var time = new VirtualScheduler();
            var transport = new CaptureTransport(NetAddress.Loopback(7000), 1500);
            var endpoint = new ReliableUnicast(0x1234, options);
            var stack = new StackBuilder(transport, time).Add(endpoint).Build();
            var channel = endpoint.OpenChannel(200, "test");
            int delivered = 0;
            channel.SetReceiver((_, message) =>
            {
                Assert.True(message.Length + 1 <= options.MaxMessageBytes, $"a {message.Length + 1}-byte message delivered");
                delivered++;
            }, _ => { });

            // Some conversations of our own, so acknowledgements have something to act on.
            for (int peer = 0; peer < 4; peer++)
            {
                channel.Send(Source(peer), new byte[3000]);
            }

            var datagram = new byte[1500];
            foreach (var input in inputs)
            {
                var from = Source(input.Source);
                int length;
                if (input.Kind == 3)
                {
                    length = ReliableWire.WriteAck(datagram, 9, input.SenderEpoch, input.ReceiverEpoch, input.Seq, input.Sack);
                }
                else
                {
                    var payload = new byte[Math.Min(input.PayloadLength, 1500 - 28)];
                    if (payload.Length > 0)
                    {
                        payload[0] = input.Channel;
                    }

                    length = ReliableWire.WriteData(datagram, input.Kind == 0 ? ReliableWire.FragmentType : ReliableWire.DataType, 9, input.SenderEpoch, input.ReceiverEpoch, input.Seq, payload);
                }

                transport.Receive(from, datagram.AsSpan(0, length));
                if (input.Advance > 40)
                {
                    time.RunFor(TimeSpan.FromMilliseconds(input.Advance * 10));
                }

                Assert.True(endpoint.ConnectionCount <= options.MaxPeers, $"{endpoint.ConnectionCount} connections");
            }

            time.RunFor(TimeSpan.FromSeconds(30)); // every retransmission timer runs out: failed peers are reset
            Assert.True(endpoint.ConnectionCount <= options.MaxPeers);
            Assert.True(stack.Drops.Total + endpoint.Drops.Total + delivered >= 0);
        });
    }

    private static NetAddress Source(int index) => new(0x0A000001 + (uint)(index % 8), (ushort)(9000 + index));
}
