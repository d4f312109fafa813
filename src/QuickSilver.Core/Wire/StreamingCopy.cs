using System.Runtime.Intrinsics.X86;

namespace QuickSilver.Core.Wire;

/// <summary>
/// Copies a buffer with non-temporal stores: the destination's cache lines are written straight to memory, neither read
/// first nor left in the caches. For a copy kept for later and not read soon, into a buffer that has gone cold: a region
/// member keeps each received packet for repairs until the region has it, a few megabytes cycled through at a
/// gigabyte a second, so an ordinary copy first read every destination line from memory and then pushed the packets
/// being delivered out of the caches. The caller reads what it needs from the source, which the copy leaves where it
/// was. Small copies, and machines without AVX, copy as usual.
/// </summary>
public static class StreamingCopy
{
    /// <summary>Below this many bytes an ordinary copy: the alignment and the fence cost more than they save.</summary>
    public const int MinimumBytes = 4096;

    /// <summary>Copies <paramref name="source"/> to the start of <paramref name="destination"/>, which must be at least as
    /// long.</summary>
    public static unsafe void Copy(ReadOnlySpan<byte> source, Span<byte> destination)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(destination.Length, source.Length, nameof(destination));
        if (source.Length < MinimumBytes || !Avx.IsSupported)
        {
            source.CopyTo(destination);
            return;
        }

        fixed (byte* from = source)
        fixed (byte* to = destination)
        {
            // An ordinary copy up to the first 32-byte boundary of the destination (the aligned stores need it).
            int head = (int)((32 - ((nuint)to & 31)) & 31);
            source[..head].CopyTo(destination);
            int length = source.Length;
            int i = head;
            for (; i + 128 <= length; i += 128)
            {
                var a = Avx.LoadVector256(from + i);
                var b = Avx.LoadVector256(from + i + 32);
                var c = Avx.LoadVector256(from + i + 64);
                var d = Avx.LoadVector256(from + i + 96);
                Avx.StoreAlignedNonTemporal(to + i, a);
                Avx.StoreAlignedNonTemporal(to + i + 32, b);
                Avx.StoreAlignedNonTemporal(to + i + 64, c);
                Avx.StoreAlignedNonTemporal(to + i + 96, d);
            }

            source[i..].CopyTo(destination[i..]);
            Sse.StoreFence(); // the streaming stores are weakly ordered: complete them before anything later is stored
        }
    }
}
