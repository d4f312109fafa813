using CsCheck;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Dissemination.Tests.Fec;

public class GaloisFieldTests
{
    private const int Iterations = 2000;

    private static readonly Gen<(byte A, byte B, byte C)> Triples = Gen.Select(Gen.Byte, Gen.Byte, Gen.Byte);

    /// <summary>Reference model: shift-and-add polynomial multiplication reduced modulo 0x11D, one bit at a time.</summary>
    internal static byte Reference(byte a, byte b)
    {
        int product = 0;
        int x = a;
        for (int bit = 0; bit < 8; bit++)
        {
            if ((b & (1 << bit)) != 0)
            {
                product ^= x;
            }

            x <<= 1;
            if ((x & 0x100) != 0)
            {
                x ^= GaloisField.Polynomial;
            }
        }

        return (byte)product;
    }

    [Fact]
    public void EveryProductMatchesTheShiftAndAddReference()
    {
        for (int a = 0; a < 256; a++)
        {
            for (int b = 0; b < 256; b++)
            {
                Assert.True(Reference((byte)a, (byte)b) == GaloisField.Multiply((byte)a, (byte)b), $"{a} · {b}");
            }
        }
    }

    [Fact]
    public void TwoGeneratesEveryNonZeroElement()
    {
        var seen = new HashSet<byte>();
        for (int e = 0; e < GaloisField.Order; e++)
        {
            byte x = GaloisField.Exp(e);
            Assert.NotEqual(0, x);
            Assert.True(seen.Add(x), $"2^{e} = {x} repeats: the polynomial is not primitive");
            Assert.Equal(e, GaloisField.Log(x));
        }

        Assert.Equal(1, GaloisField.Exp(GaloisField.Order));
    }

    [Fact]
    public void MultiplicationIsAssociativeAndCommutative() =>
        Property.ForAll(Triples, Iterations, seed: 1, t =>
        {
            Assert.Equal(GaloisField.Multiply(GaloisField.Multiply(t.A, t.B), t.C), GaloisField.Multiply(t.A, GaloisField.Multiply(t.B, t.C)));
            Assert.Equal(GaloisField.Multiply(t.A, t.B), GaloisField.Multiply(t.B, t.A));
        });

    [Fact]
    public void MultiplicationDistributesOverAddition() =>
        Property.ForAll(Triples, Iterations, seed: 2, t =>
            Assert.Equal(
                GaloisField.Multiply(t.A, GaloisField.Add(t.B, t.C)),
                GaloisField.Add(GaloisField.Multiply(t.A, t.B), GaloisField.Multiply(t.A, t.C))));

    [Fact]
    public void EveryNonZeroElementHasAnInverseAndDivisionUndoesMultiplication() =>
        Property.ForAll(Gen.Select(Gen.Byte[1, 255], Gen.Byte), Iterations, seed: 3, t =>
        {
            var (a, b) = t;
            Assert.Equal(1, GaloisField.Multiply(a, GaloisField.Inverse(a)));
            Assert.Equal(b, GaloisField.Divide(GaloisField.Multiply(b, a), a));
            Assert.Equal(0, GaloisField.Add(b, b));
            Assert.Equal(b, GaloisField.Multiply(b, 1));
            Assert.Equal(0, GaloisField.Multiply(b, 0));
        });

    [Fact]
    public void ZeroHasNoInverseAndNoLogarithm()
    {
        Assert.Throws<DivideByZeroException>(() => GaloisField.Inverse(0));
        Assert.Throws<DivideByZeroException>(() => GaloisField.Divide(5, 0));
        Assert.Equal("a", Assert.Throws<ArgumentOutOfRangeException>(() => GaloisField.Log(0)).ParamName);
    }

    [Fact]
    public void NibbleTablesSplitEveryProduct()
    {
        for (int c = 0; c < 256; c++)
        {
            ReadOnlySpan<byte> tables = GaloisField.NibbleTables((byte)c);
            for (int b = 0; b < 256; b++)
            {
                Assert.Equal(GaloisField.Multiply((byte)c, (byte)b), tables[b & 0x0F] ^ tables[16 + (b >> 4)]);
            }
        }
    }
}
