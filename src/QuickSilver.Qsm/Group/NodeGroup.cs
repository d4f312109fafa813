using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Membership;

namespace QuickSilver.Qsm.Group;

/// <summary>What the group layer tells the application-facing group object (core thread).</summary>
internal interface IGroupOwner
{
    void OnViewInstalled(GroupView view);

    /// <summary>Delivers one message (the payload is valid only during the call). False when the owner is now at its
    /// bound (its reader is behind): the group layer then refuses packets that carry this group's records until the
    /// owner calls <see cref="GroupLayer.ResumeDelivery"/> (through a downcall, never from inside this call), which it
    /// must do once it has room again.</summary>
    bool Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload);

    /// <summary>One published message left for the regions (a publish-buffer slot frees).</summary>
    void OnSent();

    /// <summary>The group was left; <paramref name="discarded"/> published messages were never sent.</summary>
    void OnLeft(int discarded);
}

/// <summary>A group's state on the core thread: what waits to be sent, its pull feed, and per-sender delivery progress.</summary>
internal sealed class NodeGroup(string name, IGroupOwner owner)
{
    private readonly Dictionary<uint, ulong> _lastDelivered = new();
    private bool _nextFromPending;

    public string Name { get; } = name;
    public IGroupOwner Owner { get; } = owner;
    public GroupView? View { get; set; }
    public ulong NextSequence { get; set; }
    public Queue<byte[]> Pending { get; } = new();

    /// <summary>The owner is full: packets carrying this group's records wait until it resumes delivery.</summary>
    public bool DeliveryPaused { get; set; }

    /// <summary>The application's pull feed (the fast path), if registered.</summary>
    public IFeed<ReadOnlyMemory<byte>>? Feed { get; set; }

    /// <summary>False after the feed said "nothing now", until it is signalled.</summary>
    public bool FeedActive { get; set; }

    /// <summary>The message taken for sending but not yet sent (its regions had no room).</summary>
    public ReadOnlyMemory<byte>? Next { get; private set; }

    /// <summary>Takes the next message to send: published ones first, then the feed's. Oversized feed items are
    /// dropped and counted (the feed runs on the core thread, where there is no caller to throw to).</summary>
    public bool TryTakeNext(int maxBytes, DropCounters drops)
    {
        if (Pending.TryDequeue(out var published))
        {
            Next = published;
            _nextFromPending = true;
            return true;
        }

        while (Feed is { } feed && FeedActive)
        {
            if (!feed.TryPull(out var item))
            {
                FeedActive = false;
                return false;
            }

            if (item.Length > maxBytes)
            {
                drops.Increment(DropReason.Oversized);
                continue;
            }

            Next = item;
            _nextFromPending = false;
            return true;
        }

        return false;
    }

    public void MarkSent()
    {
        if (_nextFromPending)
        {
            Owner.OnSent();
        }

        Next = null;
    }

    public int DiscardPending()
    {
        int discarded = Pending.Count + (Next is not null && _nextFromPending ? 1 : 0);
        Pending.Clear();
        Next = null;
        return discarded;
    }

    /// <summary>Records delivery of <paramref name="sequence"/> from <paramref name="sender"/>. With
    /// <paramref name="fifo"/>, false for a duplicate or an older message (per-sender FIFO: a message never overtakes one
    /// already delivered). Without it the region layer's exactly-once delivery of packets is relied on and every
    /// message passes.</summary>
    public bool Advance(uint sender, ulong sequence, bool fifo)
    {
        if (_lastDelivered.TryGetValue(sender, out var last) && sequence <= last)
        {
            return !fifo;
        }

        _lastDelivered[sender] = sequence;
        return true;
    }
}
