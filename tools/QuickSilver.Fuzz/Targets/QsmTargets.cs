using System.Buffers.Binary;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;

namespace QuickSilver.Fuzz;

/// <summary>The QSM wire formats: region data, ranges and ACKs, tokens, NAK sets, group records.</summary>
internal static class QsmTargets
{
    private const int MaxRanges = 8;
    private const int MaxSenders = 8;
    private static readonly NakSet Into = new(MaxRanges);
    private static readonly byte[] Scratch = new byte[256 * 1024];

    public static void RunRegionWire(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        bool data = RegionWire.TryReadData(input, out var header, out var payload);
        Expect.AllocatedAtMost(mark, 0, "RegionWire.TryReadData");
        if (data)
        {
            Expect.That(header.Seq > 0 && header.ViewStart > 0 && header.ViewStart <= header.Seq, $"accepted {header}");
            int length = RegionWire.WriteData(Scratch, header, payload);
            input[..12].CopyTo(Scratch.AsSpan(0, 12)); // the common header's flags are not part of the value
            Expect.SameBytes(input, Scratch.AsSpan(0, length), "a data packet");
        }

        mark = Expect.Mark();
        bool ranges = RegionWire.TryReadRanges(input, Into, out uint region, out uint sender, out int partition, out int partitions);
        Expect.AllocatedAtMost(mark, 3 * ((MaxRanges * 16) + 32), "RegionWire.TryReadRanges");
        if (ranges)
        {
            Expect.That(partitions > 0 && partition < partitions, $"partition {partition} of {partitions}");
            WellFormed(Into, "ranges");
            int length = RegionWire.WriteRanges(Scratch, (RegionControl)input[0], region, sender, partition, partitions, Into);
            Expect.SameBytes(input[..length], Scratch.AsSpan(0, length), "ranges");
        }

        mark = Expect.Mark();
        bool ack = RegionWire.TryReadAck(input, out var a);
        Expect.AllocatedAtMost(mark, 0, "RegionWire.TryReadAck");
        if (ack)
        {
            Expect.That(double.IsFinite(a.Rate) && a.Rate >= 0 && a.Loss is >= 0 and <= 1 && a.Stable <= a.MaxSeen && a.View > 0, $"accepted {a}");
            RegionWire.WriteAck(Scratch, a);
            Expect.SameBytes(input[1..], Scratch.AsSpan(1, RegionWire.AckSize - 1), "an ACK");
        }
    }

    public static IEnumerable<byte[]> RegionWireSeeds()
    {
        var datagram = new byte[RegionWire.DataHeaderSize + 16];
        RegionWire.WriteData(datagram, new DataHeader(2, 1, 1, 1, 5), new byte[16]);
        yield return datagram;
        var set = new NakSet(MaxRanges);
        set.AddRange(3, 9);
        set.AddRange(20, 20);
        var message = new byte[128];
        yield return message.AsSpan(0, RegionWire.WriteRanges(message, RegionControl.Nak, 1, 2, 0, 1, set)).ToArray();
        var ack = new byte[RegionWire.AckSize];
        RegionWire.WriteAck(ack, new RegionAck(1, 2, 1, 10, 12, 5000, 0.01));
        yield return ack;
    }

    public static void RunToken(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        var token = Token.TryRead(input, MaxRanges, MaxSenders);
        Expect.AllocatedAtMost(mark, 1024 + ((MaxSenders + 1) * (256 + (2 * (96 + (3 * ((MaxRanges * 16) + 32)))))), "Token.TryRead");
        if (token is null)
        {
            return;
        }

        Expect.That(token.Sections.Count <= MaxSenders, $"{token.Sections.Count} sections");
        foreach (var section in token.Sections)
        {
            Expect.That(!double.IsNaN(section.RateMin) && section.RateMin >= 0 && section.LossMax is >= 0 and <= 1, "a section's rate or loss");
            WellFormed(section.PredecessorNaks, "predecessor NAKs");
            WellFormed(section.PartitionNaks, "partition NAKs");
        }

        int length = token.Write(Scratch);
        Expect.SameBytes(input, Scratch.AsSpan(0, length), "a token");
    }

    public static IEnumerable<byte[]> TokenSeeds()
    {
        var token = new Token { Region = 1, View = 1, Round = 3, Partition = 0, Step = 1 };
        var section = new TokenSection(2, MaxRanges) { Cutoff = 40, PurgeUpTo = 10, StableBefore = 30, MaxSeen = 40, RateMin = 1000, LossMax = 0.1 };
        section.PredecessorNaks.AddRange(12, 14);
        section.PartitionNaks.Add(13);
        token.Sections.Add(section);
        token.Sections.Add(new TokenSection(3, MaxRanges));
        var message = new byte[4096];
        yield return message.AsSpan(0, token.Write(message)).ToArray();
    }

    public static void RunNakSet(ReadOnlySpan<byte> input)
    {
        var a = new NakSet(MaxRanges);
        var b = new NakSet(MaxRanges);
        long mark = Expect.Mark();
        int used = a.TryRead(input);
        Expect.AllocatedAtMost(mark, 3 * ((MaxRanges * 16) + 32), "NakSet.TryRead");
        if (used < 0)
        {
            Expect.That(a.IsEmpty, "a rejected set is not empty");
            return;
        }

        WellFormed(a, "a decoded set");
        int length = a.Write(Scratch);
        Expect.SameBytes(input[..used], Scratch.AsSpan(0, length), "a NAK set");

        // The rest of the input is a second set and a range: the operations the ring applies to peers' sets.
        if (b.TryRead(input[used..]) < 0)
        {
            return;
        }

        var result = new NakSet(MaxRanges);
        result.SetDifference(a, b);
        WellFormed(result, "a \\ b");
        result.SetIntersection(a, b);
        WellFormed(result, "a ∩ b");
        ulong x = input.Length >= 8 ? BinaryPrimitives.ReadUInt64LittleEndian(input[^8..]) : 0;
        ulong y = input.Length >= 16 ? BinaryPrimitives.ReadUInt64LittleEndian(input[^16..]) : ulong.MaxValue;
        result.CopyFrom(a);
        result.AddRange(Math.Min(x, y), Math.Max(x, y));
        WellFormed(result, "a + [x, y]");
        result.RemoveRange(Math.Min(x, y), Math.Max(x, y));
        WellFormed(result, "a - [x, y]");
        result.CopyFrom(a);
        result.CoarsenTo(1 + (int)(x % MaxRanges));
        WellFormed(result, "a coarsened");
    }

    public static IEnumerable<byte[]> NakSetSeeds()
    {
        var set = new NakSet(MaxRanges);
        set.AddRange(1, 4);
        set.AddRange(10, 10);
        set.AddRange(ulong.MaxValue - 3, ulong.MaxValue);
        var bytes = new byte[set.EncodedSize * 2];
        set.Write(bytes);
        set.Write(bytes.AsSpan(set.EncodedSize));
        yield return bytes;
    }

    public static void RunGroupWire(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        var packet = input;
        int steps = 0;
        while (GroupWire.TryRead(packet, out uint group, out ulong seq, out var payload, out int consumed))
        {
            // Plain conditions: an interpolated message would allocate inside the measured walk.
            if (++steps > (input.Length / GroupWire.HeaderSize) + 1 || consumed < GroupWire.HeaderSize || consumed > packet.Length || seq == 0)
            {
                throw new FuzzFailure($"step {steps} consumed {consumed} of {packet.Length} (seq {seq})");
            }

            int length = GroupWire.Write(Scratch, group, seq, payload);
            Expect.SameBytes(packet[..consumed], Scratch.AsSpan(0, length), "a group record");
            packet = packet[consumed..];
        }

        Expect.AllocatedAtMost(mark, 0, "the group record walk");
    }

    public static IEnumerable<byte[]> GroupWireSeeds()
    {
        var packet = new byte[64];
        int length = GroupWire.Write(packet, 7, 1, new byte[5]);
        length += GroupWire.Write(packet.AsSpan(length), 8, 2, new byte[3]);
        yield return packet.AsSpan(0, length).ToArray();
    }

    private static void WellFormed(NakSet set, string what)
    {
        var ranges = set.Ranges;
        Expect.That(ranges.Length <= set.MaxRanges, $"{what}: {ranges.Length} ranges");
        for (int i = 0; i < ranges.Length; i++)
        {
            Expect.That(ranges[i].First <= ranges[i].Last, $"{what}: range {i} reversed");
            Expect.That(i == 0 || (ranges[i - 1].Last != ulong.MaxValue && ranges[i].First > ranges[i - 1].Last + 1), $"{what}: ranges {i - 1}, {i} not sorted and apart");
        }
    }
}
