using System.Numerics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace QuickSilver.Core.Downcalls;

/// <summary>
/// A bounded, lock-free multi-producer single-consumer queue built on compare-and-swap, with no allocation after
/// construction. Producers on any thread call <see cref="TryEnqueue"/>; one consumer (the core thread) calls
/// <see cref="TryDequeue"/>. Each producer's items come out in the order it put them in.
/// </summary>
/// <remarks>
/// <para>
/// An array ring in the style of Dmitry Vyukov's bounded queue: every slot carries a sequence number that says whose
/// turn it is. A slot at ring position <c>p</c> is free for the producer that claims position <c>p</c> when its
/// sequence equals <c>p</c>, and holds that producer's item when its sequence equals <c>p + 1</c>; the consumer then
/// sets it to <c>p + capacity</c>, freeing it for the next lap. Producers claim positions with one CAS on the shared
/// tail; the single consumer needs no atomic read-modify-write at all.
/// </para>
/// <para>
/// A producer that is pre-empted between claiming a position and publishing its item holds up the consumer at that
/// position: <see cref="TryDequeue"/> reports empty until it publishes, even if later positions are already filled.
/// That is what keeps per-producer FIFO order and the consumer wait-free.
/// </para>
/// </remarks>
internal sealed class BoundedMpscQueue<T>
{
    /// <summary>The largest capacity accepted (2^30 slots).</summary>
    public const int MaxCapacity = 1 << 30;

    private readonly Slot[] _slots;
    private readonly long _mask;
    private QueuePositions _positions;

    /// <param name="capacity">Maximum number of queued items; rounded up to a power of two (at least 2).</param>
    public BoundedMpscQueue(int capacity)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(capacity, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(capacity, MaxCapacity);

        // With one slot, "filled at position p" (p + 1) and "free for position p + 1" (p + capacity) coincide.
        int size = (int)BitOperations.RoundUpToPowerOf2((uint)Math.Max(capacity, 2));
        _slots = new Slot[size];
        for (int i = 0; i < size; i++)
        {
            _slots[i].Sequence = i;
        }

        _mask = size - 1;
    }

    public int Capacity => _slots.Length;

    /// <summary>Approximate number of queued items (exact when no producer is mid-enqueue).</summary>
    public int Count
    {
        get
        {
            long head = Volatile.Read(ref _positions.Head);
            long tail = Volatile.Read(ref _positions.Tail);
            long count = tail - head;
            return count <= 0 ? 0 : (int)Math.Min(count, _slots.Length);
        }
    }

    /// <summary>Adds an item. Returns false when the queue is full. Safe from any thread.</summary>
    public bool TryEnqueue(T item)
    {
        var slots = _slots;
        long position = Volatile.Read(ref _positions.Tail);
        while (true)
        {
            ref Slot slot = ref slots[position & _mask];
            long sequence = Volatile.Read(ref slot.Sequence);
            long lag = sequence - position;
            if (lag == 0)
            {
                long observed = Interlocked.CompareExchange(ref _positions.Tail, position + 1, position);
                if (observed == position)
                {
                    slot.Item = item;
                    Volatile.Write(ref slot.Sequence, position + 1);
                    return true;
                }

                position = observed;
            }
            else if (lag < 0)
            {
                // The slot still holds the item from the previous lap: the ring is full.
                return false;
            }
            else
            {
                // Another producer claimed this position; catch up with the tail.
                position = Volatile.Read(ref _positions.Tail);
            }
        }
    }

    /// <summary>Removes the oldest item. Single consumer only.</summary>
    public bool TryDequeue(out T item)
    {
        long position = _positions.Head;
        ref Slot slot = ref _slots[position & _mask];
        if (Volatile.Read(ref slot.Sequence) != position + 1)
        {
            item = default!;
            return false;
        }

        item = slot.Item;
        if (RuntimeHelpers.IsReferenceOrContainsReferences<T>())
        {
            slot.Item = default!;
        }

        Volatile.Write(ref slot.Sequence, position + _slots.Length);
        Volatile.Write(ref _positions.Head, position + 1);
        return true;
    }

    private struct Slot
    {
        public long Sequence;
        public T Item;
    }
}

/// <summary>
/// The tail (shared by producers) and head (the consumer's) of a <see cref="BoundedMpscQueue{T}"/>, each on its own pair
/// of cache lines and away from the queue's other fields, so producers and the consumer do not false-share.
/// Not nested in the generic queue because generic types cannot have explicit layout.
/// </summary>
[StructLayout(LayoutKind.Explicit, Size = 3 * CacheLinePair)]
internal struct QueuePositions
{
    // Two cache lines, so adjacent-line prefetching does not couple the fields either.
    private const int CacheLinePair = 128;

    [FieldOffset(CacheLinePair)]
    public long Tail;

    [FieldOffset(2 * CacheLinePair)]
    public long Head;
}
