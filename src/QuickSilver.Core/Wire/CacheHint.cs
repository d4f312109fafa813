using System.Runtime.Intrinsics.X86;

namespace QuickSilver.Core.Wire;

/// <summary>
/// Asks the CPU to bring a buffer into its caches ahead of use (a prefetch instruction per cache line; it neither
/// blocks nor faults). For a buffer read later by a chain of dependent loads: a packet's records, each header giving
/// the next one's offset, cost one cache miss after another when the packet has gone cold. A member holding packets
/// behind a gap delivers them cold, milliseconds after they arrived: in the comparison runner at 1 % loss the record
/// walk took 14 times the CPU it took without loss (docs/qsm.md, "Delivering held packets"). A no-op where the
/// instruction set has no prefetch the runtime exposes.
/// </summary>
public static class CacheHint
{
    private const int LineBytes = 64;

    /// <summary>Prefetches every cache line of <paramref name="bytes"/>.</summary>
    public static unsafe void Prefetch(ReadOnlySpan<byte> bytes)
    {
        if (!Sse.IsSupported || bytes.IsEmpty)
        {
            return;
        }

        fixed (byte* start = bytes)
        {
            for (int offset = 0; offset < bytes.Length; offset += LineBytes)
            {
                Sse.Prefetch0(start + offset);
            }
        }
    }
}
