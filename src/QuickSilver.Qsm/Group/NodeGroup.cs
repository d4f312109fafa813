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

    /// <summary>Takes the next message the application published (from its thread, through the owner's queue), or false.</summary>
    bool TryTakePublished(out ReadOnlyMemory<byte> message);

    /// <summary>A published message has been written into a packet by every region of its view: its publish-buffer slot
    /// frees and its buffer may be reused.</summary>
    void OnSent(ReadOnlyMemory<byte> message);

    /// <summary>The group was left; <paramref name="discarded"/> published messages were never sent.</summary>
    void OnLeft(int discarded);

    /// <summary>The GMS refused this node's join (one of its limits): the node is not in the group, as after a leave;
    /// <paramref name="discarded"/> published messages were never sent.</summary>
    void OnJoinRefused(Membership.Service.GmsRefusedException refusal, int discarded) => OnLeft(discarded);

    /// <summary>A message this node will never deliver: its sender told the node to skip ahead because it held the
    /// sender back too long (<see cref="Region.SlowReceiverPolicy.SkipAhead"/>). Called in the order delivery would have
    /// been, on the core thread.</summary>
    void OnSkipped(uint sender, ulong sequence)
    {
    }
}

/// <summary>A group's state on the core thread: what waits to be sent (published messages, the pull feed, the outbox of
/// numbered messages not yet written by every region), and per-sender delivery progress.</summary>
internal sealed class NodeGroup
{
    /// <summary>How many numbered messages a group holds for regions that have not written them yet.</summary>
    public const int OutboxCapacity = 4096;

    private readonly Dictionary<uint, ulong> _lastDelivered = new();

    // The last sender Advance saw and its last delivered sequence, ahead of _lastDelivered (written back when another
    // sender comes): a packet's records, and most groups' streams, come from one sender, so delivery reads a field of
    // this object rather than a dictionary's arrays, which a node in 1,024 groups finds cold at every packet.
    private uint _recentSender;
    private ulong _recentSequence;
    private bool _hasRecent;
    private bool _recentKnown;

    /// <summary>Times a region asked for the next message while the outbox was at <see cref="OutboxCapacity"/> (the
    /// fastest region waits for the slowest: back-pressure to the publisher or feed). Core thread writes; a field so
    /// other threads can read it with <see cref="Volatile"/>.</summary>
    public long OutboxFullCount;

    public NodeGroup(string name, IGroupOwner owner)
    {
        Name = name;
        Owner = owner;
        Outbox = new GroupOutbox(OutboxCapacity) { Released = owner.OnSent };
    }

    public string Name { get; }
    public IGroupOwner Owner { get; }
    /// <summary>The group's current view (null until the first). Setting it also sets <see cref="Id"/> and
    /// <see cref="RegionCount"/>, which the sender's feed reads at every record: fields of this object, so a record does
    /// not touch the view's objects too (cold at each group's turn in 1,024 groups).</summary>
    public GroupView? View
    {
        get => _view;
        set
        {
            _view = value;
            Id = value?.Group.Value ?? 0;
            RegionCount = value?.Regions.Length ?? 0;
        }
    }

    private GroupView? _view;

    /// <summary>The group's number in its current view (0 without a view).</summary>
    public uint Id { get; private set; }

    /// <summary>How many regions the current view maps the group to (0 without a view).</summary>
    public int RegionCount { get; private set; }
    public ulong NextSequence { get; set; }
    /// <summary>Messages published on the core thread (the simulation's publishers); application threads publish
    /// through the owner (<see cref="IGroupOwner.TryTakePublished"/>).</summary>
    public Queue<byte[]> Pending => _pending ??= new();

    private Queue<byte[]>? _pending;

    /// <summary>Whether the owner may have published messages not yet taken: set when its wake-up reaches the group layer
    /// (<see cref="GroupLayer.SignalPublished"/>), cleared when the owner had none. So a group fed by a pull feed does not
    /// look into its publish queue at every packet. Starts set: a message published before the group had state here is
    /// taken at the first pull.</summary>
    public bool PublishSignalled { get; set; } = true;
    public GroupOutbox Outbox { get; }

    /// <summary>The owner is full: packets carrying this group's records wait until it resumes delivery.</summary>
    public bool DeliveryPaused { get; set; }

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
            OutboxFullCount++;
            return false;
        }

        if (!TryTake(maxBytes, drops, out var message, out ulong sequence, out bool published))
        {
            return false;
        }

        Outbox.Add(message, sequence, published);
        return true;
    }

    /// <summary>Takes and numbers the next message from the application as <see cref="TryTakeNext"/> does, but hands it
    /// to the caller instead of the outbox: the caller writes it at once or adds it to the outbox itself, and gives a
    /// published one back to the owner (<see cref="IGroupOwner.OnSent"/>) once written. For a group whose one region
    /// takes what it is given (<see cref="GroupOutbox.IsEmptyFor"/>), so nothing has to wait in the outbox.</summary>
    public bool TryTake(int maxBytes, DropCounters drops, out ReadOnlyMemory<byte> message, out ulong sequence, out bool published)
    {
        published = true;
        if (_pending is { Count: > 0 } && _pending.TryDequeue(out var pending))
        {
            message = pending;
            sequence = ++NextSequence;
            return true;
        }

        if (PublishSignalled)
        {
            if (Owner.TryTakePublished(out message))
            {
                sequence = ++NextSequence;
                return true;
            }

            PublishSignalled = false; // a message published from now on posts a wake-up, which sets it again
        }

        published = false;
        while (Feed is { } feed && FeedActive)
        {
            if (!feed.TryPull(out message))
            {
                FeedActive = false;
                break;
            }

            if (message.Length > maxBytes)
            {
                drops.Increment(DropReason.Oversized);
                continue;
            }

            sequence = ++NextSequence;
            return true;
        }

        message = default;
        sequence = 0;
        return false;
    }

    /// <summary>Drops what waits to be sent (the group was left). Published messages in the outbox go back to the owner
    /// (<see cref="IGroupOwner.OnSent"/>: their slots free); messages still in the owner's queue are the owner's to
    /// discard. Returns how many core-side <see cref="Pending"/> messages were dropped.</summary>
    public int DiscardPending()
    {
        int discarded = _pending?.Count ?? 0;
        Outbox.Clear(Owner.OnSent);
        _pending?.Clear();
        return discarded;
    }

    /// <summary>Records delivery of <paramref name="sequence"/> from <paramref name="sender"/>. With
    /// <paramref name="fifo"/>, false for a duplicate or an older message (per-sender FIFO: a message never overtakes one
    /// already delivered). Without it the region layer's exactly-once delivery of packets is relied on and every
    /// message passes.</summary>
    public bool Advance(uint sender, ulong sequence, bool fifo)
    {
        if (!_hasRecent || sender != _recentSender)
        {
            WriteBackRecent();
            _recentSender = sender;
            _recentKnown = _lastDelivered.TryGetValue(sender, out _recentSequence);
            _hasRecent = true;
        }

        if (_recentKnown && sequence <= _recentSequence)
        {
            return !fifo;
        }

        _recentSequence = sequence;
        _recentKnown = true;
        return true;
    }

    private void WriteBackRecent()
    {
        if (_hasRecent && _recentKnown)
        {
            _lastDelivered[_recentSender] = _recentSequence;
        }

        _hasRecent = false;
    }

    /// <summary>Carries each sender's delivery progress over to the id it has in a new GMS epoch (<paramref name="renumber"/>:
    /// old id to new id, by the sender's address); progress of a sender with no new id is forgotten. So a message sent
    /// again in the new epoch (<c>GroupOutbox.Restart</c>) that this node delivered before is dropped as a duplicate.</summary>
    public void RenumberSenders(Func<uint, uint?> renumber)
    {
        WriteBackRecent();
        var old = _lastDelivered.ToList();
        _lastDelivered.Clear();
        foreach (var (sender, last) in old)
        {
            if (renumber(sender) is { } id)
            {
                _lastDelivered[id] = Math.Max(last, _lastDelivered.GetValueOrDefault(id));
            }
        }
    }

    /// <summary>Senders whose delivery progress this group keeps (for duplicate suppression).</summary>
    public int SendersTracked
        => _lastDelivered.Count + (_hasRecent && _recentKnown && !_lastDelivered.ContainsKey(_recentSender) ? 1 : 0);

    /// <summary>Forgets the delivery progress of every sender <paramref name="knows"/> says no packet can come from any
    /// more (docs/qsm.md, "Departed senders"); returns how many were forgotten. <paramref name="scratch"/> is reused.</summary>
    public int Forget(Func<uint, bool> knows, List<uint> scratch)
    {
        WriteBackRecent();
        scratch.Clear();
        foreach (uint sender in _lastDelivered.Keys)
        {
            if (!knows(sender))
            {
                scratch.Add(sender);
            }
        }

        foreach (uint sender in scratch)
        {
            _lastDelivered.Remove(sender);
        }

        return scratch.Count;
    }
}
