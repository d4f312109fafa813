namespace QuickSilver.Core.Feeds;

/// <summary>
/// The set of feeds registered with one layer, with the subset that is active (has signalled that it may have data).
/// The layer walks the active feeds round robin with <see cref="TryNext"/>, pulls from the one it gets, and calls
/// <see cref="Deactivate"/> when that feed had nothing. Core thread only; no allocation after registration.
/// </summary>
public sealed class FeedSet<TFeed> where TFeed : class
{
    private Entry[] _active = new Entry[4];
    private int _activeCount;
    private int _cursor;
    private int _registered;

    /// <summary>Raised (on the core thread) when the set goes from no active feed to one, so the owner can schedule a send.</summary>
    public event Action? BecameActive;

    public int RegisteredCount => _registered;

    public int ActiveCount => _activeCount;

    /// <summary>Registers <paramref name="feed"/>, active from the start.</summary>
    public IFeedChannel Register(TFeed feed)
    {
        ArgumentNullException.ThrowIfNull(feed);
        var entry = new Entry(this, feed);
        _registered++;
        Activate(entry);
        return entry;
    }

    /// <summary>Returns the next active feed in round-robin order, or false when none is active.</summary>
    public bool TryNext(out IFeedChannel channel, out TFeed feed)
    {
        if (_activeCount == 0)
        {
            channel = null!;
            feed = null!;
            return false;
        }

        if (_cursor >= _activeCount)
        {
            _cursor = 0;
        }

        var entry = _active[_cursor++];
        channel = entry;
        feed = entry.Feed;
        return true;
    }

    /// <summary>Removes the feed behind <paramref name="channel"/> from the active set (it said "nothing now").</summary>
    public void Deactivate(IFeedChannel channel)
    {
        if (channel is Entry entry && entry.Owner == this && entry.ActiveIndex >= 0)
        {
            RemoveActive(entry);
        }
    }

    private void Activate(Entry entry)
    {
        if (entry.ActiveIndex >= 0 || entry.Disposed)
        {
            return;
        }

        if (_activeCount == _active.Length)
        {
            Array.Resize(ref _active, _active.Length * 2);
        }

        entry.ActiveIndex = _activeCount;
        _active[_activeCount++] = entry;
        if (_activeCount == 1)
        {
            BecameActive?.Invoke();
        }
    }

    private void RemoveActive(Entry entry)
    {
        int index = entry.ActiveIndex;
        int last = _activeCount - 1;
        if (index != last)
        {
            var moved = _active[last];
            _active[index] = moved;
            moved.ActiveIndex = index;
        }

        _active[last] = null!;
        _activeCount = last;
        entry.ActiveIndex = -1;

        // Keep the round-robin cursor on the entry that slid into the freed slot.
        if (_cursor > index)
        {
            _cursor--;
        }
    }

    private sealed class Entry(FeedSet<TFeed> owner, TFeed feed) : IFeedChannel
    {
        public FeedSet<TFeed> Owner { get; } = owner;
        public TFeed Feed { get; } = feed;
        public int ActiveIndex = -1;
        public bool Disposed;

        public bool IsActive => ActiveIndex >= 0;

        public void Signal() => Owner.Activate(this);

        public void Dispose()
        {
            if (Disposed)
            {
                return;
            }

            Disposed = true;
            if (ActiveIndex >= 0)
            {
                Owner.RemoveActive(this);
            }

            Owner._registered--;
        }
    }
}
