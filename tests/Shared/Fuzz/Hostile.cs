using System.Buffers.Binary;
using CsCheck;

namespace QuickSilver.Testing.Fuzz;

/// <summary>
/// Generators of structurally valid but hostile values, shared by every decoder's properties: numbers at and around the
/// limits a peer may claim (0, 1, 2^32, 2^62, 2^63, 2^64 − 1 …) mixed with ordinary small and uniform ones, and byte
/// mutations of valid encodings (truncation, random bytes after a valid prefix, a field overwritten with a hostile
/// number, a flipped byte, pure noise).
/// </summary>
internal static class Hostile
{
    /// <summary>u64 values a hostile peer would try: small, near the top, powers of two and their neighbours, uniform.</summary>
    public static readonly Gen<ulong> U64 = Gen.Frequency(
        (4, Gen.ULong[0, 20]),
        (3, Gen.ULong[0, 20].Select(d => ulong.MaxValue - d)),
        (3, Gen.Select(Gen.Int[1, 63], Gen.Int[-2, 2], (bit, d) => unchecked((1UL << bit) + (ulong)(long)d))),
        (3, Gen.ULong));

    public static readonly Gen<uint> U32 = Gen.Frequency(
        (4, Gen.UInt[0, 20]),
        (3, Gen.UInt[0, 20].Select(d => uint.MaxValue - d)),
        (2, Gen.Select(Gen.Int[1, 31], Gen.Int[-2, 2], (bit, d) => unchecked((uint)((1L << bit) + d)))),
        (3, Gen.UInt));

    public static readonly Gen<ushort> U16 = Gen.Frequency(
        (4, Gen.UShort[0, 20]),
        (3, Gen.UShort[0, 20].Select(d => (ushort)(ushort.MaxValue - d))),
        (3, Gen.UShort));

    /// <summary>Doubles a rate or a loss field could carry, the non-finite and negative ones included.</summary>
    public static readonly Gen<double> Double = Gen.OneOf(
        Gen.Const(double.NaN), Gen.Const(double.PositiveInfinity), Gen.Const(double.NegativeInfinity), Gen.Const(-0.0),
        Gen.Const(double.MaxValue), Gen.Const(double.Epsilon), Gen.Const(-1.0), Gen.Const(0.0), Gen.Const(1.0), Gen.Const(1.0000001),
        Gen.Double[0, 1], Gen.Double[0, 1e9], Gen.Double);

    /// <summary>A count at or around <paramref name="limit"/> (and sometimes far beyond it).</summary>
    public static Gen<int> CountAround(int limit) => Gen.Frequency(
        (4, Gen.Int[0, Math.Max(0, limit)]),
        (3, Gen.Int[-1, 1].Select(d => Math.Max(0, limit + d))),
        (1, Gen.Int[0, ushort.MaxValue]));

    public static readonly Gen<byte[]> Noise = Gen.Byte.Array[0, 300];

    /// <summary>How <see cref="Mutate"/> changed a valid encoding.</summary>
    public enum Mutation
    {
        None,
        Truncate,
        AppendNoise,
        OverwriteU16,
        OverwriteU32,
        OverwriteU64,
        FlipByte,
        NoiseAfterPrefix,
        PureNoise,
    }

    /// <summary>Valid encodings, half of them mutated; the mutation tells a property whether the value must round-trip.</summary>
    public static Gen<(byte[] Bytes, Mutation How)> Mutate(Gen<byte[]> valid, int keepPrefix = 0) =>
        Gen.Select(valid, Gen.Int[0, 16], Gen.Int[0, int.MaxValue], U64, Noise, (bytes, kind, position, number, noise) =>
        {
            var how = kind <= 7 ? Mutation.None : (Mutation)(kind - 7);
            return (Apply(bytes, how, position, number, noise, keepPrefix), how);
        });

    private static byte[] Apply(byte[] bytes, Mutation how, int position, ulong number, byte[] noise, int keepPrefix)
    {
        int length = bytes.Length;
        int at(int width) => length <= width ? 0 : keepPrefix + (position % Math.Max(1, length - width - keepPrefix + 1));
        switch (how)
        {
            case Mutation.Truncate:
                return bytes.AsSpan(0, length == 0 ? 0 : position % length).ToArray();
            case Mutation.AppendNoise:
                return noise.Length == 0 ? [.. bytes, (byte)number] : [.. bytes, .. noise];
            case Mutation.OverwriteU16 when length >= 2:
                var copy16 = (byte[])bytes.Clone();
                BinaryPrimitives.WriteUInt16LittleEndian(copy16.AsSpan(Math.Min(at(2), length - 2)), (ushort)number);
                return copy16;
            case Mutation.OverwriteU32 when length >= 4:
                var copy32 = (byte[])bytes.Clone();
                BinaryPrimitives.WriteUInt32LittleEndian(copy32.AsSpan(Math.Min(at(4), length - 4)), (uint)number);
                return copy32;
            case Mutation.OverwriteU64 when length >= 8:
                var copy64 = (byte[])bytes.Clone();
                BinaryPrimitives.WriteUInt64LittleEndian(copy64.AsSpan(Math.Min(at(8), length - 8)), number);
                return copy64;
            case Mutation.FlipByte when length >= 1:
                var flipped = (byte[])bytes.Clone();
                flipped[position % length] ^= (byte)(1 << (int)(number % 8));
                return flipped;
            case Mutation.NoiseAfterPrefix:
                int keep = Math.Min(length, Math.Max(keepPrefix, position % (length + 1)));
                return [.. bytes.AsSpan(0, keep), .. noise];
            case Mutation.PureNoise:
                return noise;
            default:
                return bytes;
        }
    }
}
