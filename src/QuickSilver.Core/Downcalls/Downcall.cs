namespace QuickSilver.Core.Downcalls;

/// <summary>A request carried from an application thread into the core: a cached delegate and its argument.</summary>
internal readonly record struct Downcall(Action<object?> Action, object? State)
{
    public void Invoke() => Action(State);
}

/// <summary>
/// How code outside the core thread reaches it. The real core implements it with a <see cref="BoundedMpscQueue{T}"/>
/// plus a wake-up; a simulated node runs posted work at the current virtual instant.
/// </summary>
public interface ICoreDispatcher
{
    /// <summary>True when called on the core thread that owns the protocol state.</summary>
    bool IsCoreThread { get; }

    /// <summary>Queues <paramref name="action"/> to run on the core thread and wakes the core. Returns false when the
    /// downcall queue is full (the caller decides whether to retry, wait or fail).</summary>
    bool TryPost(Action<object?> action, object? state);
}
