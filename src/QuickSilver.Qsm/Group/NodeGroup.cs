using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Membership;

namespace QuickSilver.Qsm.Group;

/// <summary>What the group layer tells the application-facing group object (core thread).</summary>
internal interface IGroupOwner
{
    void OnViewInstalled(GroupView view);

    void Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload);

    /// <summary>One published message left for the regions (a publish-buffer slot frees).</summary>
    void OnSent();

    /// <summary>The group was left; <paramref name="discarded"/> published messages were never sent.</summary>
    void OnLeft(int discarded);
}

/// <summary>A group's state on the core thread: what waits to be sent (published messages, the pull feed, the outbox of
/// numbered messages not yet written by every region), and per-sender delivery progress.</summary>
internal sealed class NodeGroup
{
    /// <summary>How many numbered messages a group holds for regions that have not written them yet.</summary>
    public const int OutboxCapacity = 4096;

    private readonly Dictionary<uint, ulong> _lastDelivered = new();

    public NodeGroup(string name, IGroupOwner owner)
    {
        Name = name;
        Owner = owner;
        Outbox = new GroupOutbox(OutboxCapacity) { Released = published => { if (published) { owner.OnSent(); } } };
    }

    public string Name { get; }
    public IGroupOwner Owner { get; }
    public GroupView? View { get; set; }
    public ulong NextSequence { get; set; }
    public Queue<byte[]> Pending { get; } = new();
    public GroupOutbox Outbox { get; }

    /// <summary>The application's pull feed (the fast path), if registered.</summary>
    public IFeed<ReadOnlyMemory<byte>>? Feed { get; set; }

    /// <summary>False after the feed said "nothing now", until it is signalled.</summary>
    public bool FeedActive { get; set; }

    /// <summary>Takes the next message from the application into the outbox and numbers it: published ones first, then
    /// the feed's. False when there is none, or the outbox is full. Oversized feed items are dropped and counted (the
    /// feed runs on the core thread, where there is no caller to throw to).</summary>
    public bool TryTakeNext(int maxBytes, DropCounters drops)
    {
        if (Outbox.IsFull)
        {
            return false;
        }

        if (Pending.TryDequeue(out var published))
        {
            Outbox.Add(published, ++NextSequence, published: true);
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

            Outbox.Add(item, ++NextSequence, published: false);
            return true;
        }

        return false;
    }

    /// <summary>Drops what was published and not fully sent (the group was left); returns how many.</summary>
    public int DiscardPending()
    {
        int discarded = Pending.Count + Outbox.Clear();
        Pending.Clear();
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
