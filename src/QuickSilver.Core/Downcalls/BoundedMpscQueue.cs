namespace QuickSilver.Core.Downcalls;

/// <summary>
/// A bounded, lock-free multi-producer single-consumer queue built on compare-and-swap, with no allocation after
/// construction. Producers on any thread call <see cref="TryEnqueue"/>; one consumer (the core thread) calls
/// <see cref="TryDequeue"/>. Each producer's items come out in the order it put them in.
/// </summary>
public sealed class BoundedMpscQueue<T>
{
    /// <param name="capacity">Maximum number of queued items; rounded up to a power of two.</param>
    public BoundedMpscQueue(int capacity) => throw new NotImplementedException();

    public int Capacity => throw new NotImplementedException();

    /// <summary>Approximate number of queued items (exact when no producer is mid-enqueue).</summary>
    public int Count => throw new NotImplementedException();

    /// <summary>Adds an item. Returns false when the queue is full. Safe from any thread.</summary>
    public bool TryEnqueue(T item) => throw new NotImplementedException();

    /// <summary>Removes the oldest item. Single consumer only.</summary>
    public bool TryDequeue(out T item) => throw new NotImplementedException();
}
