using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>Hostile generators of the QSM encodings (NAK sets, tokens) and the invariants a decoded value must keep.</summary>
internal static class QsmGen
{
    /// <summary>Ranges as a peer may write them: sorted with hostile gaps and lengths (touching 0 and 2^64 − 1), or any
    /// pairs at all (reversed, overlapping, unsorted); the count field usually tells the truth and sometimes lies.</summary>
    public static Gen<byte[]> RawNakSet(int maxRanges) => Gen.Frequency(
        (3, Gen.Select(SortedRanges(maxRanges), Gen.Int[0, 9], Hostile.CountAround(maxRanges), (ranges, lie, claimed) => Encode(ranges, lie == 0 ? claimed : ranges.Count))),
        (1, Gen.Select(Gen.Select(Hostile.U64, Hostile.U64).Array[0, maxRanges + 2], ranges => Encode(ranges, ranges.Length))));

    /// <summary>Sorted, disjoint, non-adjacent ranges from a hostile start, with hostile gaps and lengths; stops before
    /// 2^64 − 1 would wrap (and sometimes ends exactly there).</summary>
    public static Gen<IReadOnlyList<(ulong First, ulong Last)>> SortedRanges(int maxRanges) =>
        Gen.Select(Hostile.U64, Gen.Select(Step, Step).Array[0, maxRanges + 1], (start, steps) =>
        {
            var ranges = new List<(ulong, ulong)>();
            ulong next = start;
            foreach (var (length, gap) in steps)
            {
                if (ulong.MaxValue - next < length)
                {
                    ranges.Add((next, ulong.MaxValue));
                    break;
                }

                ulong last = next + length;
                ranges.Add((next, last));
                if (ulong.MaxValue - last < gap + 2)
                {
                    break;
                }

                next = last + 2 + gap;
            }

            return (IReadOnlyList<(ulong, ulong)>)ranges;
        });

    private static readonly Gen<ulong> Step = Gen.Frequency((4, Gen.ULong[0, 8]), (1, Hostile.U64));

    public static byte[] Encode(IReadOnlyList<(ulong First, ulong Last)> ranges, int count)
    {
        var bytes = new byte[2 + (ranges.Count * NakSet.RangeBytes)];
        BinaryPrimitives.WriteUInt16LittleEndian(bytes, (ushort)count);
        for (int i = 0; i < ranges.Count; i++)
        {
            BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(2 + (i * 16)), ranges[i].First);
            BinaryPrimitives.WriteUInt64LittleEndian(bytes.AsSpan(10 + (i * 16)), ranges[i].Last);
        }

        return bytes;
    }

    /// <summary>Fails unless <paramref name="set"/> is what NakSet promises: at most MaxRanges ranges, each well formed,
    /// sorted, disjoint and non-adjacent.</summary>
    public static void AssertWellFormed(NakSet set, string what)
    {
        var ranges = set.Ranges;
        if (ranges.Length > set.MaxRanges)
        {
            throw new PropertyFailedException($"{what}: {ranges.Length} ranges, above the bound of {set.MaxRanges}");
        }

        for (int i = 0; i < ranges.Length; i++)
        {
            if (ranges[i].Last < ranges[i].First)
            {
                throw new PropertyFailedException($"{what}: range {i} is reversed: {set}");
            }

            if (i > 0 && (ranges[i - 1].Last == ulong.MaxValue || ranges[i].First <= ranges[i - 1].Last + 1))
            {
                throw new PropertyFailedException($"{what}: ranges {i - 1} and {i} are not sorted, disjoint and apart: {set}");
            }
        }
    }

    /// <summary>What decoding a NAK set of at most <paramref name="maxRanges"/> ranges may allocate: its range array grown
    /// to the bound (by doubling from 16) and the arrays it outgrew.</summary>
    public static long NakSetBound(int maxRanges) => 3L * ((maxRanges * NakSet.RangeBytes) + 32);
}
