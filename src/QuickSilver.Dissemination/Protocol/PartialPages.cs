using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Pages;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>
/// The pages a client holds some but not all packets of, kept across transmissions so that a repair-only
/// retransmission (the server sends only as many packets as the NAK said were lost) completes them.
/// </summary>
/// <remarks>
/// <para>Two tiers. At most <see cref="ClientOptions.MaxPartialPages"/> pages are <b>in memory</b>, with a buffer of
/// the whole page for its source packets and one for repair packets: the pages being sent now. Past that bound the
/// oldest is <b>spilled</b> to the store (when it can hold incomplete pages, <see cref="IPageStore.CanHoldPartials"/>):
/// its source packets are written at their place in the file (not marked as held, so a resumed client ignores them),
/// and only which packets it has and its repair packets stay in memory. Later packets of a spilled page go the same
/// way, and when it has k packets its source packets are read back, decoded and written as a page.</para>
/// <para>Why: a short page waits for its NAK's retransmission for as long as the scheduler defers it (with R/Q, a page
/// one client NAKed ranks below pages every client still wants, so until the end of the whole set). Dropping it then
/// (the behaviour before spilling) turned each repair-only retransmission into a NAK for the whole page, and about
/// 44 % of pages needed a NAK per client at 2 % loss where 16 % do (docs/dissemination.md, "Loss").</para>
/// <para>Spilled pages are bounded too: <see cref="ClientOptions.MaxSpilledPages"/> pages and
/// <see cref="ClientOptions.MaxSpilledRepairBytes"/> bytes of repair packets; past either, the oldest spilled page is
/// dropped (<see cref="ClientCounters.PartialsEvicted"/>) and its next NAK asks for the whole page.</para>
/// </remarks>
internal sealed class PartialPages
{
    private readonly ClientOptions _options;
    private readonly PageOptions _pages;
    private readonly IPageStore _store;
    private readonly ClientCounters _counters;
    private readonly Dictionary<(ulong FileId, ulong Offset), Partial> _byKey = new();
    private readonly LinkedList<Partial> _inMemory = new();
    private readonly LinkedList<Partial> _spilled = new();
    private readonly Stack<Partial> _pool = new();
    private readonly Dictionary<int, ReedSolomon> _codes = new();
    private byte[]? _scratch;
    private long _spilledRepairBytes;

    public PartialPages(ClientOptions options, PageOptions pages, IPageStore store, ClientCounters counters)
    {
        _options = options;
        _pages = pages;
        _store = store;
        _counters = counters;
    }

    /// <summary>Incomplete pages in memory, and spilled.</summary>
    public (int InMemory, int Spilled) Count => (_inMemory.Count, _spilled.Count);

    /// <summary>Bytes of repair packets kept for spilled pages.</summary>
    public long SpilledRepairBytes => _spilledRepairBytes;

    /// <summary>Packets held for the page at <paramref name="offset"/> of <paramref name="fileId"/> (0 if none).</summary>
    public int Held(ulong fileId, ulong offset) => _byKey.TryGetValue((fileId, offset), out var p) ? p.SourceHeld + p.RepairHeld : 0;

    /// <summary>Takes packet <paramref name="index"/> of a page this client lacks. Returns true when it was new and the
    /// page now has k packets: the page is then decoded, written to the store and forgotten here.</summary>
    public bool Receive(FileEntry file, int page, int k, int index, ReadOnlySpan<byte> body)
    {
        ulong offset = (ulong)page * (ulong)_pages.PageSize;
        var partial = Find(file, offset, k);
        if (partial.Seen[index])
        {
            return false;
        }

        partial.Seen[index] = true;
        _counters.UsefulPackets++;
        int payload = _pages.PacketPayload;
        if (index < k)
        {
            partial.Received[index] = true;
            partial.SourceHeld++;
            if (partial.Spilled)
            {
                WriteSourcePacket(partial, index, body);
            }
            else
            {
                body.CopyTo(partial.Source.AsSpan(index * payload));
            }
        }
        else if (partial.RepairHeld < k)
        {
            if (partial.Spilled)
            {
                GrowSpilledRepair(partial, partial.RepairHeld + 1);
            }

            body.CopyTo(partial.Repair.AsSpan(partial.RepairHeld * payload));
            partial.RepairIndices[partial.RepairHeld++] = index - k;
        }

        if (partial.SourceHeld + partial.RepairHeld < k)
        {
            return false;
        }

        Complete(partial);
        return true;
    }

    private Partial Find(FileEntry file, ulong offset, int k)
    {
        if (_byKey.TryGetValue((file.FileId, offset), out var partial))
        {
            return partial;
        }

        while (_inMemory.Count >= _options.MaxPartialPages)
        {
            Spill(_inMemory.First!.Value);
        }

        partial = _pool.Count > 0 ? _pool.Pop() : new Partial(_pages.PacketsPerPage, _pages.PacketPayload);
        partial.Reset(file, offset, k, _pages.PacketsPerPage * _pages.PacketPayload);
        _byKey.Add((file.FileId, offset), partial);
        partial.Node = _inMemory.AddLast(partial);
        return partial;
    }

    /// <summary>Moves the oldest in-memory page to the store, or drops it where the store cannot hold it.</summary>
    private void Spill(Partial partial)
    {
        if (!_store.CanHoldPartials)
        {
            _counters.PartialsEvicted++;
            Remove(partial);
            return;
        }

        _inMemory.Remove(partial.Node!);
        int payload = _pages.PacketPayload;
        for (int i = 0; i < partial.K; i++)
        {
            if (partial.Received[i])
            {
                WriteSourcePacket(partial, i, partial.Source.AsSpan(i * payload, payload));
            }
        }

        // The in-memory buffers go back to the pool with a fresh object; the spilled page keeps only what it needs.
        var spilled = new Partial(partial, payload);
        _byKey[(partial.File.FileId, partial.Offset)] = spilled;
        _spilledRepairBytes += spilled.Repair.Length;
        spilled.Node = _spilled.AddLast(spilled);
        _counters.PartialsSpilled++;
        partial.Node = null;
        _pool.Push(partial);
        TrimSpilled();
    }

    private void TrimSpilled()
    {
        while (_spilled.Count > _options.MaxSpilledPages || (_spilledRepairBytes > _options.MaxSpilledRepairBytes && _spilled.Count > 0))
        {
            _counters.PartialsEvicted++;
            Remove(_spilled.First!.Value);
        }
    }

    private void GrowSpilledRepair(Partial partial, int packets)
    {
        int payload = _pages.PacketPayload;
        if (partial.Repair.Length >= packets * payload)
        {
            return;
        }

        var larger = new byte[Math.Min(partial.K, Math.Max(packets, partial.Repair.Length / payload * 2)) * payload];
        partial.Repair.AsSpan(0, partial.RepairHeld * payload).CopyTo(larger);
        _spilledRepairBytes += larger.Length - partial.Repair.Length;
        partial.Repair = larger;
        TrimSpilledExcept(partial);
    }

    private void TrimSpilledExcept(Partial keep)
    {
        while (_spilledRepairBytes > _options.MaxSpilledRepairBytes && _spilled.First is { } first && first.Value != keep)
        {
            _counters.PartialsEvicted++;
            Remove(first.Value);
        }
    }

    private void WriteSourcePacket(Partial partial, int index, ReadOnlySpan<byte> body)
    {
        int payload = _pages.PacketPayload;
        int length = Math.Min(payload, partial.PageLength - (index * payload));
        _store.WritePartial(partial.File, (long)partial.Offset + ((long)index * payload), body[..length]);
    }

    private void Complete(Partial partial)
    {
        int payload = _pages.PacketPayload;
        int k = partial.K;
        Span<byte> source;
        if (partial.Spilled)
        {
            _scratch ??= new byte[_pages.PacketsPerPage * payload];
            source = _scratch.AsSpan(0, k * payload);
            source.Clear();
            _store.ReadPartial(partial.File, (long)partial.Offset, source[..partial.PageLength]);
        }
        else
        {
            source = partial.Source.AsSpan(0, k * payload);
        }

        if (partial.SourceHeld < k)
        {
            if (!_codes.TryGetValue(k, out var code))
            {
                _codes[k] = code = new ReedSolomon(k, ReedSolomon.MaxPackets);
            }

            code.Decode(source, partial.Received.AsSpan(0, k), partial.Repair.AsSpan(0, partial.RepairHeld * payload), partial.RepairIndices.AsSpan(0, partial.RepairHeld));
            _counters.PagesRebuilt++;
        }

        _store.WritePage(partial.File, (int)(partial.Offset / (ulong)_pages.PageSize), (long)partial.Offset, source[..partial.PageLength]);
        Remove(partial);
    }

    private void Remove(Partial partial)
    {
        _byKey.Remove((partial.File.FileId, partial.Offset));
        if (partial.Spilled)
        {
            _spilled.Remove(partial.Node!);
            _spilledRepairBytes -= partial.Repair.Length;
        }
        else
        {
            _inMemory.Remove(partial.Node!);
            _pool.Push(partial);
        }

        partial.Node = null;
    }

    /// <summary>A page being assembled.</summary>
    private sealed class Partial
    {
        /// <summary>An in-memory page: source packets in place, repair packets beside them.</summary>
        public Partial(int maxK, int payload)
        {
            Source = new byte[maxK * payload];
            Repair = new byte[maxK * payload];
            Received = new bool[maxK];
            RepairIndices = new int[maxK];
            Seen = new bool[ReedSolomon.MaxPackets];
            File = null!;
        }

        /// <summary>The spilled copy of <paramref name="from"/>: its source packets are in the store; which packets
        /// it has and its repair packets (in an array of exactly their size) stay.</summary>
        public Partial(Partial from, int payload)
        {
            Spilled = true;
            Source = Array.Empty<byte>();
            Repair = from.Repair.AsSpan(0, from.RepairHeld * payload).ToArray();
            Received = from.Received.AsSpan(0, from.K).ToArray();
            RepairIndices = from.RepairIndices.AsSpan(0, from.K).ToArray();
            Seen = (bool[])from.Seen.Clone();
            File = from.File;
            Offset = from.Offset;
            K = from.K;
            PageLength = from.PageLength;
            SourceHeld = from.SourceHeld;
            RepairHeld = from.RepairHeld;
        }

        public bool Spilled { get; }
        public byte[] Source { get; }
        public byte[] Repair { get; set; }
        public bool[] Received { get; }
        public int[] RepairIndices { get; }
        public bool[] Seen { get; }
        public FileEntry File { get; private set; }
        public ulong Offset { get; private set; }
        public int K { get; private set; }
        public int PageLength { get; private set; }
        public int SourceHeld { get; set; }
        public int RepairHeld { get; set; }
        public LinkedListNode<Partial>? Node { get; set; }

        public void Reset(FileEntry file, ulong offset, int k, int maxLength)
        {
            Array.Clear(Received);
            Array.Clear(Seen);
            File = file;
            Offset = offset;
            K = k;
            PageLength = (int)Math.Min(maxLength, file.Size - (long)offset);
            SourceHeld = 0;
            RepairHeld = 0;
        }
    }
}
