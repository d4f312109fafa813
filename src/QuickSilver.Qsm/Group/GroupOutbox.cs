namespace QuickSilver.Qsm.Group;

/// <summary>
/// A group's messages taken from the application (published, or pulled from its feed) and numbered, until every region
/// of the group's view has written them into a packet (§2.2: "one regional request per region"). Each region has its
/// own cursor, so a region with credit does not wait for one without; a message leaves the outbox when the slowest
/// region has written it. Bounded: when it is full no more is taken from the application (back-pressure to the
/// publisher), which bounds how far one region runs ahead of another. Holds references only: the bytes are copied once,
/// from here straight into a send slot. Core thread only.
/// The ring starts small and doubles when full, up to <c>capacity</c>: a group whose regions write what it takes at
/// once holds a message or two, and a ring of the full capacity per group (4,096 items of 32 bytes) cost a node in
/// 1,024 groups 128 MB, cycled through so that every message missed the cache (docs/qsm.md, "The group layer").
/// The first region's cursor is a field of the outbox, and only a group mapped to more regions keeps the others in an
/// array, one object less to reach at each group's turn. A group with one region and nothing held is written without
/// the ring at all (<see cref="IsEmptyFor"/>; docs/benchmarks.md, "The group send path without the outbox ring").
/// </summary>
internal sealed class GroupOutbox
{
    /// <summary>The ring's first size.</summary>
    public const int InitialRing = 16;

    private readonly int _capacity;
    private Item[] _items;
    private long _mask;
    // Cursor i: the first region's inline (i = 0), the others' in _more[i - 1]; _regions of them in all (0: no view yet).
    private uint _region0;
    private long _cursor0;
    private (uint Region, long Cursor)[] _more = [];
    private int _regions;
    private long _head;
    private long _tail;

    public GroupOutbox(int capacity)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(capacity, 1);
        _capacity = capacity;
        _items = new Item[Math.Min(InitialRing, (int)System.Numerics.BitOperations.RoundUpToPowerOf2((uint)capacity))];
        _mask = _items.Length - 1;
    }

    /// <summary>Messages taken and not yet written by every region.</summary>
    public int Count => (int)(_tail - _head);

    public bool IsFull => Count >= _capacity;

    /// <summary>The ring's size now (it grows on demand up to the capacity, a power of two at or above it).</summary>
    internal int RingSize => _items.Length;

    /// <summary>Called when a published message has been written by every region: its publish-buffer slot and buffer
    /// are the owner's again. Not called for messages taken from a pull feed (nothing of theirs is held here).</summary>
    public Action<ReadOnlyMemory<byte>>? Released { get; set; }

    /// <summary>Sets the regions messages must go to (a new group view). A region already there keeps its cursor; a new one
    /// starts with the next message taken (what was taken before went to the regions of the view it was taken in);
    /// a region no longer there stops holding messages back.</summary>
    public void SetRegions(IReadOnlyList<uint> regions)
    {
        var cursors = new long[regions.Count];
        for (int i = 0; i < regions.Count; i++)
        {
            cursors[i] = _restarted ? _head : _tail;
            for (int j = 0; j < _regions; j++)
            {
                if (RegionAt(j) == regions[i])
                {
                    cursors[i] = CursorAt(j);
                }
            }
        }

        _regions = regions.Count;
        _more = regions.Count > 1 ? new (uint, long)[regions.Count - 1] : [];
        for (int i = 0; i < regions.Count; i++)
        {
            if (i == 0)
            {
                (_region0, _cursor0) = (regions[0], cursors[0]);
            }
            else
            {
                _more[i - 1] = (regions[i], cursors[i]);
            }
        }

        _restarted = false;
        Release();
    }

    private uint RegionAt(int i) => i == 0 ? _region0 : _more[i - 1].Region;

    private ref long CursorAt(int i) => ref i == 0 ? ref _cursor0 : ref _more[i - 1].Cursor;

    /// <summary>No view: no region holds messages back, and none is written until the next view's regions are set.</summary>
    private void ClearRegions()
    {
        _regions = 0;
        _more = [];
    }

    private bool _restarted;

    /// <summary>The node starts afresh at a new GMS epoch (<c>RegionLayer.StartNewEpoch</c>): the old regions are gone,
    /// and everything held here (not yet written by all of them) goes to every region of the next view, after
    /// <paramref name="replay"/>: the messages of packets the old regions' senders had sent and not had acknowledged,
    /// in sequence order, each as (sequence, message). Those at or above the oldest message held are held already; those
    /// beyond the free room are dropped (returned: how many). Receivers drop what they delivered before
    /// (duplicate suppression by sequence).</summary>
    public int Restart(IReadOnlyList<(ulong Sequence, ReadOnlyMemory<byte> Message)> replay)
    {
        ClearRegions();
        int dropped = Prepend(replay);
        _restarted = true;
        return dropped;
    }

    /// <summary>Regions new in this group's view (<paramref name="regions"/>, already set by <see cref="SetRegions"/>)
    /// hold members that were in the group's old regions: nodes that moved region because they joined or left another
    /// group. What the old regions were sent while those members were still in their views may not have reached them
    /// (a sender numbers into its own, possibly older, view of a region; a node that moved has stopped its old member).
    /// So the new regions start at the head, not the tail: they write <paramref name="replay"/> (the messages of packets
    /// the old regions' senders have not had acknowledged, in sequence order), then everything still held here. The old
    /// regions' cursors do not move, so they send nothing twice. Members that had a message drop it again by its
    /// sequence (per-sender FIFO). Returns how many of <paramref name="replay"/> found no room (dropped).</summary>
    public int Replay(IReadOnlyList<(ulong Sequence, ReadOnlyMemory<byte> Message)> replay, IReadOnlyCollection<uint> regions)
    {
        int dropped = Prepend(replay);
        for (int i = 0; i < _regions; i++)
        {
            if (regions.Contains(RegionAt(i)))
            {
                CursorAt(i) = _head;
            }
        }

        return dropped;
    }

    /// <summary>Puts the messages of <paramref name="replay"/> (in sequence order) older than the oldest held in front of
    /// it, newest first, as far as there is room; returns how many did not fit. Cursors keep their messages.</summary>
    private int Prepend(IReadOnlyList<(ulong Sequence, ReadOnlyMemory<byte> Message)> replay)
    {
        if (_head < _capacity)
        {
            // Positions are taken modulo the ring's size (a power of two, at most the capacity rounded up): room to
            // step back before the head.
            long shift = (long)System.Numerics.BitOperations.RoundUpToPowerOf2((uint)_capacity);
            _head += shift;
            _tail += shift;
            for (int i = 0; i < _regions; i++)
            {
                CursorAt(i) += shift;
            }
        }

        ulong oldest = Count > 0 ? _items[_head & _mask].Sequence : ulong.MaxValue;
        int dropped = 0;
        for (int i = replay.Count - 1; i >= 0; i--)
        {
            var (sequence, message) = replay[i];
            if (sequence >= oldest)
            {
                continue;
            }

            if (IsFull)
            {
                dropped++;
                continue;
            }

            if (Count == _items.Length)
            {
                Grow();
            }

            _head--;
            _items[_head & _mask] = new Item(message, sequence, false);
            oldest = sequence;
        }

        return dropped;
    }

    /// <summary>Appends a numbered message; the caller checked <see cref="IsFull"/>.</summary>
    public void Add(ReadOnlyMemory<byte> message, ulong sequence, bool published)
    {
        if (IsFull)
        {
            throw new InvalidOperationException("The group outbox is full.");
        }

        if (Count == _items.Length)
        {
            Grow();
        }

        _items[_tail & _mask] = new Item(message, sequence, published);
        _tail++;
    }

    /// <summary>Doubles the ring (every slot holds a message, and the capacity is not reached), each message keeping its
    /// position.</summary>
    private void Grow()
    {
        var items = new Item[_items.Length * 2];
        long mask = items.Length - 1;
        for (long p = _head; p < _tail; p++)
        {
            items[p & mask] = _items[p & _mask];
        }

        _items = items;
        _mask = mask;
    }

    /// <summary>The next message <paramref name="region"/> has not written yet; false when it has written all.</summary>
    public bool TryPeek(uint region, out ReadOnlyMemory<byte> message, out ulong sequence)
    {
        int index = IndexOf(region);
        if (index < 0 || CursorAt(index) == _tail)
        {
            message = default;
            sequence = 0;
            return false;
        }

        ref var item = ref _items[CursorAt(index) & _mask];
        message = item.Message;
        sequence = item.Sequence;
        return true;
    }

    /// <summary>Whether <paramref name="region"/> is the only region messages go to and nothing is held: then a message
    /// taken for it can be written at once without passing through the ring (<see cref="NodeGroup.TryTake"/>), since
    /// no other region waits for it and none is ahead of it. Reads fields of this object only.</summary>
    public bool IsEmptyFor(uint region) => _regions == 1 && _region0 == region && _head == _tail;

    /// <summary><paramref name="region"/> wrote its next message.</summary>
    public void Advance(uint region)
    {
        CursorAt(IndexOf(region))++;
        Release();
    }

    /// <summary>Drops every message (the group was left); returns how many were published ones never fully sent, after
    /// handing each of their buffers to <paramref name="discard"/>.</summary>
    public int Clear(Action<ReadOnlyMemory<byte>>? discard = null)
    {
        int published = 0;
        for (long i = _head; i < _tail; i++)
        {
            ref var item = ref _items[i & _mask];
            if (item.Published)
            {
                published++;
                discard?.Invoke(item.Message);
            }

            item = default;
        }

        _head = _tail;
        ClearRegions();
        return published;
    }

    private int IndexOf(uint region)
    {
        if (_regions > 0 && _region0 == region)
        {
            return 0;
        }

        for (int i = 0; i < _more.Length; i++)
        {
            if (_more[i].Region == region)
            {
                return i + 1;
            }
        }

        return -1;
    }

    private void Release()
    {
        if (_regions == 0)
        {
            return; // no view yet: messages wait for its regions
        }

        long slowest = _cursor0;
        foreach (var (_, cursor) in _more)
        {
            slowest = Math.Min(slowest, cursor);
        }

        while (_head < slowest)
        {
            ref var item = ref _items[_head & _mask];
            var (message, published) = (item.Message, item.Published);
            item = default;
            _head++;
            if (published)
            {
                Released?.Invoke(message);
            }
        }
    }

    private record struct Item(ReadOnlyMemory<byte> Message, ulong Sequence, bool Published);
}
