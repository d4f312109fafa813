namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// GF(2^8), the field the Reed–Solomon code works in: bytes, added with XOR, multiplied as polynomials over GF(2)
/// modulo the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1 (<see cref="Polynomial"/>, 0x11D), with x (the byte 2)
/// as generator: every non-zero byte is 2^e for one e in [0, 255).
/// </summary>
/// <remarks>
/// <para>0x11D is the polynomial of most byte-oriented Reed–Solomon codes (Rizzo's FEC, which the WebBase facility
/// used, Jerasure's default, Intel ISA-L); being primitive, its powers of 2 walk all 255 non-zero bytes, so a log table
/// and an exponent table are enough to multiply and invert.</para>
/// <para>Tables, built once (73 KB): <c>Exp</c> (2^e for e in [0, 510), doubled so a sum of two logs needs no modulo),
/// <c>Log</c>, <c>Inverses</c>, the full 256 × 256 product table (one load per scalar multiply, which the scalar
/// kernel and the matrix work use) and, per constant c, the two 16-byte nibble tables c·x and c·(x &lt;&lt; 4) for
/// x in [0, 16) that the vector kernels look up with a byte shuffle (<see cref="GaloisRegion"/>): since multiplying
/// by c is linear over GF(2), c·b = c·(b &amp; 0x0F) ⊕ c·(b &amp; 0xF0).</para>
/// </remarks>
public static class GaloisField
{
    /// <summary>The field's modulus, x^8 + x^4 + x^3 + x^2 + 1, with its x^8 bit.</summary>
    public const int Polynomial = 0x11D;

    /// <summary>The number of non-zero elements: the order of the multiplicative group.</summary>
    public const int Order = 255;

    private static readonly byte[] ExpTable = new byte[2 * Order];
    private static readonly byte[] LogTable = new byte[256];
    private static readonly byte[] InverseTable = new byte[256];
    private static readonly byte[] ProductTable = new byte[256 * 256];
    private static readonly byte[] NibbleTable = new byte[256 * 32];

#pragma warning disable CA1810 // the tables depend on each other in order; a static constructor says so plainly
    static GaloisField()
#pragma warning restore CA1810
    {
        int x = 1;
        for (int e = 0; e < Order; e++)
        {
            ExpTable[e] = (byte)x;
            ExpTable[e + Order] = (byte)x;
            LogTable[x] = (byte)e;
            x <<= 1;
            if ((x & 0x100) != 0)
            {
                x ^= Polynomial;
            }
        }

        for (int a = 1; a < 256; a++)
        {
            InverseTable[a] = ExpTable[Order - LogTable[a]];
            for (int b = 1; b < 256; b++)
            {
                ProductTable[(a << 8) | b] = ExpTable[LogTable[a] + LogTable[b]];
            }
        }

        for (int c = 0; c < 256; c++)
        {
            for (int n = 0; n < 16; n++)
            {
                NibbleTable[(c * 32) + n] = ProductTable[(c << 8) | n];
                NibbleTable[(c * 32) + 16 + n] = ProductTable[(c << 8) | (n << 4)];
            }
        }
    }

    /// <summary>a + b (and a − b: the field has characteristic 2).</summary>
    public static byte Add(byte a, byte b) => (byte)(a ^ b);

    /// <summary>a · b.</summary>
    public static byte Multiply(byte a, byte b) => ProductTable[(a << 8) | b];

    /// <summary>The b with a · b = 1.</summary>
    /// <exception cref="DivideByZeroException">a is 0.</exception>
    public static byte Inverse(byte a) => a == 0 ? throw new DivideByZeroException("0 has no inverse in GF(2^8).") : InverseTable[a];

    /// <summary>a / b.</summary>
    /// <exception cref="DivideByZeroException">b is 0.</exception>
    public static byte Divide(byte a, byte b) => Multiply(a, Inverse(b));

    /// <summary>2^e, for any e ≥ 0.</summary>
    public static byte Exp(int e)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(e);
        return ExpTable[e % Order];
    }

    /// <summary>The e in [0, 255) with 2^e = a.</summary>
    /// <exception cref="ArgumentOutOfRangeException">a is 0, which is no power of 2.</exception>
    public static int Log(byte a) => a == 0 ? throw new ArgumentOutOfRangeException(nameof(a), "0 has no logarithm in GF(2^8).") : LogTable[a];

    /// <summary>The 256 products c · x for x = 0..255: the scalar kernel's table for one constant.</summary>
    internal static ReadOnlySpan<byte> ProductRow(byte c) => new(ProductTable, c << 8, 256);

    /// <summary>c · x for x = 0..15, then c · (x &lt;&lt; 4) for x = 0..15: the vector kernels' two shuffle tables for c.</summary>
    internal static ReadOnlySpan<byte> NibbleTables(byte c) => new(NibbleTable, c * 32, 32);

    /// <summary>The whole product table as a reference for tests; index (a &lt;&lt; 8) | b.</summary>
    internal static ReadOnlySpan<byte> Products => ProductTable;
}
