using CsCheck;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// NAK sets as peers send them (inside tokens, pulls and NAKs): the decoder must keep the set's promises (at most
/// MaxRanges ranges, sorted, disjoint, apart) whatever the bytes say, allocate no more than the bound's worth of
/// ranges, and re-encode what it accepted to the same bytes. The set operations the token ring applies to a peer's sets
/// (difference, intersection, coarsening, purge) must keep those promises too, at the extremes of the sequence space.
/// </summary>
public sealed class NakSetProperties
{
    private const int Iterations = 4000;

    [Theory]
    [InlineData(1)]
    [InlineData(4)]
    [InlineData(32)]
    public void Decoded_sets_are_well_formed_and_round_trip(int maxRanges)
    {
        Property.Decodes(Hostile.Mutate(QsmGen.RawNakSet(maxRanges)), Iterations, seed: 600 + (ulong)maxRanges, example =>
        {
            var (bytes, _) = example;
            var set = new NakSet(maxRanges);
            int used = Property.Decode(bytes, QsmGen.NakSetBound(maxRanges), b => set.TryRead(b), "NakSet.TryRead");
            if (used < 0)
            {
                Assert.True(set.IsEmpty, "a rejected set is left empty");
                return false;
            }

            QsmGen.AssertWellFormed(set, "decoded set");
            var again = new byte[set.EncodedSize];
            Assert.Equal(used, set.Write(again));
            Assert.Equal(bytes.AsSpan(0, used).ToArray(), again);

            return true;
        });
    }

    [Fact]
    public void A_range_ending_at_the_top_of_the_sequence_space_is_the_last_one()
    {
        // Regression (found by the property above): the check "first > previous last + 1" wrapped when the previous
        // range ended at 2^64 - 1, so a second range below it was accepted and the set was no longer sorted.
        var bytes = QsmGen.Encode([(5, ulong.MaxValue), (10, 20)], 2);
        var set = new NakSet(8);
        Assert.Equal(-1, set.TryRead(bytes));
        Assert.True(set.IsEmpty);
    }

    private static Gen<NakSet> DecodedSet(int maxRanges) =>
        QsmGen.RawNakSet(maxRanges).Select(bytes =>
        {
            var set = new NakSet(maxRanges);
            set.TryRead(bytes);
            return set;
        });

    [Fact]
    public void Operations_on_peer_sets_keep_them_well_formed()
    {
        const int max = 8;
        var gen = Gen.Select(DecodedSet(max), DecodedSet(max), Hostile.U64, Hostile.U64, Gen.Int[1, max]);
        Property.ForAll(gen, Iterations, seed: 611, example =>
        {
            var (a, b, x, y, coarsen) = example;
            var result = new NakSet(max);
            result.SetDifference(a, b);
            QsmGen.AssertWellFormed(result, "a \\ b");
            foreach (var r in result.Ranges)
            {
                Assert.False(b.Contains(r.First) || b.Contains(r.Last), $"{r} of a \\ b is in b");
            }

            result.SetIntersection(a, b);
            QsmGen.AssertWellFormed(result, "a ∩ b");
            foreach (var r in result.Ranges)
            {
                Assert.True(a.Contains(r.First) && b.Contains(r.First) && a.Contains(r.Last) && b.Contains(r.Last), $"{r} of a ∩ b");
            }

            result.CopyFrom(a);
            result.AddRange(Math.Min(x, y), Math.Max(x, y));
            QsmGen.AssertWellFormed(result, "a + [x, y]");
            result.RemoveRange(Math.Min(x, y), Math.Max(x, y));
            QsmGen.AssertWellFormed(result, "a - [x, y]");
            Assert.False(result.Contains(x) || result.Contains(y));
            result.CopyFrom(a);
            result.RemoveUpTo(x);
            QsmGen.AssertWellFormed(result, "a purged");
            result.CopyFrom(a);
            result.CoarsenTo(coarsen);
            QsmGen.AssertWellFormed(result, "a coarsened");
            Assert.True(result.RangeCount <= coarsen);
            foreach (var r in a.Ranges)
            {
                Assert.True(result.Contains(r.First) && result.Contains(r.Last), $"coarsening lost {r}");
            }
        });
    }
}
