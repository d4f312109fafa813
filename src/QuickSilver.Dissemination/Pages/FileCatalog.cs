using System.Security.Cryptography;

namespace QuickSilver.Dissemination.Pages;

/// <summary>
/// The server's file list: each file's entry and the range of item numbers its pages take. Items are numbered
/// densely (file 0's pages first), which is what the schedulers index; on the wire a page is its <see cref="PageId"/>.
/// Two names with the same 64-bit id are refused (the seed's "cannot be successfully shared" case), naming both.
/// </summary>
public sealed class FileCatalog
{
    private readonly List<FileEntry> _files = new();
    private readonly List<long> _firstItem = new();
    private readonly Dictionary<string, int> _byName = new(StringComparer.Ordinal);
    private readonly Dictionary<ulong, int> _byId = new();

    public FileCatalog(PageOptions pages)
    {
        ArgumentNullException.ThrowIfNull(pages);
        pages.Validate();
        Pages = pages;
    }

    public PageOptions Pages { get; }

    public IReadOnlyList<FileEntry> Files => _files;

    /// <summary>Items (pages) over all files.</summary>
    public int ItemCount { get; private set; }

    /// <summary>Adds a file whose content <paramref name="sha256"/> the caller computed; returns its index.</summary>
    public int Add(string name, long size, byte[] sha256)
    {
        var entry = new FileEntry(name, size, sha256);
        if (_byName.ContainsKey(name))
        {
            throw new ArgumentException($"The file list already holds '{name}'.", nameof(name));
        }

        if (_byId.TryGetValue(entry.FileId, out int other))
        {
            throw new ArgumentException($"'{name}' and '{_files[other].Name}' have the same 64-bit file id {entry.FileId:x16}; rename one.", nameof(name));
        }

        long pages = Pages.PageCount(size);
        if (ItemCount + pages > int.MaxValue / 2)
        {
            throw new ArgumentException($"'{name}' takes the file list past {int.MaxValue / 2} pages.", nameof(size));
        }

        int index = _files.Count;
        _files.Add(entry);
        _firstItem.Add(ItemCount);
        _byName.Add(name, index);
        _byId.Add(entry.FileId, index);
        ItemCount += (int)pages;
        return index;
    }

    /// <summary>Adds a file held in memory (tests, simulation), hashing it.</summary>
    public int Add(string name, ReadOnlySpan<byte> content) => Add(name, content.Length, SHA256.HashData(content));

    public bool TryFind(string name, out int file) => _byName.TryGetValue(name, out file);

    public bool TryFindId(ulong fileId, out int file) => _byId.TryGetValue(fileId, out file);

    public int PageCount(int file) => (int)Pages.PageCount(_files[file].Size);

    public int FirstItem(int file) => (int)_firstItem[file];

    /// <summary>The file and page of item <paramref name="item"/>.</summary>
    public (int File, int Page) Locate(int item)
    {
        int lo = 0, hi = _files.Count - 1;
        while (lo < hi)
        {
            int mid = (lo + hi + 1) / 2;
            if (_firstItem[mid] <= item)
            {
                lo = mid;
            }
            else
            {
                hi = mid - 1;
            }
        }

        return (lo, item - (int)_firstItem[lo]);
    }
}
