namespace QuickSilver.Core.Feeds;

/// <summary>
/// The set of feeds registered with one layer, with the subset that is active (has signalled that it may have data).
/// The layer walks the active feeds round robin with <see cref="TryNext"/>, pulls from the one it gets, and calls
/// <see cref="Deactivate"/> when that feed had nothing. Active feeds form an intrusive circular list: a feed that
/// becomes active joins just behind the cursor (served last in the current round), and one that leaves does not
/// disturb the others' order, so service is strictly round robin. Core thread only; no allocation after registration.
/// </summary>
internal sealed class FeedSet<TFeed> where TFeed : class
{
    private Entry? _cursor;
    private int _activeCount;
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
        var entry = _cursor;
        if (entry is null)
        {
            channel = null!;
            feed = null!;
            return false;
        }

        _cursor = entry.Next;
        channel = entry;
        feed = entry.Feed;
        return true;
    }

    /// <summary>Removes the feed behind <paramref name="channel"/> from the active set (it said "nothing now").</summary>
    public void Deactivate(IFeedChannel channel)
    {
        if (channel is Entry entry && entry.Owner == this && entry.IsActive)
        {
            Unlink(entry);
        }
    }

    private void Activate(Entry entry)
    {
        if (entry.IsActive || entry.Disposed)
        {
            return;
        }

        if (_cursor is null)
        {
            entry.Next = entry;
            entry.Prev = entry;
            _cursor = entry;
        }
        else
        {
            // Just behind the cursor: every feed already waiting in this round goes first.
            var last = _cursor.Prev!;
            last.Next = entry;
            entry.Prev = last;
            entry.Next = _cursor;
            _cursor.Prev = entry;
        }

        _activeCount++;
        if (_activeCount == 1)
        {
            BecameActive?.Invoke();
        }
    }

    private void Unlink(Entry entry)
    {
        if (entry.Next == entry)
        {
            _cursor = null;
        }
        else
        {
            entry.Prev!.Next = entry.Next;
            entry.Next!.Prev = entry.Prev;
            if (_cursor == entry)
            {
                _cursor = entry.Next;
            }
        }

        entry.Next = null;
        entry.Prev = null;
        _activeCount--;
    }

    private sealed class Entry(FeedSet<TFeed> owner, TFeed feed) : IFeedChannel
    {
        public FeedSet<TFeed> Owner { get; } = owner;
        public TFeed Feed { get; } = feed;
        public Entry? Next;
        public Entry? Prev;
        public bool Disposed;

        public bool IsActive => Next is not null;

        public void Signal() => Owner.Activate(this);

        public void Dispose()
        {
            if (Disposed)
            {
                return;
            }

            Disposed = true;
            if (IsActive)
            {
                Owner.Unlink(this);
            }

            Owner._registered--;
        }
    }
}
