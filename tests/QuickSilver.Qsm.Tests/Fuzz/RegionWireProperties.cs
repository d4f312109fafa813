using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Core.Wire;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// Region data packets, NAK and pull ranges, and the collective ACK (RegionWire) under hostile input: structurally valid
/// encodings with numbers at the limits, and their truncations, extensions and corruptions. Every decode must not throw,
/// must not allocate (these decoders read straight from the span), and must either reject or give back a value that
/// encodes to the same bytes (less what the decoder ignores: the data header's unused flags, the ACK's kind byte, bytes
/// after the ranges) and keeps the decoder's promises.
/// </summary>
public sealed class RegionWireProperties
{
    private const int Iterations = 4000;

    private static readonly Gen<byte[]> ValidData =
        Gen.Select(Hostile.U32, Hostile.U32, Hostile.U32, Hostile.U64, Hostile.U64, Gen.Byte.Array[0, 200], (sender, region, view, viewStart, seq, payload) =>
        {
            var datagram = new byte[RegionWire.DataHeaderSize + payload.Length];
            RegionWire.WriteData(datagram, new DataHeader(sender, region, view, viewStart, seq), payload);
            return datagram;
        });

    [Fact]
    public void Data_packets_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidData), Iterations, seed: 501, example =>
        {
            var (bytes, how) = example;
            var (ok, header, payloadLength) = Property.Decode(bytes, 0, b =>
            {
                bool accepted = RegionWire.TryReadData(b, out var h, out var payload);
                return (accepted, h, payload.Length);
            }, "RegionWire.TryReadData");

            if (!ok)
            {
                return false;
            }

            Assert.True(header.Seq > 0 && header.ViewStart > 0 && header.ViewStart <= header.Seq, $"accepted {header}");
            var again = new byte[bytes.Length];
            int length = RegionWire.WriteData(again, header, bytes.AsSpan(RegionWire.DataHeaderSize, payloadLength));
            Assert.Equal(bytes.Length, length);
            again.AsSpan(10, 2).CopyTo(bytes.AsSpan(10)); // the common header's flags: unused by data packets, and ignored
            Assert.Equal(bytes, again);

            return true;
        });
    }

    private static readonly Gen<byte[]> ValidRanges =
        Gen.Select(Gen.OneOf(Gen.Const(RegionControl.Nak), Gen.Const(RegionControl.Pull)), Hostile.U32, Hostile.U32, Hostile.U16, Hostile.U16,
            QsmGen.RawNakSet(32), (kind, region, sender, partition, partitions, set) =>
            {
                var message = new byte[13 + set.Length];
                message[0] = (byte)kind;
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(1), region);
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(5), sender);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(9), partition);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(11), partitions);
                set.CopyTo(message, 13);
                return message;
            });

    [Fact]
    public void Nak_and_pull_ranges_are_rejected_or_round_trip_within_the_range_bound()
    {
        var into = new NakSet(32);
        Property.Decodes(Hostile.Mutate(ValidRanges), Iterations, seed: 502, example =>
        {
            var (bytes, _) = example;
            var (ok, region, sender, partition, partitions) = Property.Decode(bytes, QsmGen.NakSetBound(32), b =>
            {
                bool accepted = RegionWire.TryReadRanges(b, into, out uint r, out uint s, out int p, out int ps);
                return (accepted, r, s, p, ps);
            }, "RegionWire.TryReadRanges");

            if (!ok)
            {
                return false;
            }

            Assert.True(partitions > 0 && partition >= 0 && partition < partitions, $"partition {partition} of {partitions}");
            QsmGen.AssertWellFormed(into, "decoded ranges");
            var again = new byte[13 + into.EncodedSize];
            int length = RegionWire.WriteRanges(again, (RegionControl)bytes[0], region, sender, partition, partitions, into);
            Assert.Equal(bytes.AsSpan(0, length).ToArray(), again); // trailing bytes are ignored, the rest is the value

            return true;
        });
    }

    private static readonly Gen<byte[]> ValidAck =
        Gen.Select(Hostile.U32, Hostile.U32, Hostile.U32, Hostile.U64, Hostile.U64, Hostile.Double, Hostile.Double, (region, sender, view, stable, maxSeen, rate, loss) =>
        {
            var message = new byte[RegionWire.AckSize];
            RegionWire.WriteAck(message, new RegionAck(region, sender, view, stable, maxSeen, rate, loss));
            return message;
        });

    [Fact]
    public void Acks_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidAck), Iterations, seed: 503, example =>
        {
            var (bytes, _) = example;
            var (ok, ack) = Property.Decode(bytes, 0, b => (RegionWire.TryReadAck(b, out var a), a), "RegionWire.TryReadAck");
            if (!ok)
            {
                return false;
            }

            Assert.True(double.IsFinite(ack.Rate) && ack.Rate >= 0 && ack.Loss is >= 0 and <= 1 && ack.Stable <= ack.MaxSeen && ack.View > 0, $"accepted {ack}");
            var again = new byte[RegionWire.AckSize];
            RegionWire.WriteAck(again, ack);
            Assert.Equal(bytes.AsSpan(1).ToArray(), again.AsSpan(1).ToArray()); // the kind byte is the caller's to check

            return true;
        });
    }

    private static readonly Gen<byte[]> ValidStart =
        Gen.Select(Hostile.U32, Hostile.U32, Hostile.U32, Hostile.U64, (region, sender, view, viewStart) =>
        {
            var message = new byte[RegionWire.StartSize];
            RegionWire.WriteStart(message, region, sender, view, viewStart);
            return message;
        });

    [Fact]
    public void Stream_start_hints_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidStart), Iterations, seed: 504, example =>
        {
            var (bytes, _) = example;
            var (ok, header) = Property.Decode(bytes, 0, b => (RegionWire.TryReadStart(b, out var h), h), "RegionWire.TryReadStart");
            if (!ok)
            {
                return false;
            }

            Assert.True(header.View > 0 && header.ViewStart > 0 && header.Seq == header.ViewStart, $"accepted {header}");
            var again = new byte[RegionWire.StartSize];
            RegionWire.WriteStart(again, header.Region, header.Sender, header.View, header.ViewStart);
            Assert.Equal(bytes, again);

            return true;
        });
    }
}
