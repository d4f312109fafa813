using QuickSilver.Core.Downcalls;

namespace QuickSilver.Core.Feeds;

/// <summary>
/// The push wrapper of QSM §2.5 over the pull model: application threads <see cref="TrySend"/> or
/// <see cref="SendAsync"/> items into a bounded buffer, and the layer below pulls them on the core thread through
/// <see cref="TryPull"/> when it can send. When the buffer is full the sender gets back-pressure: TrySend returns
/// false, SendAsync waits for space.
/// </summary>
/// <remarks>
/// <para>
/// Wiring: register the feed with the layer's <see cref="FeedSet{TFeed}"/> (of <c>IFeed&lt;T&gt;</c>) and hand the
/// returned channel to <see cref="Attach"/>, both on the core thread. The owner of the feed set must call
/// <see cref="FeedSet{TFeed}.Deactivate"/> as soon as <see cref="TryPull"/> returns false, before it runs further
/// downcalls; the feed then re-activates itself through a downcall when a sender adds an item.
/// </para>
/// <para>
/// Idle/wake protocol (no lost wake-up, one downcall per idle period): when the core finds the buffer empty it sets
/// the idle flag with a full fence and looks again. A sender publishes its item, issues a full fence and reads the
/// flag; if it is set, the sender that wins the exchange back to "busy" posts one downcall that signals the channel.
/// One of the two always sees the other's write, so an item can never sit in an idle feed. A sender on the core
/// thread signals the channel directly; a sender elsewhere whose post is refused (downcall queue full) spins until
/// it is accepted, since the wake-up must not be lost.
/// </para>
/// <para>
/// Steady state allocates nothing: the downcall delegate is cached and its state is the feed itself. SendAsync
/// allocates only when it has to wait, and its continuation runs on the thread pool, never inline on the core thread.
/// </para>
/// </remarks>
public sealed class BufferedFeed<T> : IFeed<T>
{
    private const int Busy = 0;
    private const int Idle = 1;

    private static readonly Action<object?> SignalDowncall = static state => ((BufferedFeed<T>)state!).OnSignalDowncall();

    private readonly BoundedMpscQueue<T> _queue;
    private readonly ICoreDispatcher _dispatcher;

    private int _idle = Busy;
    private volatile bool _completed;

    // Completed (and replaced) whenever the core frees space while a sender waits. Created by waiting senders.
    private TaskCompletionSource? _spaceFreed;

    // Core thread only.
    private IFeedChannel? _channel;
    private bool _signalBeforeAttach;

    /// <param name="capacity">Buffer size in items; rounded up to a power of two (see <see cref="BoundedMpscQueue{T}"/>).</param>
    /// <param name="dispatcher">The core the feed is pulled by; used to signal the channel from sender threads.</param>
    public BufferedFeed(int capacity, ICoreDispatcher dispatcher)
    {
        ArgumentNullException.ThrowIfNull(dispatcher);
        _queue = new BoundedMpscQueue<T>(capacity);
        _dispatcher = dispatcher;
    }

    /// <summary>Buffer size in items.</summary>
    public int Capacity => _queue.Capacity;

    /// <summary>Approximate number of buffered items.</summary>
    public int Count => _queue.Count;

    /// <summary>True once <see cref="Complete"/> has been called. Sends that start after Complete returns throw; a send
    /// that races with Complete may still be accepted, and then signals the channel like any other send.</summary>
    public bool IsCompleted => _completed;

    /// <summary>Connects the feed to the channel its feed set returned. Once, on the core thread.</summary>
    public void Attach(IFeedChannel channel)
    {
        ArgumentNullException.ThrowIfNull(channel);
        if (_channel is not null)
        {
            throw new InvalidOperationException("BufferedFeed.Attach was already called; a feed serves one channel.");
        }

        _channel = channel;
        if (_signalBeforeAttach)
        {
            _signalBeforeAttach = false;
            channel.Signal();
        }
    }

    /// <summary>Adds <paramref name="item"/> if there is room. Returns false when the buffer is full. Any thread.</summary>
    /// <exception cref="InvalidOperationException">After <see cref="Complete"/>.</exception>
    public bool TrySend(T item)
    {
        ThrowIfCompleted();
        if (!_queue.TryEnqueue(item))
        {
            return false;
        }

        WakeIfIdle();
        return true;
    }

    /// <summary>Adds <paramref name="item"/>, waiting for room when the buffer is full. Completes when the item is queued.
    /// Any thread; allocates only when it has to wait. Never block the core thread on the result: the core is what
    /// frees the space.</summary>
    /// <exception cref="InvalidOperationException">After <see cref="Complete"/>, including while waiting.</exception>
    public ValueTask SendAsync(T item, CancellationToken cancellationToken = default)
    {
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled(cancellationToken);
        }

        return TrySend(item) ? default : SendSlowAsync(item, cancellationToken);
    }

    /// <summary>No more sends: later <see cref="TrySend"/>/<see cref="SendAsync"/> calls throw, and waiting senders fail.
    /// Items already buffered stay pullable. Any thread; idempotent.</summary>
    public void Complete()
    {
        if (_completed)
        {
            return;
        }

        _completed = true;
        Interlocked.MemoryBarrier();
        ReleaseSpaceWaiters();

        // Wake the core so the owner pulls, finds the end and can observe IsCompleted.
        WakeIfIdle();
    }

    /// <summary>Takes the next buffered item. Core thread only. False means empty: the caller deactivates the channel.</summary>
    public bool TryPull(out T item)
    {
        if (_queue.TryDequeue(out item))
        {
            OnSpaceFreed();
            return true;
        }

        // Go idle, then look again: a sender that published before seeing the flag is caught here.
        Interlocked.Exchange(ref _idle, Idle);
        if (_queue.TryDequeue(out item))
        {
            // Busy again. If a sender already flipped the flag, its signal downcall will find the channel active: harmless.
            Interlocked.CompareExchange(ref _idle, Busy, Idle);
            OnSpaceFreed();
            return true;
        }

        // The Interlocked above was a full fence, so a waiter registered before the last dequeue is visible here.
        if (Volatile.Read(ref _spaceFreed) is not null)
        {
            ReleaseSpaceWaiters();
        }

        return false;
    }

    private async ValueTask SendSlowAsync(T item, CancellationToken cancellationToken)
    {
        while (true)
        {
            var waiter = Volatile.Read(ref _spaceFreed);
            if (waiter is null)
            {
                var created = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
                waiter = Interlocked.CompareExchange(ref _spaceFreed, created, null) ?? created;
            }

            // The waiter is published (the CAS, or the CAS of whoever created it, was a full fence): if the core freed
            // space before seeing it, this retry sees the space; if after, it completes the waiter.
            if (TrySend(item))
            {
                return;
            }

            await waiter.Task.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
    }

    private void OnSpaceFreed()
    {
        // Full fence between the slot release in TryDequeue and the read of the waiter (pairs with the waiter's CAS).
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _spaceFreed) is not null)
        {
            ReleaseSpaceWaiters();
        }
    }

    private void ReleaseSpaceWaiters()
        => Interlocked.Exchange(ref _spaceFreed, null)?.TrySetResult();

    private void WakeIfIdle()
    {
        // Full fence between publishing the item and reading the flag (pairs with the core's exchange in TryPull).
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _idle) == Busy || Interlocked.Exchange(ref _idle, Busy) == Busy)
        {
            return;
        }

        // This sender ended the idle period: it owes the core exactly one signal.
        if (_dispatcher.IsCoreThread)
        {
            OnSignalDowncall();
            return;
        }

        if (_dispatcher.TryPost(SignalDowncall, this))
        {
            return;
        }

        var spin = default(SpinWait);
        do
        {
            spin.SpinOnce();
        }
        while (!_dispatcher.TryPost(SignalDowncall, this));
    }

    private void OnSignalDowncall()
    {
        if (_channel is { } channel)
        {
            channel.Signal();
        }
        else
        {
            _signalBeforeAttach = true;
        }
    }

    private void ThrowIfCompleted()
    {
        if (_completed)
        {
            throw new InvalidOperationException("BufferedFeed.Complete was called; no more items can be sent to this feed.");
        }
    }
}
