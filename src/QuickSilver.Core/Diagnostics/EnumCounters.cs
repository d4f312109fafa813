using System.Runtime.CompilerServices;

namespace QuickSilver.Core.Diagnostics;

/// <summary>
/// Counts by reason, one slot per value of an int-based enum. Incremented on the owning (core) thread, readable from any
/// thread (metrics, Describe, tests). The base of <see cref="DropCounters"/> and of the datagram security counters.
/// </summary>
public class EnumCounters<TReason>
    where TReason : struct, Enum
{
    private static readonly int Size = Enum.GetValues<TReason>().Max(Index) + 1;
    private readonly long[] _counts = new long[Size];

    public void Increment(TReason reason) => Interlocked.Increment(ref _counts[Index(reason)]);

    public long this[TReason reason] => Volatile.Read(ref _counts[Index(reason)]);

    /// <summary>Every count, all reasons.</summary>
    public long Total
    {
        get
        {
            long sum = 0;
            for (int i = 0; i < _counts.Length; i++)
            {
                sum += Volatile.Read(ref _counts[i]);
            }

            return sum;
        }
    }

    private static int Index(TReason reason) => Unsafe.BitCast<TReason, int>(reason);
}
