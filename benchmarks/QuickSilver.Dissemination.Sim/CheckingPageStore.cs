using QuickSilver.Dissemination.Pages;

namespace QuickSilver.Dissemination.Sim;

/// <summary>
/// A client store for large simulated runs: instead of keeping each client's copy (1,000 clients × the whole set
/// would not fit), it compares every written page with the server's bytes and keeps only which pages it holds.
/// <see cref="Verify"/> holds when every page was written and every write matched. (Byte-identical whole files with
/// SHA-256 verification are what the tests check, with <see cref="MemoryPageStore"/>.)
/// </summary>
internal sealed class CheckingPageStore(MemoryPageSource source) : IPageStore
{
    private readonly Dictionary<string, HashSet<int>> _pages = new(StringComparer.Ordinal);
    private readonly Dictionary<(string, long), byte[]> _partial = new();
    private byte[] _scratch = new byte[PageOptions.MaxPageSize];

    public long Mismatches { get; private set; }

    /// <summary>Incomplete pages are kept whole in memory (only where a client spills them: lossy runs).</summary>
    public bool CanHoldPartials => true;

    public void WritePartial(FileEntry file, long offset, ReadOnlySpan<byte> data)
    {
        int size = source.Catalog.Pages.PageSize;
        var key = (file.Name, offset / size);
        if (!_partial.TryGetValue(key, out var page))
        {
            _partial[key] = page = new byte[size];
        }

        data.CopyTo(page.AsSpan((int)(offset % size)));
    }

    public void ReadPartial(FileEntry file, long offset, Span<byte> destination)
    {
        int size = source.Catalog.Pages.PageSize;
        if (_partial.TryGetValue((file.Name, offset / size), out var page))
        {
            page.AsSpan((int)(offset % size), destination.Length).CopyTo(destination);
        }
        else
        {
            destination.Clear();
        }
    }

    public bool HasPage(FileEntry file, int page) => _pages.TryGetValue(file.Name, out var set) && set.Contains(page);

    public void WritePage(FileEntry file, int page, long offset, ReadOnlySpan<byte> data)
    {
        source.Catalog.TryFind(file.Name, out int index);
        if (_scratch.Length < data.Length)
        {
            _scratch = new byte[data.Length];
        }

        source.Read(index, offset, _scratch.AsSpan(0, data.Length));
        if (!data.SequenceEqual(_scratch.AsSpan(0, data.Length)))
        {
            Mismatches++;
        }

        if (!_pages.TryGetValue(file.Name, out var set))
        {
            _pages[file.Name] = set = new HashSet<int>();
        }

        set.Add(page);
        _partial.Remove((file.Name, page));
    }

    public bool Verify(FileEntry file) => Mismatches == 0 && _pages.TryGetValue(file.Name, out var set) && set.Count == (int)source.Catalog.Pages.PageCount(file.Size);

    public void Discard(FileEntry file) => _pages.Remove(file.Name);
}
