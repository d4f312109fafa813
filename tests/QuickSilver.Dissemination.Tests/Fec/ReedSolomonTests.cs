using CsCheck;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Dissemination.Tests.Fec;

public class ReedSolomonTests
{
    /// <summary>One example: a code, a packet length, and which k of the n packets arrive (a permutation's prefix).</summary>
    public sealed record Example(int K, int N, int Length, int[] Order, int Seed)
    {
        public override string ToString() => $"k={K} n={N} L={Length} received={string.Join(',', Order.Take(K).Order())} seed={Seed}";
    }

    // k, n from the whole range (with n = 255 and n = k often), a length that is often not a multiple of a vector.
    private static readonly Gen<Example> Examples =
        Gen.Select(
            Gen.Frequency((3, Gen.Int[1, 70]), (1, Gen.Int[1, 255])),
            Gen.Frequency((4, Gen.Int[0, 80]), (1, Gen.Const(int.MaxValue))),
            Gen.Frequency((3, Gen.Int[0, 600]), (1, Gen.OneOf(Gen.Const(500), Gen.Const(1400)))),
            Gen.Int)
        .Select(t =>
        {
            int k = t.Item1;
            int n = (int)Math.Min(ReedSolomon.MaxPackets, (long)k + t.Item2);
            var random = new Random(t.Item4);
            int[] order = [.. Enumerable.Range(0, n)];
            random.Shuffle(order);
            return new Example(k, n, t.Item3, order, t.Item4);
        });

    [Fact]
    public void AnyKOfTheNPacketsRebuildThePage() =>
        Property.ForAll(Examples, 300, seed: 21, e => RoundTrip(e, blocks: e.Seed % 2 == 0), e => e.ToString());

    [Theory]
    [InlineData(60, 66)]   // the paper's page: 60 packets of 500 B, 10 % redundancy
    [InlineData(60, 72)]   // 20 %
    [InlineData(60, 132)]  // the cap: 1.2 · k repair packets
    [InlineData(116, 255)] // the paper's largest page, 58,000 B, at its cap: n = 255 exactly
    [InlineData(1, 255)]
    [InlineData(128, 255)]
    [InlineData(254, 255)]
    public void WorstCaseLossesAreRebuiltForThePapersPagesAndTheExtremes(int k, int n)
    {
        foreach (int length in new[] { 500, 1400, 37 })
        {
            for (int seed = 0; seed < 6; seed++)
            {
                var random = new Random(seed);
                int[] order = [.. Enumerable.Range(0, n)];
                // Keep all repair packets first, then as few source packets as complete k: the most to rebuild.
                int[] repairFirst = [.. order.Skip(k).OrderBy(_ => random.Next()), .. order.Take(k).OrderBy(_ => random.Next())];
                RoundTrip(new Example(k, n, length, repairFirst, seed), blocks: seed % 2 == 0);
            }
        }
    }

    [Fact]
    public void EverySubsetOfKPacketsOfASmallCodeDecodes()
    {
        const int K = 4, N = 10;
        for (int mask = 0; mask < 1 << N; mask++)
        {
            if (System.Numerics.BitOperations.PopCount((uint)mask) != K)
            {
                continue;
            }

            int[] received = [.. Enumerable.Range(0, N).Where(i => (mask & (1 << i)) != 0)];
            int[] order = [.. received, .. Enumerable.Range(0, N).Except(received)];
            RoundTrip(new Example(K, N, 19, order, mask), blocks: false);
        }
    }

    [Fact]
    public void NothingMissingRebuildsNothingAndAFullCodeHasNoRepairPackets()
    {
        var code = new ReedSolomon(255, 255);
        Assert.Equal(0, code.RepairCount);
        var page = new byte[255 * 3];
        new Random(1).NextBytes(page);
        byte[] copy = [.. page];
        Assert.Equal(0, code.Decode(page, Enumerable.Repeat(true, 255).ToArray(), [], []));
        Assert.Equal(copy, page);
    }

    [Fact]
    public void TheFirstRepairPacketIsTheXorOfThePageAndRowsDependOnlyOnKAndTheirIndex()
    {
        var small = new ReedSolomon(60, 66);
        var large = new ReedSolomon(60, 255);
        for (int i = 0; i < 60; i++)
        {
            Assert.Equal(1, small.Coefficient(0, i));
            for (int j = 0; j < small.RepairCount; j++)
            {
                Assert.NotEqual(0, small.Coefficient(j, i));
                Assert.Equal(small.Coefficient(j, i), large.Coefficient(j, i));
            }
        }
    }

    [Fact]
    public void OneRepairPacketAtATimeEqualsTheWholeEncoding()
    {
        var code = new ReedSolomon(10, 20);
        var (source, _) = Page(code.SourceCount, 100, new Random(3));
        Memory<byte>[] all = [.. Enumerable.Range(0, code.RepairCount).Select(_ => new Memory<byte>(new byte[100]))];
        code.Encode(source, all);
        for (int j = 0; j < code.RepairCount; j++)
        {
            var one = new byte[100];
            code.EncodeRepair(source, j, one);
            Assert.Equal(all[j].ToArray(), one);
        }
    }

    [Fact]
    public void FewerThanKPacketsThrowsNamingTheRepairPackets()
    {
        var code = new ReedSolomon(60, 72);
        var page = new byte[60 * 500];
        var received = Enumerable.Repeat(true, 60).ToArray();
        received[3] = received[17] = received[40] = false;
        var repair = new byte[2 * 500];
        var e = Assert.Throws<ArgumentException>(() => code.Decode(page, received, repair, [0, 5]));
        Assert.Equal("repair", e.ParamName);
        Assert.Contains("Fewer than k packets", e.Message, StringComparison.Ordinal);

        Memory<byte>[] pages = [.. Enumerable.Range(0, 60).Select(i => new Memory<byte>(page, i * 500, 500))];
        Assert.Equal("repair", Assert.Throws<ArgumentException>(() => code.Decode(pages, received, [new byte[500]], [1])).ParamName);
    }

    [Fact]
    public void MisuseThrowsNamingTheArgument()
    {
        Assert.Equal("k", Assert.Throws<ArgumentOutOfRangeException>(() => new ReedSolomon(0, 10)).ParamName);
        Assert.Equal("n", Assert.Throws<ArgumentOutOfRangeException>(() => new ReedSolomon(10, 9)).ParamName);
        Assert.Equal("n", Assert.Throws<ArgumentOutOfRangeException>(() => new ReedSolomon(10, 256)).ParamName);

        var code = new ReedSolomon(4, 8);
        var page = new byte[4 * 10];
        Assert.Equal("source", Assert.Throws<ArgumentException>(() => code.Encode(new byte[41], new byte[10])).ParamName);
        Assert.Equal("repair", Assert.Throws<ArgumentException>(() => code.Encode(page, new byte[11])).ParamName);
        Assert.Equal("repair", Assert.Throws<ArgumentException>(() => code.Encode(page, new byte[50])).ParamName);

        ReadOnlyMemory<byte>[] uneven = [new byte[10], new byte[10], new byte[9], new byte[10]];
        Assert.Equal("source", Assert.Throws<ArgumentException>(() => code.Encode(uneven, [new byte[10]])).ParamName);
        ReadOnlyMemory<byte>[] three = [new byte[10], new byte[10], new byte[10]];
        Assert.Equal("source", Assert.Throws<ArgumentException>(() => code.Encode(three, [new byte[10]])).ParamName);
        ReadOnlyMemory<byte>[] four = [new byte[10], new byte[10], new byte[10], new byte[10]];
        Assert.Equal("repair", Assert.Throws<ArgumentException>(() => code.Encode(four, [new byte[11]])).ParamName);
        Assert.Equal("repairIndex", Assert.Throws<ArgumentOutOfRangeException>(() => code.EncodeRepair(four, 4, new byte[10])).ParamName);

        bool[] lostOne = [true, false, true, true];
        Assert.Equal("received", Assert.Throws<ArgumentException>(() => code.Decode(page, [true, true, true], new byte[10], [0])).ParamName);
        Assert.Equal("repairIndices", Assert.Throws<ArgumentOutOfRangeException>(() => code.Decode(page, lostOne, new byte[10], [4])).ParamName);
        Assert.Equal("repairIndices", Assert.Throws<ArgumentOutOfRangeException>(() => code.Decode(page, lostOne, new byte[10], [-1])).ParamName);
        Assert.Equal("repairIndices", Assert.Throws<ArgumentException>(() => code.Decode(page, lostOne, new byte[20], [1, 1])).ParamName);
        Assert.Equal("repair", Assert.Throws<ArgumentException>(() => code.Decode(page, lostOne, new byte[15], [1])).ParamName);
    }

    [Fact]
    public void EncodingAndDecodingAllocateNothingAfterWarmUp()
    {
        var code = new ReedSolomon(60, 72);
        const int L = 500;
        var random = new Random(5);
        var page = new byte[60 * L];
        random.NextBytes(page);
        var repair = new byte[12 * L];
        var received = Enumerable.Repeat(true, 60).ToArray();
        int[] lost = [0, 7, 8, 30, 31, 59, 1, 2, 3, 4, 5, 6];
        foreach (int i in lost)
        {
            received[i] = false;
        }

        int[] repairIndices = [11, 3, 4, 0, 9, 2, 1, 5, 6, 7, 8, 10];
        var (sources, pageBuffers) = Page(60, L, random);
        Memory<byte>[] repairBuffers = [.. Enumerable.Range(0, 12).Select(_ => new Memory<byte>(new byte[L]))];
        ReadOnlyMemory<byte>[] receivedRepair = [.. repairIndices.Select(j => (ReadOnlyMemory<byte>)repairBuffers[j])];

        void Run()
        {
            code.Encode(page, repair);
            code.Decode(page, received, repair, repairIndices);
            code.Encode(sources, repairBuffers);
            code.Decode(pageBuffers, received, receivedRepair, repairIndices);
        }

        Run();
        Assert.Equal(0, Property.Allocated(Run));
    }

    private static void RoundTrip(Example e, bool blocks)
    {
        var code = new ReedSolomon(e.K, e.N);
        var random = new Random(e.Seed);
        int k = e.K, length = e.Length, repairs = e.N - e.K;
        var page = new byte[k * length];
        random.NextBytes(page);
        var repair = new byte[repairs * length];
        code.Encode(page, repair);

        var received = new bool[k];
        var repairIndices = new List<int>();
        foreach (int index in e.Order.Take(k))
        {
            if (index < k)
            {
                received[index] = true;
            }
            else
            {
                repairIndices.Add(index - k);
            }
        }

        // What the receiver holds: received source packets in place, garbage where packets were lost.
        var damaged = new byte[page.Length];
        random.NextBytes(damaged);
        for (int i = 0; i < k; i++)
        {
            if (received[i])
            {
                page.AsSpan(i * length, length).CopyTo(damaged.AsSpan(i * length));
            }
        }

        var receivedRepair = new byte[repairIndices.Count * length];
        for (int a = 0; a < repairIndices.Count; a++)
        {
            repair.AsSpan(repairIndices[a] * length, length).CopyTo(receivedRepair.AsSpan(a * length));
        }

        byte[] receivedRepairCopy = [.. receivedRepair];
        int rebuilt;
        if (blocks)
        {
            rebuilt = code.Decode(damaged, received, receivedRepair, [.. repairIndices]);
        }
        else
        {
            Memory<byte>[] sources = [.. Enumerable.Range(0, k).Select(i => new Memory<byte>(damaged, i * length, length))];
            ReadOnlyMemory<byte>[] repairPackets = [.. Enumerable.Range(0, repairIndices.Count).Select(a => new ReadOnlyMemory<byte>(receivedRepair, a * length, length))];
            rebuilt = code.Decode(sources, received, repairPackets, [.. repairIndices]);

            Memory<byte>[] repairBuffers = [.. Enumerable.Range(0, repairs).Select(_ => new Memory<byte>(new byte[length]))];
            code.Encode([.. Enumerable.Range(0, k).Select(i => new ReadOnlyMemory<byte>(page, i * length, length))], repairBuffers);
            Assert.Equal(repair, repairBuffers.SelectMany(b => b.ToArray()).ToArray());
        }

        Assert.Equal(received.Count(r => !r), rebuilt);
        Assert.True(page.AsSpan().SequenceEqual(damaged), $"the rebuilt page differs ({e})");
        Assert.Equal(receivedRepairCopy, receivedRepair);
    }

    private static (ReadOnlyMemory<byte>[] Sources, Memory<byte>[] Buffers) Page(int k, int length, Random random)
    {
        var page = new byte[k * length];
        random.NextBytes(page);
        return ([.. Enumerable.Range(0, k).Select(i => new ReadOnlyMemory<byte>(page, i * length, length))],
            [.. Enumerable.Range(0, k).Select(i => new Memory<byte>(page, i * length, length))]);
    }
}
