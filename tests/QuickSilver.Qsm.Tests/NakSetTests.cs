using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Tests;

public sealed class NakSetTests
{
    private static SortedSet<ulong> ToModel(NakSet set)
    {
        var model = new SortedSet<ulong>();
        foreach (var r in set.Ranges)
        {
            for (ulong s = r.First; s <= r.Last; s++)
            {
                model.Add(s);
            }
        }

        return model;
    }

    private static void AssertCanonical(NakSet set, string context)
    {
        for (int i = 0; i < set.RangeCount; i++)
        {
            Assert.True(set[i].First <= set[i].Last, $"{context}: empty range {set[i]}");
            if (i > 0)
            {
                Assert.True(set[i - 1].Last + 1 < set[i].First, $"{context}: ranges {set[i - 1]} and {set[i]} touch or overlap");
            }
        }
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    public void Random_operations_match_a_set_of_numbers(int seed)
    {
        var random = new Random(seed);
        var set = new NakSet(maxRanges: 10_000);
        var model = new SortedSet<ulong>();
        for (int op = 0; op < 20_000; op++)
        {
            ulong a = (ulong)random.Next(0, 500);
            ulong b = a + (ulong)random.Next(0, 6);
            string context = $"seed {seed} op {op}";
            switch (random.Next(4))
            {
                case 0:
                case 1:
                    set.AddRange(a, b);
                    for (ulong s = a; s <= b; s++)
                    {
                        model.Add(s);
                    }

                    break;
                case 2:
                    set.RemoveRange(a, b);
                    model.RemoveWhere(s => s >= a && s <= b);
                    break;
                default:
                    Assert.True(model.Contains(a) == set.Contains(a), $"{context}: Contains({a})");
                    break;
            }

            AssertCanonical(set, context);
            if (op % 500 == 0)
            {
                Assert.True(model.SetEquals(ToModel(set)), $"{context}: contents differ: {set}");
            }
        }

        Assert.Equal((ulong)model.Count, set.Cardinality);
    }

    [Theory]
    [InlineData(10)]
    [InlineData(11)]
    [InlineData(12)]
    public void Difference_and_intersection_match_set_algebra(int seed)
    {
        var random = new Random(seed);
        for (int round = 0; round < 300; round++)
        {
            var a = RandomSet(random);
            var b = RandomSet(random);
            var difference = new NakSet(1000);
            var intersection = new NakSet(1000);
            difference.SetDifference(a, b);
            intersection.SetIntersection(a, b);
            var ma = ToModel(a);
            var mb = ToModel(b);
            Assert.True(ma.Except(mb).ToHashSet().SetEquals(ToModel(difference)), $"seed {seed} round {round}: {a} \\ {b} = {difference}");
            Assert.True(ma.Intersect(mb).ToHashSet().SetEquals(ToModel(intersection)), $"seed {seed} round {round}: {a} ∩ {b} = {intersection}");
            AssertCanonical(difference, $"seed {seed}");
            AssertCanonical(intersection, $"seed {seed}");
        }
    }

    [Fact]
    public void The_range_bound_keeps_the_lowest_ranges_and_says_so()
    {
        var set = new NakSet(maxRanges: 3);
        foreach (ulong s in new ulong[] { 50, 10, 30, 20, 40 })
        {
            set.Add(s);
        }

        Assert.Equal("{10,20,30}+", set.ToString());
        Assert.True(set.Truncated);
        set.Add(11); // merges with 10: no new range needed
        Assert.Equal(3, set.RangeCount);
        set.RemoveRange(20, 20);
        Assert.Equal("{10-11,30}+", set.ToString());
        set.Clear();
        Assert.False(set.Truncated);
    }

    [Fact]
    public void Wire_round_trip_and_rejection_of_malformed_encodings()
    {
        var set = new NakSet(100);
        set.AddRange(5, 9);
        set.AddRange(100, 100);
        set.AddRange(ulong.MaxValue - 3, ulong.MaxValue);
        var bytes = new byte[set.EncodedSize];
        Assert.Equal(bytes.Length, set.Write(bytes));
        var back = new NakSet(100);
        Assert.Equal(bytes.Length, back.TryRead(bytes));
        Assert.Equal(set.ToString(), back.ToString());

        for (int cut = 0; cut < bytes.Length; cut++)
        {
            Assert.True(back.TryRead(bytes.AsSpan(0, cut)) == -1, $"a {cut}-byte prefix of a {bytes.Length}-byte encoding was accepted");
        }

        var overlapping = (byte[])bytes.Clone();
        BitConverter.TryWriteBytes(overlapping.AsSpan(2 + 16), 8UL); // second range starts inside the first
        Assert.Equal(-1, back.TryRead(overlapping));
        Assert.True(back.IsEmpty);

        Assert.Equal(-1, new NakSet(2).TryRead(bytes)); // more ranges than this receiver allows

        var random = new Random(5);
        var junk = new byte[64];
        for (int i = 0; i < 10_000; i++)
        {
            random.NextBytes(junk);
            int read = back.TryRead(junk.AsSpan(0, random.Next(0, 64)));
            Assert.True(read == -1 || read <= 64);
            AssertCanonical(back, "junk");
        }
    }

    private static NakSet RandomSet(Random random)
    {
        var set = new NakSet(1000);
        for (int i = 0; i < random.Next(0, 12); i++)
        {
            ulong a = (ulong)random.Next(0, 200);
            set.AddRange(a, a + (ulong)random.Next(0, 15));
        }

        return set;
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Coarsening_keeps_a_bounded_superset_that_merges_the_smallest_gaps(int seed)
    {
        var random = new Random(seed);
        var set = new NakSet(8);
        var added = new List<ulong>();
        ulong next = 0;
        for (int i = 0; i < 500; i++)
        {
            next += (ulong)random.Next(1, 20);
            added.Add(next);
            set.AppendCoarsening(next, next);
            Assert.True(set.Ranges.Length <= 8);
        }

        Assert.True(set.Coarse);
        Assert.All(added, n => Assert.True(set.Contains(n), $"{n} was added but is not in {set}"));
        Assert.Equal(added[0], set.Ranges[0].First);
        Assert.Equal(added[^1], set.Ranges[^1].Last);
        Assert.Throws<ArgumentException>(() => set.AppendCoarsening(added[^1], added[^1]));
    }

    [Fact]
    public void CoarsenTo_merges_the_nearest_ranges_and_keeps_a_superset()
    {
        var set = new NakSet(16);
        ulong[] added = [1, 3, 10, 11, 30, 100, 102, 500];
        foreach (var n in added)
        {
            set.AddRange(n, n);
        }

        set.CoarsenTo(3);
        Assert.Equal(3, set.RangeCount);
        Assert.True(set.Coarse);
        Assert.All(added, n => Assert.True(set.Contains(n)));
        Assert.Equal("{1-30,100-102,500}", set.ToString());
        Assert.Throws<ArgumentOutOfRangeException>(() => set.CoarsenTo(0));
    }
}
