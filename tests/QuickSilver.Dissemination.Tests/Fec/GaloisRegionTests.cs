using CsCheck;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Dissemination.Tests.Fec;

public class GaloisRegionTests
{
    private const int Guard = 80;
    private const byte GuardByte = 0xA5;

    public static TheoryData<GaloisKernel> Kernels()
    {
        var data = new TheoryData<GaloisKernel>();
        foreach (GaloisKernel kernel in Enum.GetValues<GaloisKernel>())
        {
            data.Add(kernel);
        }

        return data;
    }

    // Every length up to 3 vectors of 64, then the packet sizes the code meets, then random ones below.
    private static readonly int[] FixedLengths = [.. Enumerable.Range(0, 200), 255, 256, 257, 500, 511, 1400, 1472];

    [SkippableTheory]
    [MemberData(nameof(Kernels))]
    public void EveryKernelMatchesTheScalarProductForEveryConstantAndLength(GaloisKernel kernel)
    {
        Skip.IfNot(GaloisRegion.IsSupported(kernel), $"this processor does not run {kernel}");
        var random = new Random(11);
        var source = new byte[2000];
        var before = new byte[2000 + (2 * Guard)];
        var actual = new byte[before.Length];
        for (int c = 0; c < 256; c++)
        {
            foreach (int length in FixedLengths.Append(random.Next(0, 2000)))
            {
                Check(kernel, (byte)c, length, accumulate: true, random, source, before, actual);
                Check(kernel, (byte)c, length, accumulate: false, random, source, before, actual);
            }
        }
    }

    [SkippableTheory]
    [MemberData(nameof(Kernels))]
    public void EveryKernelMatchesTheScalarProductOnRandomInputs(GaloisKernel kernel)
    {
        Skip.IfNot(GaloisRegion.IsSupported(kernel), $"this processor does not run {kernel}");
        var source = new byte[4096];
        var before = new byte[4096 + (2 * Guard)];
        var actual = new byte[before.Length];
        Property.ForAll(Gen.Select(Gen.Byte, Gen.Int[0, 4096], Gen.Bool, Gen.Int), 500, seed: 12, t =>
            Check(kernel, t.Item1, t.Item2, t.Item3, new Random(t.Item4), source, before, actual));
    }

    [SkippableTheory]
    [MemberData(nameof(Kernels))]
    public void ASpanMultipliedOntoItselfIsScaledInPlace(GaloisKernel kernel)
    {
        Skip.IfNot(GaloisRegion.IsSupported(kernel), $"this processor does not run {kernel}");
        var random = new Random(13);
        foreach (int length in new[] { 7, 16, 33, 500, 1400 })
        {
            for (int c = 0; c < 256; c += 17)
            {
                var data = new byte[length];
                random.NextBytes(data);
                byte[] original = [.. data];
                GaloisRegion.Multiply(kernel, (byte)c, data, data);
                Assert.Equal(original.Select(b => GaloisField.Multiply((byte)c, b)), data);

                data = [.. original];
                GaloisRegion.MultiplyAdd(kernel, (byte)c, data, data);
                Assert.Equal(original.Select(b => (byte)(b ^ GaloisField.Multiply((byte)c, b))), data);
            }
        }
    }

    [SkippableTheory]
    [MemberData(nameof(Kernels))]
    public void TheFourPacketKernelMatchesTheSumOfScalarProducts(GaloisKernel kernel)
    {
        Skip.IfNot(GaloisRegion.IsSupported(kernel), $"this processor does not run {kernel}");
        var gen = Gen.Select(Gen.Byte.Array[4], Gen.Frequency((3, Gen.Int[0, 200]), (1, Gen.Int[0, 2000])), Gen.Bool, Gen.Int);
        Property.ForAll(gen, 1500, seed: 14, t =>
        {
            var (c, length, overwrite, seed) = t;
            var random = new Random(seed);
            byte[][] sources = [.. Enumerable.Range(0, 4).Select(_ => new byte[length])];
            foreach (byte[] source in sources)
            {
                random.NextBytes(source);
            }

            var before = new byte[length + (2 * Guard)];
            before.AsSpan().Fill(GuardByte);
            random.NextBytes(before.AsSpan(Guard, length));
            byte[] actual = [.. before];
            GaloisRegion.MultiplyAdd4(kernel, overwrite, c, sources[0], sources[1], sources[2], sources[3], actual.AsSpan(Guard, length));
            for (int i = 0; i < length; i++)
            {
                int expected = overwrite ? 0 : before[Guard + i];
                for (int q = 0; q < 4; q++)
                {
                    expected ^= GaloisFieldTests.Reference(c[q], sources[q][i]);
                }

                Assert.True(expected == actual[Guard + i], $"byte {i} of {length}");
            }

            Assert.True(actual.AsSpan(0, Guard).SequenceEqual(before.AsSpan(0, Guard)) && actual.AsSpan(Guard + length).SequenceEqual(before.AsSpan(Guard + length)), "wrote outside the destination");
        });
    }

    [SkippableTheory]
    [MemberData(nameof(Kernels))]
    public void ALinearCombinationOfAnyNumberOfTermsMatchesTheScalarSum(GaloisKernel kernel)
    {
        Skip.IfNot(GaloisRegion.IsSupported(kernel), $"this processor does not run {kernel}");
        var gen = Gen.Select(Gen.Frequency((1, Gen.Const((byte)0)), (1, Gen.Const((byte)1)), (4, Gen.Byte)).Array[0, 13], Gen.Int[0, 300], Gen.Int);
        Property.ForAll(gen, 1000, seed: 15, t =>
        {
            var (c, length, seed) = t;
            var random = new Random(seed);
            byte[][] packets = [.. c.Select(_ => new byte[length])];
            foreach (byte[] packet in packets)
            {
                random.NextBytes(packet);
            }

            var target = new byte[length];
            random.NextBytes(target);
            var sum = new LinearCombination(kernel, target);
            for (int q = 0; q < c.Length; q++)
            {
                sum.Add(c[q], packets[q]);
            }

            sum.Finish();
            for (int i = 0; i < length; i++)
            {
                int expected = 0;
                for (int q = 0; q < c.Length; q++)
                {
                    expected ^= GaloisFieldTests.Reference(c[q], packets[q][i]);
                }

                Assert.True(expected == target[i], $"byte {i} of {length} with {c.Length} terms");
            }
        });
    }

    [Fact]
    public void MisuseIsRejectedNamingTheDestination()
    {
        var buffer = new byte[64];
        Assert.Equal("destination", Assert.Throws<ArgumentException>(() => GaloisRegion.MultiplyAdd(3, buffer.AsSpan(0, 10), buffer.AsSpan(20, 11))).ParamName);
        Assert.Equal("destination", Assert.Throws<ArgumentException>(() => GaloisRegion.Multiply(3, buffer.AsSpan(0, 10), buffer.AsSpan(20, 9))).ParamName);
        Assert.Equal("destination", Assert.Throws<ArgumentException>(() => GaloisRegion.MultiplyAdd(3, buffer.AsSpan(0, 32), buffer.AsSpan(1, 32))).ParamName);
    }

    [Fact]
    public void TheBestKernelIsSupportedAndIsAVectorOneWhereTheHardwareHasShuffles()
    {
        Assert.True(GaloisRegion.IsSupported(GaloisRegion.Best));
        if (System.Runtime.Intrinsics.X86.Ssse3.IsSupported)
        {
            Assert.NotEqual(GaloisKernel.Scalar, GaloisRegion.Best);
        }
    }

    private static void Check(GaloisKernel kernel, byte c, int length, bool accumulate, Random random, byte[] source, byte[] before, byte[] actual)
    {
        random.NextBytes(source.AsSpan(0, length));
        before.AsSpan().Fill(GuardByte);
        random.NextBytes(before.AsSpan(Guard, length));
        before.CopyTo(actual);
        Span<byte> destination = actual.AsSpan(Guard, length);
        if (accumulate)
        {
            GaloisRegion.MultiplyAdd(kernel, c, source.AsSpan(0, length), destination);
        }
        else
        {
            GaloisRegion.Multiply(kernel, c, source.AsSpan(0, length), destination);
        }

        for (int i = 0; i < length; i++)
        {
            byte product = GaloisFieldTests.Reference(c, source[i]);
            byte expected = accumulate ? (byte)(before[Guard + i] ^ product) : product;
            if (actual[Guard + i] != expected)
            {
                Assert.Fail($"{kernel} {(accumulate ? "MultiplyAdd" : "Multiply")} by {c} over {length} bytes: byte {i} is {actual[Guard + i]}, expected {expected}");
            }
        }

        for (int i = 0; i < Guard; i++)
        {
            Assert.True(actual[i] == GuardByte && actual[Guard + length + i] == GuardByte, $"{kernel} by {c} over {length} bytes wrote outside the destination");
        }
    }
}
