using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// Tokens as a hostile holder could pass them on: section counts at and beyond MaxSenders, sections with numbers at the
/// limits, non-finite rates, NAK sets that lie. Decoding must not throw, must allocate no more than MaxSenders sections'
/// worth whatever the count field claims, and what it accepts must encode to the same bytes.
/// </summary>
public sealed class TokenProperties
{
    private const int Iterations = 3000;

    private static Gen<byte[]> Section(int maxRanges) =>
        Gen.Select(Hostile.U32, Gen.Select(Hostile.U64, Hostile.U64, Hostile.U64, Hostile.U64, Hostile.U64, Hostile.U64),
            Gen.Select(Hostile.Double, Hostile.Double), QsmGen.RawNakSet(maxRanges), QsmGen.RawNakSet(maxRanges),
            (sender, numbers, rates, predecessor, partition) =>
            {
                var bytes = new byte[68 + predecessor.Length + partition.Length];
                BinaryPrimitives.WriteUInt32LittleEndian(bytes, sender);
                var (cutoff, purge, stableBefore, maxSeen, stableMin, receivedMin) = numbers;
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(4), cutoff);
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(12), purge);
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(20), stableBefore);
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(28), maxSeen);
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(36), stableMin);
                BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(44), receivedMin);
                BinaryPrimitives.WriteDoubleLittleEndian(bytes.AsSpan(52), rates.Item1);
                BinaryPrimitives.WriteDoubleLittleEndian(bytes.AsSpan(60), rates.Item2);
                predecessor.CopyTo(bytes, 68);
                partition.CopyTo(bytes, 68 + predecessor.Length);
                return bytes;
            });

    private static Gen<byte[]> ValidToken(int maxSenders, int maxRanges) =>
        Gen.Select(Hostile.U32, Hostile.U32, Hostile.U64, Gen.Select(Hostile.U16, Hostile.U16), Section(maxRanges).Array[0, maxSenders + 1],
            Gen.Int[0, 9], Hostile.CountAround(maxSenders),
            (region, view, round, position, sections, lie, claimed) =>
            {
                int length = 23 + sections.Sum(s => s.Length);
                var message = new byte[length];
                message[0] = (byte)RegionControl.Token;
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(1), region);
                BinaryPrimitives.WriteUInt32LittleEndian(message.AsSpan(5), view);
                BinaryPrimitives.WriteUInt64LittleEndian(message.AsSpan(9), round);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(17), position.Item1);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(19), position.Item2);
                BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(21), (ushort)(lie == 0 ? claimed : sections.Length));
                int offset = 23;
                foreach (var s in sections)
                {
                    s.CopyTo(message, offset);
                    offset += s.Length;
                }

                return message;
            });

    /// <summary>The token object, its section list, and per section the section and its two NAK sets at their bound.</summary>
    private static long Bound(int maxSenders, int maxRanges) => 1024 + ((maxSenders + 1) * (256 + (2 * (96 + QsmGen.NakSetBound(maxRanges)))));

    [Theory]
    [InlineData(4, 2)]
    [InlineData(8, 32)]
    public void Tokens_are_rejected_or_round_trip_within_the_section_bound(int maxSenders, int maxRanges)
    {
        Property.Decodes(Hostile.Mutate(ValidToken(maxSenders, maxRanges)), Iterations, seed: 700 + (ulong)maxSenders, example =>
        {
            var (bytes, _) = example;
            var token = Property.Decode(bytes, Bound(maxSenders, maxRanges), b => Token.TryRead(b, maxRanges, maxSenders), "Token.TryRead");
            if (token is null)
            {
                return false;
            }

            Assert.True(token.Sections.Count <= maxSenders);
            foreach (var section in token.Sections)
            {
                Assert.True(!double.IsNaN(section.RateMin) && section.RateMin >= 0 && section.LossMax is >= 0 and <= 1, $"rate {section.RateMin}, loss {section.LossMax}");
                QsmGen.AssertWellFormed(section.PredecessorNaks, "predecessor NAKs");
                QsmGen.AssertWellFormed(section.PartitionNaks, "partition NAKs");
            }

            var again = new byte[bytes.Length];
            Assert.Equal(bytes.Length, token.Write(again));
            Assert.Equal(bytes, again);

            return true;
        });
    }

    [Fact]
    public void A_count_field_claiming_the_most_sections_allocates_no_more_than_the_bytes_carry()
    {
        // 23 bytes claiming 64 sections (the bound) and 65,535 (beyond it): nothing like 64 sections' worth is allocated.
        foreach (ushort claimed in new ushort[] { 64, ushort.MaxValue })
        {
            var message = new byte[23];
            message[0] = (byte)RegionControl.Token;
            BinaryPrimitives.WriteUInt16LittleEndian(message.AsSpan(21), claimed);
            var token = Property.Decode(message, 2048, b => Token.TryRead(b, 32, 64), "Token.TryRead");
            Assert.Null(token);
        }
    }
}
