using System.Diagnostics;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>Delivers one of a stream's packets upward; the payload is valid only during the call. False refuses it for
/// now (back-pressure): the stream keeps it, does not move <see cref="SenderStream.Delivered"/> past it, and offers it
/// again on <see cref="SenderStream.ResumeDelivery"/>.</summary>
internal delegate bool PacketDelivery(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload);

/// <summary>Passes over one of a stream's packets that the sender told this member to skip (see
/// <see cref="SenderStream.SkipAhead"/>): it is not delivered, only shown so the layer above can count what it lost.</summary>
internal delegate void PacketSkip(SenderStream stream, ulong seq, ReadOnlySpan<byte> payload);

/// <summary>
/// One sender's packets as seen by one region member: delivered in order up to <see cref="Delivered"/>, held beyond
/// it until the gap closes (or, without FIFO, delivered on arrival and still held), and kept after delivery until the
/// region-wide purge point (every member has them) to serve pushes and pulls. By default it keeps every packet; with
/// <see cref="RegionOptions.PartitionShare"/> it keeps after delivery only what its <see cref="Region.PartitionShare"/>
/// says (its partition's class, seq mod p, and old classes while a view change settles), so it holds about 1/p of the
/// purge lag's traffic (docs/qsm.md, "Receive buffering" and "Partition share").
/// <para>
/// Storage is a ring of slots indexed by <c>seq mod capacity</c> (a power of two, doubled on demand), each holding a
/// pooled buffer (<see cref="PacketPool"/>) and a flag for a packet delivered early. Every packet held lies in a
/// window that starts at the lowest packet not yet purged (<c>_low</c>) and spans at most <c>maxHeld</c> sequence
/// numbers (<see cref="RegionOptions.MaxHeldPackets"/>) and holds at most <c>maxHeldBytes</c> of payload
/// (<see cref="RegionOptions.MaxHeldBytes"/>): a packet beyond either is dropped and counted
/// (<see cref="DropReason.ReceiveBufferFull"/>, <see cref="Overflows"/>), and the NAKs recover it once the window has
/// moved (<see cref="HeldBytesCap"/>: how the byte bound stops the sender first, and why it never stalls the stream). A member does not vouch for stability in the window's last <c>reserve</c> sequence numbers (the sender's
/// window), so a sender acknowledged up to X, which sends at most a window beyond X, never overruns the ring: in a
/// region whose members share their options the bound stops the sender rather than drop its packets. Storing,
/// delivering and purging a packet are O(1) and allocate nothing once the ring and the pool have grown.
/// </para>
/// Core thread only.
/// </summary>
internal sealed class SenderStream
{
    private const int InitialSlots = 16;

    /// <summary>The highest sequence number a stream takes (2^63: centuries at a billion packets a second). A packet
    /// numbered above it is dropped, and an anchor above it is lowered to it, so the stream's arithmetic (the next seq
    /// to deliver, the window's end, the purge loop) never wraps at 2^64 − 1: a forged packet numbered 2^64 − 1 and a
    /// token purging up to there used to spin the purge loop for good.</summary>
    public const ulong MaxSequence = 1UL << 63;
    private readonly bool _fifo;
    private readonly ulong _maxHeld;
    private readonly ulong _reserve;
    private long _maxBytes;              // RegionOptions.MaxHeldBytes, or the member's share (ShareByteBound): payload bytes held at most (long.MaxValue: no bound)
    private long _reserveBytes;          // the top part of the byte bound the cap keeps free for what the sender may send
    private readonly long _missingCost;  // what a packet not yet arrived counts for below the cursor: the largest payload
    private ulong _capCursor;            // HeldBytesCap: every seq in [_low, _capCursor] is counted in _capBytes
    private long _capBytes;              // Σ over [_low, _capCursor] of held length, 0 if delivered and released, else _missingCost
    private readonly PacketDelivery _deliver;
    private readonly PacketPool _pool;
    private readonly DropCounters? _drops;
    private Slot[] _slots = new Slot[InitialSlots];
    private ulong _mask = InitialSlots - 1;
    private ulong _low; // every packet held is in [_low, _top]; _top − _low < maxHeld ≤ the ring's capacity
    private ulong _top;
    private int _count;
    private bool _delivering; // an in-order pass is running (a re-entrant one would deliver its packet twice)
    private bool _blocked;    // the layer above refused a packet: nothing more until ResumeDelivery
    private readonly PacketSkip? _skip;
    private ulong _skipThrough; // packets up to here are passed over, not delivered (SkipAhead)
    private readonly PartitionShare? _share; // null: keep every packet until the purge
    private readonly uint[] _views = new uint[MaxViewStarts]; // views the sender numbered packets in, ascending
    private readonly ulong[] _viewStarts = new ulong[MaxViewStarts]; // the first seq of each
    private int _viewCount;
    private const int MaxViewStarts = 8;
    private ulong _cachedSwept; // OnCached looked at every delivered packet up to here
    private (int Partitions, int Partition) _heldClassKey = (-1, -1);
    private ulong _heldClassUpTo; // HeldClassUpTo: every packet of the class up to here held (or purged)
    private bool _purgedPastStart; // the region purged up to the stream's start (always, for a stream from the first packet)

    /// <param name="deliver">Called for each packet that becomes deliverable; false pauses the stream (see
    /// <see cref="PacketDelivery"/>).</param>
    /// <param name="maxHeld">The window's span in sequence numbers (<see cref="RegionOptions.MaxHeldPackets"/>).</param>
    /// <param name="reserve">The window's top part <see cref="CachedUpTo"/> never vouches for
    /// (<see cref="RegionOptions.SenderWindow"/>); less than <paramref name="maxHeld"/>.</param>
    /// <param name="pool">Where packet buffers come from and go back to (shared by a member's streams).</param>
    /// <param name="drops">Where overflows are counted (the member's drop counters).</param>
    /// <param name="skip">Shown each packet passed over after <see cref="SkipAhead"/>.</param>
    /// <param name="share">What this member keeps after delivery (<see cref="RegionOptions.PartitionShare"/>); null keeps
    /// every packet until the purge.</param>
    /// <param name="maxHeldBytes">Payload bytes the stream holds at most (<see cref="RegionOptions.MaxHeldBytes"/>);
    /// <see cref="long.MaxValue"/> for no byte bound. At least twice <paramref name="largestPayload"/>.</param>
    /// <param name="reserveBytes">The top part of the byte bound the position and stability this member reports keep free
    /// for what the sender may send beyond them (the receive window, or the sender's window of packets); clamped to
    /// [<paramref name="largestPayload"/>, <paramref name="maxHeldBytes"/> − <paramref name="largestPayload"/>].</param>
    /// <param name="largestPayload">The largest payload a packet carries here: what a packet not yet arrived counts for.</param>
    public SenderStream(uint sender, PacketDelivery deliver, bool fifo = true, int maxHeld = 16_384, int reserve = 0, PacketPool? pool = null,
        DropCounters? drops = null, PacketSkip? skip = null, PartitionShare? share = null, long maxHeldBytes = long.MaxValue,
        long reserveBytes = 0, int largestPayload = PacketPool.MaxLength)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(largestPayload, 1);
        if (maxHeldBytes != long.MaxValue)
        {
            ArgumentOutOfRangeException.ThrowIfLessThan(maxHeldBytes, 2L * largestPayload);
        }

        _maxBytes = maxHeldBytes;
        _reserveBytes = maxHeldBytes == long.MaxValue ? 0 : Math.Clamp(reserveBytes, largestPayload, maxHeldBytes - largestPayload);
        _missingCost = largestPayload;
        _share = share is { Enabled: true } ? share : null;
        ArgumentNullException.ThrowIfNull(deliver);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxHeld, 1);
        ArgumentOutOfRangeException.ThrowIfNegative(reserve);
        ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(reserve, maxHeld);
        Sender = sender;
        _deliver = deliver;
        _fifo = fifo;
        _maxHeld = (ulong)maxHeld;
        _reserve = (ulong)reserve;
        _pool = pool ?? new PacketPool(maxHeld);
        _drops = drops;
        _skip = skip;
    }

    /// <summary>Bytes of payload of every packet taken in order so far (delivered or passed over): with
    /// <see cref="Delivered"/>, the size of the sender's packets, which sets how often this member reports
    /// (<see cref="ReceiverStatus"/>).</summary>
    public ulong TakenBytes { get; private set; }

    /// <summary>Packets passed over without delivery since the sender told this member to skip ahead.</summary>
    public long Skipped { get; private set; }

    /// <summary>Cut loose from the sender's flow control (<see cref="SlowReceiverPolicy.SkipAhead"/>): a packet the layer
    /// above refuses is passed over (skipped) instead of pausing the stream, so this member's position moves as fast as
    /// packets arrive. Set on a skip notice; the member clears it once the layer above has refused nothing for
    /// <see cref="RegionOptions.LaggardTimeout"/>.</summary>
    public bool Lossy { get; set; }

    /// <summary><see cref="Skipped"/> when the member last looked (to tell whether the stream kept up since).</summary>
    internal long SkippedWhenChecked { get; set; }

    /// <summary>The sender says this member held it back too long (<see cref="SlowReceiverPolicy.SkipAhead"/>): none of
    /// its packets up to <paramref name="through"/> goes to the layer above any more (a refused one waiting for
    /// <see cref="ResumeDelivery"/> included). They are still received, held, repaired and purged as before, so this
    /// member still caches its partition's share for the others and its position moves as fast as packets arrive; each
    /// is passed to the skip callback instead, in order, as it would have been delivered. False when nothing is left to
    /// skip (everything up to there was delivered already).</summary>
    public bool SkipAhead(ulong through)
    {
        through = Math.Min(through, MaxSequence);
        if (through <= Delivered || through <= _skipThrough)
        {
            return false;
        }

        _skipThrough = through;
        _blocked = false;
        DeliverInOrder();
        DeliverHeldEarly();
        return true;
    }

    public uint Sender { get; }

    /// <summary>Where the sender's NAKs and ACKs go (learned from its datagrams).</summary>
    public NetAddress Address { get; set; }

    /// <summary>Every packet up to here has been received and delivered.</summary>
    public ulong Delivered { get; private set; }

    /// <summary>The highest seq that arrived and was held (one dropped beyond the window's bound does not count: only a
    /// forged or misconfigured sender's packet lands there).</summary>
    public ulong MaxSeen { get; private set; }

    /// <summary>Packets held: delivered ones awaiting the purge, and those waiting for a gap or for the layer above.</summary>
    public int HeldCount => _count;

    /// <summary>Payload bytes of the packets held.</summary>
    public long HeldBytes { get; private set; }

    /// <summary>The most payload bytes this stream held at once (what <see cref="RegionOptions.MaxHeldBytes"/> bounds).</summary>
    public long PeakHeldBytes { get; private set; }

    /// <summary>Delivered packets this member released at once, not being its partition's share
    /// (<see cref="RegionOptions.PartitionShare"/>).</summary>
    public long ReleasedAtDelivery { get; private set; }

    /// <summary>Delivered packets of this member's share it had released before a view change made them its share, and
    /// took back from a peer's repair (<see cref="PartitionShare"/>).</summary>
    public long Restored { get; private set; }

    /// <summary>Every packet up to here has been purged (delivered everywhere); 0 before the anchor.</summary>
    public ulong PurgedThrough => Anchored ? _low - 1 : 0;

    /// <summary>The sender numbered a packet in region view <paramref name="view"/>, whose first seq is
    /// <paramref name="viewStart"/> (from the data header): remembered for the last few views, so
    /// <see cref="NumberedBefore"/> can tell which packets were numbered before a view change.</summary>
    public void OnNumbered(uint view, ulong viewStart)
    {
        if (_viewCount > 0 && _views[_viewCount - 1] == view)
        {
            return; // the common case: the same view as the last packet
        }

        int at = _viewCount;
        while (at > 0 && _views[at - 1] > view)
        {
            at--;
        }

        if (at > 0 && _views[at - 1] == view)
        {
            return;
        }

        if (_viewCount == MaxViewStarts)
        {
            if (at == 0)
            {
                return; // older than every view remembered: forgetting it only makes NumberedBefore larger (safe)
            }

            Array.Copy(_views, 1, _views, 0, at - 1); // forget the oldest view
            Array.Copy(_viewStarts, 1, _viewStarts, 0, at - 1);
            at--;
        }
        else
        {
            Array.Copy(_views, at, _views, at + 1, _viewCount - at);
            Array.Copy(_viewStarts, at, _viewStarts, at + 1, _viewCount - at);
            _viewCount++;
        }

        _views[at] = view;
        _viewStarts[at] = viewStart;
    }

    /// <summary>The last seq the sender may have numbered before region view <paramref name="view"/>: one below the
    /// first seq of the earliest view at or after it that this member has heard of; <see cref="ulong.MaxValue"/> while it
    /// has heard of none (every packet may be older). Never below the true point (a view forgotten makes it larger).</summary>
    public ulong NumberedBefore(uint view)
    {
        for (int i = 0; i < _viewCount; i++)
        {
            if (_views[i] >= view)
            {
                return _viewStarts[i] - 1;
            }
        }

        return ulong.MaxValue;
    }

    /// <summary>When a packet of this sender or a token section for it last reached this member (for
    /// <see cref="StreamRetirement"/>).</summary>
    internal TimeSpan LastHeard { get; set; }

    /// <summary>The ring's current capacity (slots; a power of two that grows on demand).</summary>
    public int Capacity => _slots.Length;

    /// <summary>Packets dropped because they lay beyond the window (<see cref="RegionOptions.MaxHeldPackets"/>) or did not
    /// fit the byte bound (<see cref="RegionOptions.MaxHeldBytes"/>).</summary>
    public long Overflows { get; private set; }

    /// <summary>Of <see cref="Overflows"/>, the packets dropped because they did not fit the byte bound.</summary>
    public long ByteOverflows { get; private set; }

    /// <summary>Held packets given up to make room under the byte bound for the packet this stream needs next (see
    /// <see cref="HeldBytesCap"/>); each is asked for again like a lost one.</summary>
    public long Evicted { get; private set; }

    /// <summary>The byte bound (<see cref="RegionOptions.MaxHeldBytes"/>; <see cref="long.MaxValue"/> for none).</summary>
    public long MaxHeldBytes => _maxBytes;

    /// <summary>What this member last reported of this stream (<see cref="ReceiverStatus"/>).</summary>
    internal FlowReport Report { get; } = new();

    /// <summary>The position this member reports for flow control: every packet up to here taken (delivered), and never
    /// above the point up to which <see cref="CachedUpTo"/> may vouch (the window less its reserve), so a sender that
    /// sends at most a window beyond it never overruns the ring; 0 before the anchor.</summary>
    public ulong FlowPosition => Anchored ? HeldBytesCap(Math.Min(Delivered, WindowEnd - _reserve)) : 0;

    /// <summary>Whether this member has room for a whole reserve (the receive window) above the highest packet it has
    /// seen: every packet up to <see cref="MaxSeen"/> (held at its length, released at 0, missing at the largest payload)
    /// fits the byte bound less its reserve (<see cref="HeldBytesCap"/> reaches it), and the packet window reaches a
    /// reserve past it. Then the sender may count this member's window from <see cref="MaxSeen"/>, not only from
    /// <see cref="FlowPosition"/>: what it sends still fits the bound, and what is in flight to this member is still at
    /// most a window (it has read everything up to <see cref="MaxSeen"/> off its socket). A gap then no longer stops
    /// the sender a window after it (docs/qsm.md, "The window above a gap"). Amortized O(1): the cap's cursor moves on.</summary>
    public bool RoomAboveHighest => Anchored && MaxSeen <= WindowEnd - _reserve && HeldBytesCap(MaxSeen) >= MaxSeen;

    /// <summary>Which of the 64 packets after <paramref name="position"/> have not arrived though a later one has (bit i:
    /// packet position + 1 + i): the gaps a flow status names, so the sender can resend them at once.</summary>
    public ulong MissingAfter(ulong position) => MissingAfter(position, 64).Word(0);

    /// <summary>Which of the <paramref name="packets"/> packets after <paramref name="position"/> (a multiple of 64, at
    /// most <see cref="GapMap.Bits"/>) have not arrived though a later one has: the gaps a member's own flow status names.
    /// It names more than 64 when the sender may send that far above the position (<see cref="RoomAboveHighest"/>):
    /// a loss further up would otherwise be heard of only at the token.</summary>
    public GapMap MissingAfter(ulong position, int packets)
    {
        GapMap missing = default;
        ulong end = Math.Min(MaxSeen, position + 1 + (ulong)Math.Min(packets, GapMap.Bits)); // seqs in [position + 1, end)
        for (ulong seq = position + 1; seq < end; seq++)
        {
            if (!Received(seq))
            {
                int i = (int)(seq - position - 1);
                missing.SetWord(i >> 6, missing.Word(i >> 6) | (1UL << (i & 63)));
            }
        }

        return missing;
    }

    /// <summary>Whether the layer above refused this stream's next packet and it waits for <see cref="ResumeDelivery"/>.</summary>
    public bool Paused => _blocked;

    /// <summary>Where the sender's first packet heard by this member says its stream starts for this member, before the
    /// region's purge point is known (see <see cref="Anchor"/>).</summary>
    public ulong? Candidate { get; set; }

    /// <summary>The seq this member's stream started after (0 unless it joined mid-stream).</summary>
    public ulong AnchoredAt { get; private set; }

    /// <summary>Whether this member knows where the sender's stream starts for it (see <see cref="Anchor"/>).</summary>
    public bool Anchored { get; private set; }

    /// <summary>Sets the point after which this member is owed the sender's packets (0 for a member present from the
    /// start; later for one that joined mid-stream). Packets held at or below it are discarded (and any beyond the window
    /// that now starts after it, counted as overflows), and any that now follow in order are delivered.</summary>
    public void Anchor(ulong start)
    {
        if (Anchored)
        {
            return;
        }

        // Never below what the sender said every member of its view had taken: those packets are numbered before any
        // view that included this member (not owed to it), and the others may have dropped them already.
        start = Math.Min(Math.Max(start, SettledSeen), MaxSequence);
        Anchored = true;
        AnchoredAt = start;
        _purgedPastStart = start == 0;
        Delivered = start;
        MaxSeen = Math.Max(MaxSeen, start);
        ulong top = start;
        if (_count > 0)
        {
            for (int i = 0; i < _slots.Length; i++)
            {
                ref var slot = ref _slots[i];
                if (slot.Buffer is null)
                {
                    continue;
                }

                if (slot.Seq <= start || slot.Seq - start > _maxHeld)
                {
                    if (slot.Seq > start)
                    {
                        Overflow();
                    }

                    Release(ref slot);
                }
                else
                {
                    top = Math.Max(top, slot.Seq);
                }
            }
        }

        _low = start + 1;
        _top = top;
        _capCursor = start;
        _capBytes = 0;
        EnsureCapacity(_top - _low + 1);
        DeliverInOrder();
        DeliverHeldEarly();
    }

    /// <summary>The highest <see cref="DataHeader.Settled"/> heard from the sender (docs/qsm.md, "Purging on the sender's
    /// word"): every member of the sender's view has taken its packets up to here.</summary>
    public ulong SettledSeen { get; private set; }

    /// <summary>The sender says every member of its view has taken its packets up to <paramref name="settled"/>: drops
    /// this member's copies up to there (never above <see cref="Delivered"/>), or, before the anchor, remembers it so the
    /// stream does not start below it.</summary>
    public void OnSettled(ulong settled)
    {
        if (settled <= SettledSeen)
        {
            return;
        }

        SettledSeen = Math.Min(settled, MaxSequence);
        if (Anchored)
        {
            Purge(SettledSeen);
        }
    }

    /// <summary>The highest <see cref="DataHeader.Cached"/> heard from the sender (docs/qsm.md, "Partition share"): every
    /// packet up to here is held by every member of its caching partition (or taken by everyone).</summary>
    public ulong CachedSeen { get; private set; }

    /// <summary>The sender's cached point moved to <paramref name="cached"/>: with the partition share, releases the
    /// delivered packets up to there that are not this member's share (held until now so that, if the sender crashed, a
    /// packet that reached only members outside its caching partition would still be held by them). Bounded by the
    /// window; each delivered packet is looked at once (<c>_cachedSwept</c>).</summary>
    public void OnCached(ulong cached)
    {
        if (cached <= CachedSeen)
        {
            return;
        }

        CachedSeen = Math.Min(cached, MaxSequence);
        if (_share is null || !Anchored)
        {
            return;
        }

        ulong end = Math.Min(CachedSeen, Delivered);
        for (ulong seq = Math.Max(_cachedSwept + 1, _low); seq <= end && _count > 0; seq++)
        {
            ReleaseUnlessShared(seq);
        }

        _cachedSwept = Math.Max(_cachedSwept, end);
    }

    /// <summary>The highest X up to which this member holds every packet of its own partition's class, for its flow
    /// reports (<see cref="FlowStatus.Cached"/>; 0 without the partition share, where nothing is released before the
    /// purge). Like <see cref="CachedUpTo"/> with no horizon (never above <see cref="MaxSeen"/>, nor the window less its
    /// reserve), scanned from the purge point (a view change may have made it responsible for packets it released), but
    /// incrementally: a packet of its class, once held, stays held until the purge passes it, so the scan resumes where
    /// the last one stopped (per class: a new view restarts it). 0 for a stream that started after the region's purge
    /// point (a joiner) until the purge passes its start: it holds nothing below its start, and its scan would vouch
    /// for those packets without holding them.</summary>
    public ulong HeldClassUpTo(int partitions, int myPartition)
    {
        if (_share is null || !Anchored || !_purgedPastStart)
        {
            return 0;
        }

        ulong p = (ulong)partitions;
        if (_heldClassKey != (partitions, myPartition))
        {
            _heldClassKey = (partitions, myPartition);
            _heldClassUpTo = 0;
        }

        ulong limit = HeldBytesCap(Math.Min(MaxSeen, WindowEnd - _reserve));
        ulong from = Math.Max(ShareScanFrom, _heldClassUpTo + 1);
        for (ulong seq = FirstOfClass(from, p, (ulong)myPartition); seq <= limit; seq += p)
        {
            if (!Has(seq))
            {
                _heldClassUpTo = Math.Max(_heldClassUpTo, seq - 1);
                return _heldClassUpTo;
            }
        }

        _heldClassUpTo = Math.Max(_heldClassUpTo, limit);
        return _heldClassUpTo;
    }

    /// <summary>The sequence numbers a held packet may have: [<paramref name="low"/>, <paramref name="high"/>], at most
    /// the window (<see cref="RegionOptions.MaxHeldPackets"/>) apart; false when nothing is held. What a peer asks of this
    /// stream is clamped to it, so a loop over a peer's range is bounded by the window, never by the peer's numbers.</summary>
    public bool HeldSpan(out ulong low, out ulong high)
    {
        low = _low;
        high = _top;
        return _count > 0;
    }

    /// <summary>Whether <paramref name="seq"/> was received: delivered (or not owed) at or below <see cref="Delivered"/>,
    /// or held above it.</summary>
    public bool Received(ulong seq) => seq <= Delivered ? seq > 0 : Has(seq);

    /// <summary>The payload of a held packet (valid until the stream is next changed).</summary>
    public bool TryGet(ulong seq, out ReadOnlySpan<byte> payload)
    {
        ref var slot = ref _slots[seq & _mask];
        if (slot.Buffer is not null && slot.Seq == seq)
        {
            payload = slot.Payload;
            return true;
        }

        payload = default;
        return false;
    }

    /// <summary>Stores a new packet; false for a duplicate, or for a packet beyond the window (dropped and counted).
    /// Each packet that becomes deliverable is passed to the delivery callback, in order (without FIFO, on arrival).</summary>
    public bool Add(ulong seq, ReadOnlySpan<byte> payload) => Add(seq, payload, default);

    /// <summary>As <see cref="Add(ulong, ReadOnlySpan{byte})"/>, for a packet this node sent itself: the stream holds
    /// the sender's datagram, lent to it, instead of a copy (docs/qsm.md, "The sender's own packets"). Delivered now, it
    /// is read from <paramref name="sent"/> when given (the same bytes, still in the cache where the sender wrote them).</summary>
    public bool Add(ulong seq, in LentPacket lent, ReadOnlySpan<byte> sent = default) => Add(seq, lent.Payload, lent, sent);

    private bool Add(ulong seq, ReadOnlySpan<byte> payload, in LentPacket lent, ReadOnlySpan<byte> sent = default)
    {
        if (seq == 0 || Received(seq))
        {
            if (_share is not null && seq != 0 && Anchored && seq >= _low && seq <= Delivered && !Has(seq) && _share.Keeps(this, seq))
            {
                // Delivered and released before a view change made it this member's share: take it back (docs/qsm.md,
                // "Partition share"). Not new: nothing is delivered.
                if (Store(seq, payload, lent))
                {
                    Restored++;
                }
                else
                {
                    Overflow(); // over the byte bound: asked for again (CachedMissing) once the purge has made room
                }
            }

            return false;
        }

        if (seq > MaxSequence)
        {
            _drops?.Increment(DropReason.Malformed);
            return false;
        }

        if (!Store(seq, payload, lent))
        {
            Overflow();
            return false; // beyond the window: not seen (a forged far sequence must not raise MaxSeen, the cutoff and the ACK)
        }

        MaxSeen = Math.Max(MaxSeen, seq);

        if (!_fifo && Anchored && seq > Delivered + 1)
        {
            DeliverEarly(seq); // no order asked for: it need not wait for the gap below it
        }

        DeliverInOrder(seq, sent.IsEmpty ? payload : sent);
        return true;
    }

    /// <summary>The layer above has room again: offers the held packets it refused, and those after them, in order
    /// (without FIFO, every held packet not yet delivered).</summary>
    public void ResumeDelivery()
    {
        _blocked = false;
        DeliverInOrder();
        DeliverHeldEarly();
    }

    /// <summary>Indices (seq / p) of the packets up to <paramref name="cutoff"/> this member's partition caches and this
    /// member lacks, and could store now: only up to the window's end (a packet beyond it would be dropped again, so
    /// asking for it would only make the sender resend it every round while a slow reader holds the region's purge
    /// point; it is asked for once the window has moved, and the packet this member needs next is always inside it).
    /// Beyond the set's range bound the nearest ranges merge (a superset, see NakSet.AppendCoarsening). Above the highest
    /// packet held every packet of the class is lacking, and that part is added at once, so a peer's cutoff never drives
    /// a long loop.</summary>
    public void CachedMissing(ulong cutoff, int partitions, int myPartition, NakSet into)
    {
        into.Clear();
        cutoff = Math.Min(cutoff, WindowEnd);
        ulong p = (ulong)partitions;
        ulong seq = FirstOfClass(ShareScanFrom, p, (ulong)myPartition);
        ulong scanTo = Math.Min(cutoff, HighestPossiblyHeld);
        for (; seq <= scanTo; seq += p)
        {
            if (!Has(seq))
            {
                into.AppendCoarsening(seq / p, seq / p);
            }
        }

        if (seq <= cutoff)
        {
            into.AppendCoarsening(seq / p, LastIndexOfClass(cutoff, p, (ulong)myPartition));
        }
    }

    /// <summary>The highest X, at most <paramref name="horizon"/>, such that every packet up to X that this member caches
    /// has arrived (its contribution to region-wide stability). <paramref name="horizon"/> is the highest seq the region
    /// is known to have seen (the token's cutoff or this member's own maximum): a member that holds all of its class up to
    /// there vouches for the whole range, even where it missed other partitions' packets above its own last one.
    /// Stopping at its own <see cref="MaxSeen"/> instead would let a member that missed the sender's last packets hold
    /// the region's stability below them, so no one would ever pull them from their caching partition (a stall once the
    /// sender is gone). Nor beyond the window less its reserve (see the class summary): the sender, acknowledged up to
    /// there, can then send no packet this member would have to drop. The packet this member needs next is never above
    /// that point (with the reserve below half the window), so the cap cannot stall the region.</summary>
    public ulong CachedUpTo(int partitions, int myPartition, ulong horizon = 0)
    {
        ulong p = (ulong)partitions;
        ulong limit = Math.Max(horizon, MaxSeen);
        if (Anchored)
        {
            limit = HeldBytesCap(Math.Min(limit, WindowEnd - _reserve));
        }

        for (ulong seq = FirstOfClass(ShareScanFrom, p, (ulong)myPartition); seq <= limit; seq += p)
        {
            if (!Has(seq))
            {
                return seq - 1; // at the latest just above the highest packet held: the loop is bounded by the window
            }
        }

        return limit;
    }

    /// <summary>Packets up to <paramref name="limit"/> cached by other partitions that this member lacks, as index sets
    /// per partition (the pull requests to those partitions' leaders); like <see cref="CachedMissing"/>, only up to the
    /// window's end.</summary>
    public void OtherMissing(ulong limit, int partitions, int myPartition, NakSet[] perPartition)
    {
        foreach (var set in perPartition)
        {
            set.Clear();
        }

        limit = Math.Min(limit, WindowEnd);
        ulong p = (ulong)partitions;
        ulong seq = Delivered + 1;
        ulong scanTo = Math.Min(limit, HighestPossiblyHeld);
        for (; seq <= scanTo; seq++)
        {
            int partition = (int)(seq % p);
            if (partition != myPartition && !Has(seq))
            {
                perPartition[partition].AppendCoarsening(seq / p, seq / p);
            }
        }

        for (ulong j = 0; j < p && seq <= limit; j++)
        {
            ulong first = FirstOfClass(seq, p, j);
            if (j != (ulong)myPartition && first <= limit)
            {
                perPartition[j].AppendCoarsening(first / p, LastIndexOfClass(limit, p, j));
            }
        }
    }

    /// <summary>Drops cached packets every member has received (up to <paramref name="upTo"/>, and never above
    /// <see cref="Delivered"/>): their buffers go back to the pool.</summary>
    public void Purge(ulong upTo)
    {
        _purgedPastStart |= Anchored && upTo >= AnchoredAt;
        ulong end = Math.Min(upTo, Delivered);
        if (end < _low)
        {
            return;
        }

        // Every seq in [_low, Delivered] is held, or (with the partition share) was released at delivery; at most the
        // window's span is visited. With nothing held the window only moves (a share may have released everything).
        for (ulong seq = _low; seq <= end && _count > 0; seq++)
        {
            ref var slot = ref _slots[seq & _mask];
            if (slot.Buffer is not null && slot.Seq == seq)
            {
                Release(ref slot);
            }
        }

        _low = end + 1;
        if (_capCursor < end)
        {
            _capCursor = end; // everything up to there was delivered and is released now: it counted 0
            _capBytes = 0;
        }
    }

    /// <summary>Returns every held packet's buffer to the pool: the stream is dropped while it still holds some (its
    /// sender departed and it made no progress for <see cref="RegionOptions.RetireDepartedStreamsAfter"/>,
    /// <see cref="StreamRetirement"/>). Returns how many were held. Bounded by the window.</summary>
    public int ReleaseAll()
    {
        int released = 0;
        for (ulong seq = _low; _count > 0 && seq <= _top; seq++)
        {
            ref var slot = ref _slots[seq & _mask];
            if (slot.Buffer is not null && slot.Seq == seq)
            {
                Release(ref slot);
                released++;
            }
        }

        return released;
    }

    /// <summary><see cref="Delivered"/> and <see cref="HeldCount"/> when the member last looked for streams to retire
    /// (<see cref="StreamRetirement"/>: a departed sender's stream that stops moving is given up).</summary>
    internal (ulong Delivered, int Held) WhenSwept { get; set; }

    /// <summary>When <see cref="Delivered"/> or <see cref="HeldCount"/> last changed, as the member's retirement sweeps
    /// saw it (or when the stream began).</summary>
    internal TimeSpan LastProgress { get; set; }

    /// <summary>Since when the member's sweeps have found the sender departed (out of the view, not admitted); null while
    /// it is not.</summary>
    internal TimeSpan? DepartedSince { get; set; }

    /// <summary>Where this member's own class is looked for, lacking or stable. Without the partition share every packet
    /// up to <see cref="Delivered"/> is held until the purge, so from just above it. With the share, from the purge
    /// point: a view change may have made this member responsible for delivered packets it released, and it must neither
    /// vouch for them (the sender would release them on the word of a partition that does not hold them) nor fail to
    /// ask for them back (docs/qsm.md, "Partition share"). At most the window is scanned either way.</summary>
    private ulong ShareScanFrom => _share is not null && Anchored ? Math.Min(_low, Delivered + 1) : Delivered + 1;

    /// <summary>
    /// How the byte bound (<see cref="RegionOptions.MaxHeldBytes"/>) acts on the sender before it acts on packets, like
    /// the packet window's reserve: the highest X ≤ <paramref name="limit"/> such that the packets in [purge point, X]
    /// fit the bound less its reserve, counting a held packet at its length, a delivered one released (partition share)
    /// at 0, and one not yet arrived at the largest payload (it may still come, at up to that size). The position this
    /// member reports (<see cref="FlowPosition"/>) and the stability it vouches for (<see cref="CachedUpTo"/>,
    /// <see cref="HeldClassUpTo"/>) never pass it, so a sender that sends at most the reserve beyond them (the receive
    /// window; with the paper's rate control, its window of packets) never makes this member hold more than the bound.
    /// <para>
    /// Why it never stalls: a packet that does not fit all the same is dropped (<see cref="ByteOverflows"/>), except the
    /// one the stream needs next (<see cref="Delivered"/> + 1), for which held undelivered packets above both it and the
    /// cap are given up, highest first (<see cref="MakeRoom"/>): this member vouched for none of them. What stays is the
    /// packets up to the cap, at most the bound less the reserve (at least one largest payload), and the one needed
    /// next fits beside them. Delivered packets up to the cap go at the purge, which the slowest member's report moves;
    /// the cap then moves too. The prefix sum is kept incrementally (<c>_capCursor</c>, <c>_capBytes</c>): each
    /// sequence number is passed once, so the cap costs O(1) amortized per packet.
    /// </para>
    /// </summary>
    private ulong HeldBytesCap(ulong limit)
    {
        if (_maxBytes == long.MaxValue || !Anchored)
        {
            return limit;
        }

        long budget = _maxBytes - _reserveBytes;
        while (_capCursor < limit)
        {
            ulong next = _capCursor + 1;
            long cost = Has(next) ? _slots[next & _mask].Length : next <= Delivered ? 0 : _missingCost;
            if (_capBytes + cost > budget)
            {
                return _capCursor;
            }

            _capCursor = next;
            _capBytes += cost;
        }

        return limit;
    }

    /// <summary>
    /// Sets the byte bound to <paramref name="maxBytes"/>, with <paramref name="reserveBytes"/> of it kept free for what
    /// the sender may send beyond what this member vouched for: the member's share of
    /// <see cref="RegionOptions.MaxMemberHeldBytes"/> (<see cref="ReceiverStatus"/>, each status tick). It never goes
    /// below what the stream already vouched for (the packets up to the cap) plus room for the packet it needs next, so
    /// that packet always finds room (<see cref="HeldBytesCap"/>, <see cref="MakeRoom"/>): a bound that shrinks comes down
    /// as the purge releases those packets. Packets the sender sent under a larger reserve than the new one may then not
    /// fit: they are dropped and counted, and the NAKs bring them back, as any packet over the bound. No effect on a
    /// stream without a byte bound (a sender's own stream at its member).
    /// </summary>
    public void ShareByteBound(long maxBytes, long reserveBytes)
    {
        if (_maxBytes == long.MaxValue)
        {
            return;
        }

        long bound = Math.Max(maxBytes, 2L * _missingCost);
        if (Anchored)
        {
            bound = Math.Max(bound, _capBytes + _missingCost); // what it vouched for, and room for the packet it needs next
        }

        _maxBytes = bound;
        _reserveBytes = Math.Clamp(reserveBytes, _missingCost, bound - _missingCost);
    }

    /// <summary>Gives up held packets to make room for <paramref name="length"/> more bytes under the byte bound, for the
    /// packet the stream needs next only (<see cref="HeldBytesCap"/>): undelivered ones above it and above the cap,
    /// highest first (none delivered early: it would be delivered again; without FIFO every other packet left room for
    /// this one instead). Bounded by the window.</summary>
    private bool MakeRoom(ulong seq, int length)
    {
        if (!Anchored || seq != Delivered + 1)
        {
            return false;
        }

        ulong floor = Math.Max(seq, _capCursor);
        for (ulong s = _top; s > floor && HeldBytes + length > _maxBytes; s--)
        {
            ref var slot = ref _slots[s & _mask];
            if (slot.Buffer is not null && slot.Seq == s && !slot.Early)
            {
                Release(ref slot);
                Evicted++;
                _drops?.Increment(DropReason.ReceiveBufferFull);
            }
        }

        return HeldBytes + length <= _maxBytes;
    }

    /// <summary>The highest seq the window can take now (anchored streams; before the anchor nothing is asked for).</summary>
    private ulong WindowEnd => Anchored ? _low + _maxHeld - 1 : ulong.MaxValue;

    /// <summary>The highest seq that may be held; above it <see cref="Has"/> is false for every seq.</summary>
    private ulong HighestPossiblyHeld => _count == 0 ? 0 : _top;

    private bool Has(ulong seq)
    {
        ref var slot = ref _slots[seq & _mask];
        return slot.Buffer is not null && slot.Seq == seq;
    }

    /// <summary>Stores a packet known not to be held (a copy, or the <paramref name="lent"/> datagram when it has a
    /// buffer); false when it lies beyond the window.</summary>
    private bool Store(ulong seq, ReadOnlySpan<byte> payload, in LentPacket lent)
    {
        if (!Anchored && _count == 0)
        {
            _low = _top = seq; // before the anchor, the window starts at the lowest packet heard
        }
        else if (seq < _low)
        {
            // Only before the anchor (after it, everything below _low is at or below Delivered): widen the window down.
            if (_top - seq >= _maxHeld)
            {
                return false;
            }

            _low = seq;
        }
        else if (seq - _low >= _maxHeld)
        {
            return false;
        }

        // Without FIFO a packet delivered early cannot be given up (it would be delivered again), so every other packet
        // leaves room for the one the stream needs next (see HeldBytesCap).
        long room = !_fifo && Anchored && seq != Delivered + 1 ? _maxBytes - _missingCost : _maxBytes;
        if (HeldBytes + payload.Length > room && !MakeRoom(seq, payload.Length))
        {
            ByteOverflows++;
            return false;
        }

        _top = Math.Max(_top, seq);
        EnsureCapacity(_top - _low + 1);
        ref var slot = ref _slots[seq & _mask];
        Debug.Assert(slot.Buffer is null, "two held packets in one slot");
        if (Anchored && seq >= _low && seq <= _capCursor)
        {
            _capBytes += payload.Length - (seq <= Delivered ? 0 : _missingCost); // it counted as missing (or released) so far
        }

        if (lent.Buffer is not null)
        {
            _pool.Hold(payload.Length);
            slot = new Slot { Buffer = lent.Buffer, Seq = seq, Offset = lent.Offset, Length = payload.Length, Lender = lent.Lender };
            lent.Lender.Lend(seq, lent.Buffer);
        }
        else
        {
            var buffer = _pool.Rent(payload.Length, counted: true);
            if (_fifo && Anchored && !_blocked && seq == Delivered + 1)
            {
                // Delivered now, from the bytes as they arrived (DeliverInOrder's fresh packet): the copy is kept only
                // for repairs, so it is written past the cache. A packet held behind a gap is copied as usual: it is
                // read when the gap closes, soon, and from memory it cost the delivery more than the copy saved.
                StreamingCopy.Copy(payload, buffer);
            }
            else
            {
                payload.CopyTo(buffer);
            }

            slot = new Slot { Buffer = buffer, Seq = seq, Length = payload.Length };
        }

        _count++;
        HeldBytes += payload.Length;
        PeakHeldBytes = Math.Max(PeakHeldBytes, HeldBytes);
        return true;
    }

    private void Release(ref Slot slot)
    {
        if (Anchored && slot.Seq >= _low && slot.Seq <= _capCursor)
        {
            _capBytes -= slot.Length - (slot.Seq <= Delivered ? 0 : _missingCost); // now released (or missing again)
        }

        if (slot.Lender is { } lender)
        {
            _pool.EndHold(slot.Length);
            lender.GiveBack(slot.Seq, slot.Buffer!);
        }
        else
        {
            _pool.Return(slot.Buffer!, slot.Length);
        }

        HeldBytes -= slot.Length;
        slot = default;
        _count--;
    }

    private void Overflow()
    {
        Overflows++;
        _drops?.Increment(DropReason.ReceiveBufferFull);
    }

    /// <summary>Doubles the ring until it spans <paramref name="span"/> sequence numbers (at most the window's bound,
    /// rounded up to a power of two), moving each held packet to its slot in the larger ring.</summary>
    private void EnsureCapacity(ulong span)
    {
        if (span <= (ulong)_slots.Length)
        {
            return;
        }

        int capacity = _slots.Length;
        while ((ulong)capacity < span)
        {
            capacity *= 2;
        }

        var slots = new Slot[capacity];
        ulong mask = (ulong)capacity - 1;
        foreach (var slot in _slots)
        {
            if (slot.Buffer is not null)
            {
                slots[slot.Seq & mask] = slot;
            }
        }

        _slots = slots;
        _mask = mask;
    }

    /// <summary>How many held packets ahead of the one being delivered a stream prefetches.</summary>
    private const int PrefetchAhead = 2;

    /// <summary>Delivers every held packet that now follows <see cref="Delivered"/> without a gap (skipping those
    /// already delivered early), until a gap or a refusal. <paramref name="fresh"/> is packet
    /// <paramref name="freshSeq"/>'s bytes as they arrived, when it was just stored: it is delivered from there, where
    /// they are in the cache, not from the held copy (<see cref="StreamingCopy"/> wrote that past the cache).</summary>
    private void DeliverInOrder(ulong freshSeq = 0, ReadOnlySpan<byte> fresh = default)
    {
        if (_delivering || _blocked || !Anchored)
        {
            return;
        }

        _delivering = true;
        ulong prefetched = Delivered + 1; // the packets up to here are not prefetched: the first is delivered at once
        try
        {
            while (true)
            {
                ulong next = Delivered + 1;
                ref var slot = ref _slots[next & _mask];
                if (slot.Buffer is null || slot.Seq != next)
                {
                    return;
                }

                bool early = slot.Early;
                Delivered = next; // first: a callback that throws does not get the packet again
                TakenBytes += (ulong)slot.Length;
                if (next <= _skipThrough && !early)
                {
                    Skipped++;
                    _skip?.Invoke(this, next, slot.Payload);
                    ReleaseUnlessShared(next);
                    continue;
                }

                for (; prefetched < next + PrefetchAhead; prefetched++)
                {
                    ref var ahead = ref _slots[(prefetched + 1) & _mask];
                    if (ahead.Buffer is null || ahead.Seq != prefetched + 1)
                    {
                        break;
                    }

                    CacheHint.Prefetch(ahead.Payload); // held packets go cold (docs/qsm.md, "Delivering held packets")
                }

                if (!early && !_deliver(this, next, next == freshSeq ? fresh : slot.Payload))
                {
                    if (Lossy)
                    {
                        Skipped++;
                        _skip?.Invoke(this, next, _slots[next & _mask].Payload);
                        ReleaseUnlessShared(next);
                        continue;
                    }

                    Delivered = next - 1;
                    TakenBytes -= (ulong)_slots[next & _mask].Length;
                    _blocked = true;
                    return;
                }

                _slots[next & _mask].Early = false; // re-read: a callback may have grown the ring
                ReleaseUnlessShared(next);
            }
        }
        finally
        {
            _delivering = false;
        }
    }

    /// <summary>With the partition share: releases a delivered packet unless this member keeps it for the others (its
    /// partition's class, or an old class while a view change settles) or the sender's cached point has not passed it
    /// (<see cref="OnCached"/>).</summary>
    private void ReleaseUnlessShared(ulong seq)
    {
        if (_share is null || seq > CachedSeen || _share.Keeps(this, seq))
        {
            return; // above the cached point it waits for OnCached: its caching partition may not hold it yet
        }

        ref var slot = ref _slots[seq & _mask];
        if (slot.Buffer is not null && slot.Seq == seq)
        {
            Release(ref slot);
            ReleasedAtDelivery++;
        }
    }

    /// <summary>Without FIFO: delivers every held packet above <see cref="Delivered"/> not yet delivered, in seq order.</summary>
    private void DeliverHeldEarly()
    {
        if (_fifo || !Anchored || _count == 0)
        {
            return;
        }

        for (ulong seq = Delivered + 1; seq <= _top && !_blocked; seq++)
        {
            if (Has(seq))
            {
                DeliverEarly(seq);
            }
        }
    }

    private void DeliverEarly(ulong seq)
    {
        if (_blocked)
        {
            return;
        }

        ref var slot = ref _slots[seq & _mask];
        if (slot.Early || seq <= _skipThrough)
        {
            return; // delivered already, or to be passed over in order
        }

        slot.Early = true; // first: a callback that throws does not get the packet again
        if (!_deliver(this, seq, slot.Payload))
        {
            if (Lossy)
            {
                Skipped++;
                _skip?.Invoke(this, seq, _slots[seq & _mask].Payload);
                return; // passed over: stays marked, so it is not offered again
            }

            _slots[seq & _mask].Early = false;
            _blocked = true;
        }
    }

    private static ulong FirstOfClass(ulong from, ulong p, ulong residue)
    {
        ulong r = from % p;
        return r <= residue ? from + (residue - r) : from + (p - r) + residue;
    }

    /// <summary>The index (seq / p) of the highest seq ≡ residue (mod p) at or below <paramref name="upTo"/>, which the
    /// caller knows exists.</summary>
    private static ulong LastIndexOfClass(ulong upTo, ulong p, ulong residue) => (upTo - residue) / p;

    private struct Slot
    {
        public byte[]? Buffer;
        public ulong Seq;
        public int Offset; // where the payload starts: 0 in a pool buffer, the header's size in a lent datagram
        public int Length;
        public bool Early; // without FIFO: delivered on arrival, above Delivered
        public IPacketLender? Lender; // the buffer is the sender's datagram, given back at release, not to the pool

        public readonly ReadOnlySpan<byte> Payload => Buffer.AsSpan(Offset, Length);
    }
}
