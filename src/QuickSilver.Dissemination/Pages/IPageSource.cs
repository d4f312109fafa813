namespace QuickSilver.Dissemination.Pages;

/// <summary>Where the server reads page bytes (the files on disk, or memory in the simulation).</summary>
public interface IPageSource
{
    /// <summary>Reads <paramref name="destination"/>.Length bytes of file <paramref name="file"/> (catalog index) at
    /// <paramref name="offset"/>.</summary>
    void Read(int file, long offset, Span<byte> destination);
}

/// <summary>Where a client keeps what it received: pages written as they decode, whole files verified at the end.
/// A store outlives the client object, so a restarted client keeps the pages already written (resume).</summary>
public interface IPageStore
{
    /// <summary>Called once per file when the file list arrives, before <see cref="HasPage"/>: the page layout in use.</summary>
    void Prepare(FileEntry file, PageOptions pages)
    {
    }

    /// <summary>Whether page <paramref name="page"/> of <paramref name="file"/> is already written.</summary>
    bool HasPage(FileEntry file, int page);

    /// <summary>Writes one decoded page at its offset and records it as held.</summary>
    void WritePage(FileEntry file, int page, long offset, ReadOnlySpan<byte> data);

    /// <summary>Whether this store can keep the packets of an incomplete page (<see cref="WritePartial"/>,
    /// <see cref="ReadPartial"/>). A client whose store cannot drops its oldest incomplete page past
    /// <c>ClientOptions.MaxPartialPages</c> and NAKs it again as wholly lost.</summary>
    bool CanHoldPartials => false;

    /// <summary>Writes some received bytes of a page that is not complete yet at their offset, without recording the
    /// page as held (a resumed client does not trust them).</summary>
    /// <exception cref="NotSupportedException">The store cannot (<see cref="CanHoldPartials"/> is false).</exception>
    void WritePartial(FileEntry file, long offset, ReadOnlySpan<byte> data) => throw new NotSupportedException($"{GetType().Name} cannot hold incomplete pages.");

    /// <summary>Reads back bytes written by <see cref="WritePartial"/>; bytes never written read as zero.</summary>
    /// <exception cref="NotSupportedException">The store cannot (<see cref="CanHoldPartials"/> is false).</exception>
    void ReadPartial(FileEntry file, long offset, Span<byte> destination) => throw new NotSupportedException($"{GetType().Name} cannot hold incomplete pages.");

    /// <summary>Computes the SHA-256 of the whole file as stored and compares it with the list's.</summary>
    bool Verify(FileEntry file);

    /// <summary>Forgets every page of <paramref name="file"/> (after a failed verification).</summary>
    void Discard(FileEntry file);
}

/// <summary>An in-memory file set for the server (tests and simulation).</summary>
public sealed class MemoryPageSource : IPageSource
{
    private readonly List<byte[]> _contents = new();

    public MemoryPageSource(FileCatalog catalog) => Catalog = catalog ?? throw new ArgumentNullException(nameof(catalog));

    public FileCatalog Catalog { get; }

    public int Add(string name, byte[] content)
    {
        ArgumentNullException.ThrowIfNull(content);
        int index = Catalog.Add(name, content);
        while (_contents.Count <= index)
        {
            _contents.Add(Array.Empty<byte>());
        }

        _contents[index] = content;
        return index;
    }

    public void Read(int file, long offset, Span<byte> destination) => _contents[file].AsSpan((int)offset, destination.Length).CopyTo(destination);
}

/// <summary>An in-memory "disk" for clients (tests and simulation): survives a client restart, as files on disk do.</summary>
public sealed class MemoryPageStore : IPageStore
{
    private readonly Dictionary<string, (byte[] Data, HashSet<int> Pages)> _files = new(StringComparer.Ordinal);

    /// <summary>Pages written, over all files (a resumed client must not write again what it had).</summary>
    public long PagesWritten { get; private set; }

    public bool CanHoldPartials => true;

    public void WritePartial(FileEntry file, long offset, ReadOnlySpan<byte> data) => data.CopyTo(Data(file).AsSpan((int)offset));

    public void ReadPartial(FileEntry file, long offset, Span<byte> destination) => Data(file).AsSpan((int)offset, destination.Length).CopyTo(destination);

    private byte[] Data(FileEntry file)
    {
        if (!_files.TryGetValue(file.Name, out var f))
        {
            f = (new byte[file.Size], new HashSet<int>());
            _files[file.Name] = f;
        }

        return f.Data;
    }

    public bool HasPage(FileEntry file, int page) => _files.TryGetValue(file.Name, out var f) && f.Pages.Contains(page);

    public void WritePage(FileEntry file, int page, long offset, ReadOnlySpan<byte> data)
    {
        data.CopyTo(Data(file).AsSpan((int)offset));
        _files[file.Name].Pages.Add(page);
        PagesWritten++;
    }

    public bool Verify(FileEntry file)
    {
        var data = _files.TryGetValue(file.Name, out var f) ? f.Data : Array.Empty<byte>();
        return System.Security.Cryptography.SHA256.HashData(data).AsSpan().SequenceEqual(file.Sha256);
    }

    public void Discard(FileEntry file) => _files.Remove(file.Name);

    /// <summary>The stored bytes of <paramref name="name"/>, or null.</summary>
    public byte[]? Contents(string name) => _files.TryGetValue(name, out var f) ? f.Data : null;

    /// <summary>Overwrites one stored byte (tests of whole-file verification).</summary>
    public void Corrupt(string name, int offset) => _files[name].Data[offset] ^= 0xFF;
}
