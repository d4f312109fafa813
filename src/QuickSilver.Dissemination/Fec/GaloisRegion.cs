using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Runtime.Intrinsics;
using System.Runtime.Intrinsics.Arm;
using System.Runtime.Intrinsics.X86;

namespace QuickSilver.Dissemination.Fec;

/// <summary>Which code multiplies a packet by a constant: a table load per byte, or a byte shuffle per 16, 32 or 64.</summary>
public enum GaloisKernel
{
    /// <summary>One load from the constant's 256-byte product row per byte; runs everywhere.</summary>
    Scalar,

    /// <summary>16 bytes at a time with SSSE3 <c>pshufb</c> (x86) or <c>tbl</c> (Arm64).</summary>
    Vector128,

    /// <summary>32 bytes at a time with AVX2 <c>vpshufb</c>.</summary>
    Vector256,

    /// <summary>64 bytes at a time with AVX-512BW <c>vpshufb</c>.</summary>
    Vector512,
}

/// <summary>
/// Multiplies a whole packet by one GF(2^8) constant, into or onto another: the Reed–Solomon code's only data-path
/// operation (each repair packet is a sum of constant multiples of the source packets, and so is each rebuilt one).
/// </summary>
/// <remarks>
/// <para>The vector kernels use the split-nibble method: multiplying by c is linear over GF(2), so
/// c·b = c·(b &amp; 0x0F) ⊕ c·(b &gt;&gt; 4 &lt;&lt; 4), and each half is one lookup in a 16-entry table, which a byte
/// shuffle (<c>pshufb</c>, <c>tbl</c>) does for a whole vector at once: per vector, one load, a shift, two masks, two
/// shuffles, an XOR (and, for <see cref="MultiplyAdd(byte, ReadOnlySpan{byte}, Span{byte})"/>, a load and an XOR of the
/// destination), one store. A length that is not a multiple of the vector ends with one more full vector placed flush
/// with the end and blended under a mask, so a 500-byte packet is 16 vectors of 32 bytes, not 15 and 20 scalar bytes.
/// Lengths shorter than one vector use the next narrower kernel, down to the scalar one (one product-table load per
/// byte). Constants 0 and 1 skip the tables: clear or nothing, copy or XOR.</para>
/// <para>The kernels are <c>NoInlining</c>: each call covers at least one whole vector, so the call costs little,
/// and inlined into the encoder's loop under tiered PGO the 512-bit kernel ran 5 to 15 times slower than alone
/// (BenchmarkDotNet with tiered compilation on; normal with it off), which a separate method avoids.</para>
/// <para>Nothing here allocates. <see cref="Best"/> is the widest kernel the processor runs; the others are kept for
/// the tests (every kernel against the scalar one) and the benchmarks (SIMD against scalar).</para>
/// </remarks>
public static class GaloisRegion
{
    // 64 zero bytes then 64 0xFF: the 32 (or 16, 64) bytes from offset 64 − s keep all but the first s lanes.
    private static readonly byte[] TailMask = CreateTailMask();

    /// <summary>The widest kernel this processor accelerates.</summary>
    public static GaloisKernel Best { get; } =
        IsSupported(GaloisKernel.Vector512) ? GaloisKernel.Vector512
        : IsSupported(GaloisKernel.Vector256) ? GaloisKernel.Vector256
        : IsSupported(GaloisKernel.Vector128) ? GaloisKernel.Vector128
        : GaloisKernel.Scalar;

    /// <summary>Whether <paramref name="kernel"/> can run on this processor.</summary>
    public static bool IsSupported(GaloisKernel kernel) => kernel switch
    {
        GaloisKernel.Scalar => true,
        GaloisKernel.Vector128 => Ssse3.IsSupported || AdvSimd.Arm64.IsSupported,
        GaloisKernel.Vector256 => Avx2.IsSupported,
        GaloisKernel.Vector512 => Avx512BW.IsSupported,
        _ => false,
    };

    /// <summary><paramref name="destination"/> ⊕= <paramref name="c"/> · <paramref name="source"/>, byte by byte.</summary>
    /// <exception cref="ArgumentException">The lengths differ, or the spans overlap without being the same span.</exception>
    public static void MultiplyAdd(byte c, ReadOnlySpan<byte> source, Span<byte> destination) => MultiplyAdd(Best, c, source, destination);

    /// <summary><paramref name="destination"/> = <paramref name="c"/> · <paramref name="source"/>, byte by byte.</summary>
    /// <exception cref="ArgumentException">The lengths differ, or the spans overlap without being the same span.</exception>
    public static void Multiply(byte c, ReadOnlySpan<byte> source, Span<byte> destination) => Multiply(Best, c, source, destination);

    /// <summary><see cref="MultiplyAdd(byte, ReadOnlySpan{byte}, Span{byte})"/> with a chosen kernel.</summary>
    /// <exception cref="PlatformNotSupportedException">The processor does not run <paramref name="kernel"/>.</exception>
    public static void MultiplyAdd(GaloisKernel kernel, byte c, ReadOnlySpan<byte> source, Span<byte> destination)
    {
        Check(kernel, source, destination);
        if (c == 0)
        {
            return;
        }

        Apply<Accumulate>(kernel, c, ref MemoryMarshal.GetReference(source), ref MemoryMarshal.GetReference(destination), source.Length);
    }

    /// <summary><see cref="Multiply(byte, ReadOnlySpan{byte}, Span{byte})"/> with a chosen kernel.</summary>
    /// <exception cref="PlatformNotSupportedException">The processor does not run <paramref name="kernel"/>.</exception>
    public static void Multiply(GaloisKernel kernel, byte c, ReadOnlySpan<byte> source, Span<byte> destination)
    {
        Check(kernel, source, destination);
        if (c == 0)
        {
            destination.Clear();
            return;
        }

        if (c == 1)
        {
            source.CopyTo(destination);
            return;
        }

        Apply<Overwrite>(kernel, c, ref MemoryMarshal.GetReference(source), ref MemoryMarshal.GetReference(destination), source.Length);
    }

    private static void Check(GaloisKernel kernel, ReadOnlySpan<byte> source, Span<byte> destination)
    {
        if (!IsSupported(kernel))
        {
            throw new PlatformNotSupportedException($"This processor does not run the {kernel} GF(2^8) kernel.");
        }

        if (source.Length != destination.Length)
        {
            throw new ArgumentException($"The destination has {destination.Length} bytes and the source {source.Length}; they must be equal.", nameof(destination));
        }

        if (source.Overlaps(destination, out int offset) && offset != 0)
        {
            throw new ArgumentException("The destination overlaps the source at an offset; pass the same span or disjoint ones.", nameof(destination));
        }
    }

    private static void Apply<TMode>(GaloisKernel kernel, byte c, ref byte source, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        if (TMode.Accumulates && c == 1)
        {
            Xor(kernel, ref source, ref destination, length);
            return;
        }

        bool done = kernel switch
        {
            GaloisKernel.Vector512 => Apply512<TMode>(c, ref source, ref destination, length)
                || Apply256<TMode>(c, ref source, ref destination, length)
                || Apply128<TMode>(c, ref source, ref destination, length),
            GaloisKernel.Vector256 => Apply256<TMode>(c, ref source, ref destination, length)
                || Apply128<TMode>(c, ref source, ref destination, length),
            GaloisKernel.Vector128 => Apply128<TMode>(c, ref source, ref destination, length),
            _ => false,
        };

        if (!done)
        {
            ApplyScalar<TMode>(c, ref source, ref destination, length);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static bool Apply512<TMode>(byte c, ref byte source, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        const int Width = 64;
        if (length < Width)
        {
            return false;
        }

        var (low, high) = Tables512(c);
        Vector512<byte> nibble = Vector512.Create((byte)0x0F);

        nuint end = (nuint)length;
        nuint i = 0;
        for (; i + Width <= end; i += Width)
        {
            Vector512<byte> p = Product512(low, high, nibble, Vector512.LoadUnsafe(ref source, i));
            if (TMode.Accumulates)
            {
                p ^= Vector512.LoadUnsafe(ref destination, i);
            }

            p.StoreUnsafe(ref destination, i);
        }

        if (i < end)
        {
            nuint last = end - Width;
            Vector512<byte> keep = Vector512.LoadUnsafe(ref MemoryMarshal.GetArrayDataReference(TailMask), 64 - (i - last));
            Vector512<byte> p = Product512(low, high, nibble, Vector512.LoadUnsafe(ref source, last));
            Vector512<byte> d = Vector512.LoadUnsafe(ref destination, last);
            (TMode.Accumulates ? d ^ (p & keep) : Vector512.ConditionalSelect(keep, p, d)).StoreUnsafe(ref destination, last);
        }

        return true;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static bool Apply256<TMode>(byte c, ref byte source, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        const int Width = 32;
        if (length < Width)
        {
            return false;
        }

        var (low, high) = Tables256(c);
        Vector256<byte> nibble = Vector256.Create((byte)0x0F);

        nuint end = (nuint)length;
        nuint i = 0;
        for (; i + Width <= end; i += Width)
        {
            Vector256<byte> p = Product256(low, high, nibble, Vector256.LoadUnsafe(ref source, i));
            if (TMode.Accumulates)
            {
                p ^= Vector256.LoadUnsafe(ref destination, i);
            }

            p.StoreUnsafe(ref destination, i);
        }

        if (i < end)
        {
            nuint last = end - Width;
            Vector256<byte> keep = Vector256.LoadUnsafe(ref MemoryMarshal.GetArrayDataReference(TailMask), 64 - (i - last));
            Vector256<byte> p = Product256(low, high, nibble, Vector256.LoadUnsafe(ref source, last));
            Vector256<byte> d = Vector256.LoadUnsafe(ref destination, last);
            (TMode.Accumulates ? d ^ (p & keep) : Vector256.ConditionalSelect(keep, p, d)).StoreUnsafe(ref destination, last);
        }

        return true;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static bool Apply128<TMode>(byte c, ref byte source, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        const int Width = 16;
        if (length < Width)
        {
            return false;
        }

        ref byte tables = ref MemoryMarshal.GetReference(GaloisField.NibbleTables(c));
        Vector128<byte> low = Vector128.LoadUnsafe(ref tables);
        Vector128<byte> high = Vector128.LoadUnsafe(ref tables, 16);
        Vector128<byte> nibble = Vector128.Create((byte)0x0F);

        nuint end = (nuint)length;
        nuint i = 0;
        for (; i + Width <= end; i += Width)
        {
            Vector128<byte> p = Product128(low, high, nibble, Vector128.LoadUnsafe(ref source, i));
            if (TMode.Accumulates)
            {
                p ^= Vector128.LoadUnsafe(ref destination, i);
            }

            p.StoreUnsafe(ref destination, i);
        }

        if (i < end)
        {
            nuint last = end - Width;
            Vector128<byte> keep = Vector128.LoadUnsafe(ref MemoryMarshal.GetArrayDataReference(TailMask), 64 - (i - last));
            Vector128<byte> p = Product128(low, high, nibble, Vector128.LoadUnsafe(ref source, last));
            Vector128<byte> d = Vector128.LoadUnsafe(ref destination, last);
            (TMode.Accumulates ? d ^ (p & keep) : Vector128.ConditionalSelect(keep, p, d)).StoreUnsafe(ref destination, last);
        }

        return true;
    }

    /// <summary>
    /// <paramref name="destination"/> = (or ⊕=, unless <paramref name="overwrite"/>) Σ c_q · s_q over the four packets
    /// s0..s3 with <paramref name="coefficients"/>[q] = c_q, in one pass over the destination: the codec's inner
    /// operation, since every repair or rebuilt packet is such a sum over k packets. Four products per destination load
    /// and store, and one call instead of four. Lengths are the caller's to check (all equal, the destination apart
    /// from the sources). The 128-bit and scalar kernels make four single passes.
    /// </summary>
    internal static void MultiplyAdd4(GaloisKernel kernel, bool overwrite, ReadOnlySpan<byte> coefficients,
        ReadOnlySpan<byte> s0, ReadOnlySpan<byte> s1, ReadOnlySpan<byte> s2, ReadOnlySpan<byte> s3, Span<byte> destination)
    {
        if (overwrite)
        {
            Apply4<Overwrite>(kernel, coefficients, s0, s1, s2, s3, destination);
        }
        else
        {
            Apply4<Accumulate>(kernel, coefficients, s0, s1, s2, s3, destination);
        }
    }

    private static void Apply4<TMode>(GaloisKernel kernel, ReadOnlySpan<byte> c,
        ReadOnlySpan<byte> s0, ReadOnlySpan<byte> s1, ReadOnlySpan<byte> s2, ReadOnlySpan<byte> s3, Span<byte> destination)
        where TMode : struct, IStoreMode
    {
        int length = destination.Length;
        ref byte d = ref MemoryMarshal.GetReference(destination);
        ref byte r0 = ref MemoryMarshal.GetReference(s0);
        ref byte r1 = ref MemoryMarshal.GetReference(s1);
        ref byte r2 = ref MemoryMarshal.GetReference(s2);
        ref byte r3 = ref MemoryMarshal.GetReference(s3);
        bool done = kernel switch
        {
            GaloisKernel.Vector512 => Apply512x4<TMode>(c, ref r0, ref r1, ref r2, ref r3, ref d, length)
                || Apply256x4<TMode>(c, ref r0, ref r1, ref r2, ref r3, ref d, length),
            GaloisKernel.Vector256 => Apply256x4<TMode>(c, ref r0, ref r1, ref r2, ref r3, ref d, length),
            _ => false,
        };

        if (!done)
        {
            Apply<TMode>(kernel, c[0], ref r0, ref d, length);
            Apply<Accumulate>(kernel, c[1], ref r1, ref d, length);
            Apply<Accumulate>(kernel, c[2], ref r2, ref d, length);
            Apply<Accumulate>(kernel, c[3], ref r3, ref d, length);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static bool Apply512x4<TMode>(ReadOnlySpan<byte> c, ref byte s0, ref byte s1, ref byte s2, ref byte s3, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        const int Width = 64;
        if (length < Width)
        {
            return false;
        }

        var (low0, high0) = Tables512(c[0]);
        var (low1, high1) = Tables512(c[1]);
        var (low2, high2) = Tables512(c[2]);
        var (low3, high3) = Tables512(c[3]);
        Vector512<byte> nibble = Vector512.Create((byte)0x0F);

        nuint end = (nuint)length;
        nuint i = 0;
        for (; i + Width <= end; i += Width)
        {
            Vector512<byte> p = Product512(low0, high0, nibble, Vector512.LoadUnsafe(ref s0, i))
                ^ Product512(low1, high1, nibble, Vector512.LoadUnsafe(ref s1, i))
                ^ Product512(low2, high2, nibble, Vector512.LoadUnsafe(ref s2, i))
                ^ Product512(low3, high3, nibble, Vector512.LoadUnsafe(ref s3, i));
            if (TMode.Accumulates)
            {
                p ^= Vector512.LoadUnsafe(ref destination, i);
            }

            p.StoreUnsafe(ref destination, i);
        }

        if (i < end)
        {
            nuint last = end - Width;
            Vector512<byte> keep = Vector512.LoadUnsafe(ref MemoryMarshal.GetArrayDataReference(TailMask), 64 - (i - last));
            Vector512<byte> p = Product512(low0, high0, nibble, Vector512.LoadUnsafe(ref s0, last))
                ^ Product512(low1, high1, nibble, Vector512.LoadUnsafe(ref s1, last))
                ^ Product512(low2, high2, nibble, Vector512.LoadUnsafe(ref s2, last))
                ^ Product512(low3, high3, nibble, Vector512.LoadUnsafe(ref s3, last));
            Vector512<byte> d = Vector512.LoadUnsafe(ref destination, last);
            (TMode.Accumulates ? d ^ (p & keep) : Vector512.ConditionalSelect(keep, p, d)).StoreUnsafe(ref destination, last);
        }

        return true;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static bool Apply256x4<TMode>(ReadOnlySpan<byte> c, ref byte s0, ref byte s1, ref byte s2, ref byte s3, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        const int Width = 32;
        if (length < Width)
        {
            return false;
        }

        var (low0, high0) = Tables256(c[0]);
        var (low1, high1) = Tables256(c[1]);
        var (low2, high2) = Tables256(c[2]);
        var (low3, high3) = Tables256(c[3]);
        Vector256<byte> nibble = Vector256.Create((byte)0x0F);

        nuint end = (nuint)length;
        nuint i = 0;
        for (; i + Width <= end; i += Width)
        {
            Vector256<byte> p = Product256(low0, high0, nibble, Vector256.LoadUnsafe(ref s0, i))
                ^ Product256(low1, high1, nibble, Vector256.LoadUnsafe(ref s1, i))
                ^ Product256(low2, high2, nibble, Vector256.LoadUnsafe(ref s2, i))
                ^ Product256(low3, high3, nibble, Vector256.LoadUnsafe(ref s3, i));
            if (TMode.Accumulates)
            {
                p ^= Vector256.LoadUnsafe(ref destination, i);
            }

            p.StoreUnsafe(ref destination, i);
        }

        if (i < end)
        {
            nuint last = end - Width;
            Vector256<byte> keep = Vector256.LoadUnsafe(ref MemoryMarshal.GetArrayDataReference(TailMask), 64 - (i - last));
            Vector256<byte> p = Product256(low0, high0, nibble, Vector256.LoadUnsafe(ref s0, last))
                ^ Product256(low1, high1, nibble, Vector256.LoadUnsafe(ref s1, last))
                ^ Product256(low2, high2, nibble, Vector256.LoadUnsafe(ref s2, last))
                ^ Product256(low3, high3, nibble, Vector256.LoadUnsafe(ref s3, last));
            Vector256<byte> d = Vector256.LoadUnsafe(ref destination, last);
            (TMode.Accumulates ? d ^ (p & keep) : Vector256.ConditionalSelect(keep, p, d)).StoreUnsafe(ref destination, last);
        }

        return true;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static (Vector512<byte> Low, Vector512<byte> High) Tables512(byte c)
    {
        var (low, high) = Tables256(c);
        return (Vector512.Create(low, low), Vector512.Create(high, high));
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static (Vector256<byte> Low, Vector256<byte> High) Tables256(byte c)
    {
        ref byte tables = ref MemoryMarshal.GetReference(GaloisField.NibbleTables(c));
        Vector128<byte> low = Vector128.LoadUnsafe(ref tables);
        Vector128<byte> high = Vector128.LoadUnsafe(ref tables, 16);
        return (Vector256.Create(low, low), Vector256.Create(high, high));
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static Vector512<byte> Product512(Vector512<byte> low, Vector512<byte> high, Vector512<byte> nibble, Vector512<byte> s) =>
        Avx512BW.Shuffle(low, s & nibble) ^ Avx512BW.Shuffle(high, Vector512.ShiftRightLogical(s.AsUInt16(), 4).AsByte() & nibble);

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static Vector256<byte> Product256(Vector256<byte> low, Vector256<byte> high, Vector256<byte> nibble, Vector256<byte> s) =>
        Avx2.Shuffle(low, s & nibble) ^ Avx2.Shuffle(high, Vector256.ShiftRightLogical(s.AsUInt16(), 4).AsByte() & nibble);

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static Vector128<byte> Product128(Vector128<byte> low, Vector128<byte> high, Vector128<byte> nibble, Vector128<byte> s)
    {
        Vector128<byte> lo = s & nibble;
        Vector128<byte> hi = Vector128.ShiftRightLogical(s.AsUInt16(), 4).AsByte() & nibble;
        if (Ssse3.IsSupported)
        {
            return Ssse3.Shuffle(low, lo) ^ Ssse3.Shuffle(high, hi);
        }

        if (AdvSimd.Arm64.IsSupported)
        {
            return AdvSimd.Arm64.VectorTableLookup(low, lo) ^ AdvSimd.Arm64.VectorTableLookup(high, hi);
        }

        throw new PlatformNotSupportedException();
    }

    private static void ApplyScalar<TMode>(byte c, ref byte source, ref byte destination, int length)
        where TMode : struct, IStoreMode
    {
        ref byte row = ref MemoryMarshal.GetReference(GaloisField.ProductRow(c));
        for (nint i = 0; i < length; i++)
        {
            byte p = Unsafe.Add(ref row, Unsafe.Add(ref source, i));
            Unsafe.Add(ref destination, i) = TMode.Accumulates ? (byte)(Unsafe.Add(ref destination, i) ^ p) : p;
        }
    }

    private static void Xor(GaloisKernel kernel, ref byte source, ref byte destination, int length)
    {
        nuint end = (nuint)length;
        nuint i = 0;
        if (kernel != GaloisKernel.Scalar && Vector256.IsHardwareAccelerated)
        {
            for (; i + 32 <= end; i += 32)
            {
                (Vector256.LoadUnsafe(ref destination, i) ^ Vector256.LoadUnsafe(ref source, i)).StoreUnsafe(ref destination, i);
            }
        }

        if (kernel != GaloisKernel.Scalar && Vector128.IsHardwareAccelerated)
        {
            for (; i + 16 <= end; i += 16)
            {
                (Vector128.LoadUnsafe(ref destination, i) ^ Vector128.LoadUnsafe(ref source, i)).StoreUnsafe(ref destination, i);
            }
        }

        for (; i + 8 <= end; i += 8)
        {
            ref byte d = ref Unsafe.Add(ref destination, i);
            Unsafe.WriteUnaligned(ref d, Unsafe.ReadUnaligned<ulong>(ref d) ^ Unsafe.ReadUnaligned<ulong>(ref Unsafe.Add(ref source, i)));
        }

        for (; i < end; i++)
        {
            Unsafe.Add(ref destination, i) ^= Unsafe.Add(ref source, i);
        }
    }

    private static byte[] CreateTailMask()
    {
        var mask = new byte[128];
        mask.AsSpan(64).Fill(0xFF);
        return mask;
    }

    /// <summary>Whether a kernel adds its product onto the destination or overwrites it; a type argument, so the JIT
    /// compiles each kernel once per mode with the test folded away.</summary>
    private interface IStoreMode
    {
        static abstract bool Accumulates { get; }
    }

    private struct Accumulate : IStoreMode
    {
        public static bool Accumulates => true;
    }

    private struct Overwrite : IStoreMode
    {
        public static bool Accumulates => false;
    }
}
