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

    /// <summary>A section's holder (the last member that processed it, docs/wire-format.md) is on the wire only when a
    /// member passed the section on untouched: a token whose holders are all the ones its step implies is as long as
    /// before holders existed; one that differs sets bit 15 of the count and carries every section's holder; a token
    /// that sets the bit without need is refused (one encoding per token).</summary>
    [Fact]
    public void Holders_travel_only_when_one_differs_from_the_step()
    {
        var token = new Token { Region = 1, View = 2, Round = 3, Partition = 0, Step = 3 };
        token.Sections.Add(new TokenSection(7, 4) { Holder = 2 });
        token.Sections.Add(new TokenSection(8, 4) { Holder = 2 });
        var plain = new byte[1024];
        int plainLength = token.Write(plain);
        Assert.Equal(0, BinaryPrimitives.ReadUInt16LittleEndian(plain.AsSpan(21)) & Token.HoldersFlag);

        token.Sections[1].Holder = 0; // step 1 and 2 had no stream of sender 8
        var marked = new byte[1024];
        int markedLength = token.Write(marked);
        Assert.Equal(plainLength + 4, markedLength);
        Assert.NotEqual(0, BinaryPrimitives.ReadUInt16LittleEndian(marked.AsSpan(21)) & Token.HoldersFlag);
        var read = Token.TryRead(marked.AsSpan(0, markedLength), 4, 64)!;
        Assert.Equal([(ushort)2, (ushort)0], read.Sections.Select(s => s.Holder));
        Assert.Equal([(ushort)2, (ushort)2], Token.TryRead(plain.AsSpan(0, plainLength), 4, 64)!.Sections.Select(s => s.Holder));

        // The bit set, every holder the implied one: refused.
        token.Sections[1].Holder = 2;
        var needless = new List<byte>(plain.AsSpan(0, 23).ToArray());
        BinaryPrimitives.WriteUInt16LittleEndian(System.Runtime.InteropServices.CollectionsMarshal.AsSpan(needless)[21..], (ushort)(2 | Token.HoldersFlag));
        foreach (var section in token.Sections)
        {
            var one = new byte[512];
            needless.AddRange(one.AsSpan(0, section.Write(one, holder: true)).ToArray());
        }

        Assert.Equal(plainLength + 4, needless.Count);
        Assert.Null(Token.TryRead(needless.ToArray(), 4, 64));
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
