using QuickSilver.Core.Io;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// One sender's packets as seen by one region member: delivered in order up to <see cref="Delivered"/>, held beyond
/// it until the gap closes (or, without FIFO, delivered on arrival and still held), and kept after delivery until the
/// region-wide purge point (every member has them) to serve pushes and pulls. Keeping every packet, not only the partition's share (seq mod p), means a view change that
/// redraws the partitions never strands a packet; the memory it costs is bounded by the purge lag, about two token
/// rounds of traffic (docs/qsm.md).
/// </summary>
internal sealed class SenderStream
{
    private readonly Dictionary<ulong, byte[]> _held = new();
    private readonly bool _fifo;
    private readonly HashSet<ulong> _early = new(); // without FIFO: held packets above Delivered already delivered

    public SenderStream(uint sender, bool fifo = true)
    {
        Sender = sender;
        _fifo = fifo;
    }

    public uint Sender { get; }

    /// <summary>Where the sender's NAKs and ACKs go (learned from its datagrams).</summary>
    public NetAddress Address { get; set; }

    /// <summary>Every packet up to here has been received and delivered.</summary>
    public ulong Delivered { get; private set; }

    public ulong MaxSeen { get; private set; }

    public int HeldCount => _held.Count;

    /// <summary>Where the sender's first packet heard by this member says its stream starts for this member, before the
    /// region's purge point is known (see <see cref="Anchor"/>).</summary>
    public ulong? Candidate { get; set; }

    /// <summary>The seq this member's stream started after (0 unless it joined mid-stream).</summary>
    public ulong AnchoredAt { get; private set; }

    /// <summary>Whether this member knows where the sender's stream starts for it (see <see cref="Anchor"/>).</summary>
    public bool Anchored { get; private set; }

    /// <summary>Sets the point after which this member is owed the sender's packets (0 for a member present from the
    /// start; later for one that joined mid-stream). Packets held below it are discarded, and any that now follow in
    /// order are delivered.</summary>
    public void Anchor(ulong start, Action<SenderStream, ulong, byte[]> deliver)
    {
        if (Anchored)
        {
            return;
        }

        Anchored = true;
        AnchoredAt = start;
        Delivered = start;
        MaxSeen = Math.Max(MaxSeen, start);
        foreach (var seq in _held.Keys.Where(k => k <= start).ToList())
        {
            _held.Remove(seq);
        }

        DeliverInOrder(deliver);
        if (!_fifo)
        {
            foreach (var seq in _held.Keys.Where(k => k > Delivered).Order().ToList())
            {
                DeliverEarly(seq, _held[seq], deliver);
            }
        }
    }

    /// <summary>Delivers every held packet that now follows <see cref="Delivered"/> without a gap (skipping those
    /// already delivered early).</summary>
    private void DeliverInOrder(Action<SenderStream, ulong, byte[]> deliver)
    {
        while (Anchored && _held.TryGetValue(Delivered + 1, out var next))
        {
            Delivered++;
            if (_early.Count == 0 || !_early.Remove(Delivered))
            {
                deliver(this, Delivered, next);
            }
        }
    }

    private void DeliverEarly(ulong seq, byte[] payload, Action<SenderStream, ulong, byte[]> deliver)
    {
        if (_early.Add(seq))
        {
            deliver(this, seq, payload);
        }
    }

    public bool Received(ulong seq) => seq <= Delivered ? seq > 0 : _held.ContainsKey(seq);

    public bool TryGet(ulong seq, out byte[] payload) => _held.TryGetValue(seq, out payload!);

    /// <summary>Stores a new packet; returns false for a duplicate. <paramref name="deliver"/> is called for each
    /// packet that becomes deliverable, in order.</summary>
    public bool Add(ulong seq, ReadOnlySpan<byte> payload, Action<SenderStream, ulong, byte[]> deliver)
    {
        if (Received(seq))
        {
            return false;
        }

        var copy = payload.ToArray();
        _held[seq] = copy;
        MaxSeen = Math.Max(MaxSeen, seq);
        if (!_fifo && Anchored && seq > Delivered + 1)
        {
            DeliverEarly(seq, copy, deliver); // no order asked for: it need not wait for the gap below it
        }

        DeliverInOrder(deliver);
        return true;
    }

    /// <summary>Indices (seq / p) of the packets up to <paramref name="cutoff"/> this member's partition caches and this
    /// member lacks; beyond the set's range bound the nearest ranges merge (a superset, see NakSet.AppendCoarsening).</summary>
    public void CachedMissing(ulong cutoff, int partitions, int myPartition, NakSet into)
    {
        into.Clear();
        ulong p = (ulong)partitions;
        for (ulong seq = FirstOfClass(Delivered + 1, p, (ulong)myPartition); seq <= cutoff; seq += p)
        {
            if (!_held.ContainsKey(seq))
            {
                into.AppendCoarsening(seq / p, seq / p);
            }
        }
    }

    /// <summary>The highest X, at most <paramref name="horizon"/>, such that every packet up to X that this member caches
    /// has arrived (its contribution to region-wide stability). <paramref name="horizon"/> is the highest seq the region
    /// is known to have seen (the token's cutoff or this member's own maximum): a member that holds all of its class up to
    /// there vouches for the whole range, even where it missed other partitions' packets above its own last one.
    /// Stopping at its own <see cref="MaxSeen"/> instead would let a member that missed the sender's last packets hold
    /// the region's stability below them, so no one would ever pull them from their caching partition (a stall once the
    /// sender is gone).</summary>
    public ulong CachedUpTo(int partitions, int myPartition, ulong horizon = 0)
    {
        ulong p = (ulong)partitions;
        ulong limit = Math.Max(horizon, MaxSeen);
        for (ulong seq = FirstOfClass(Delivered + 1, p, (ulong)myPartition); seq <= limit; seq += p)
        {
            if (!_held.ContainsKey(seq))
            {
                return seq - 1;
            }
        }

        return limit;
    }

    /// <summary>Packets up to <paramref name="limit"/> cached by other partitions that this member lacks, as index sets
    /// per partition (the pull requests to those partitions' leaders).</summary>
    public void OtherMissing(ulong limit, int partitions, int myPartition, NakSet[] perPartition)
    {
        foreach (var set in perPartition)
        {
            set.Clear();
        }

        ulong p = (ulong)partitions;
        for (ulong seq = Delivered + 1; seq <= limit; seq++)
        {
            int partition = (int)(seq % p);
            if (partition != myPartition && !_held.ContainsKey(seq))
            {
                perPartition[partition].AppendCoarsening(seq / p, seq / p);
            }
        }
    }

    /// <summary>Drops cached packets every member has received.</summary>
    public void Purge(ulong upTo)
    {
        if (upTo == 0 || _held.Count == 0)
        {
            return;
        }

        List<ulong>? drop = null;
        foreach (var seq in _held.Keys)
        {
            if (seq <= upTo && seq <= Delivered)
            {
                (drop ??= new()).Add(seq);
            }
        }

        if (drop is not null)
        {
            foreach (var seq in drop)
            {
                _held.Remove(seq);
            }
        }
    }

    private static ulong FirstOfClass(ulong from, ulong p, ulong residue)
    {
        ulong r = from % p;
        return r <= residue ? from + (residue - r) : from + (p - r) + residue;
    }
}
