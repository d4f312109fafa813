using System.Security.Cryptography;
using Microsoft.Win32.SafeHandles;
using QuickSilver.Dissemination.Pages;

namespace QuickSilver.Dissemination.Hosting;

/// <summary>The server's files on disk: every regular file under a directory, named by its path relative to it with
/// '/' separators, hashed (SHA-256, streamed) at start-up and read page by page with <see cref="RandomAccess"/>.</summary>
public sealed class DiskPageSource : IPageSource, IDisposable
{
    private readonly List<string> _paths = new();
    private readonly Dictionary<int, SafeFileHandle> _handles = new();

    private DiskPageSource(FileCatalog catalog) => Catalog = catalog;

    public FileCatalog Catalog { get; }

    public static async Task<DiskPageSource> ScanAsync(string directory, PageOptions pages, CancellationToken cancellationToken)
    {
        if (!Directory.Exists(directory))
        {
            throw new ArgumentException($"DIR: '{directory}' is not a directory.", nameof(directory));
        }

        var source = new DiskPageSource(new FileCatalog(pages));
        string root = Path.GetFullPath(directory);
        foreach (var path in Directory.EnumerateFiles(root, "*", SearchOption.AllDirectories).Order(StringComparer.Ordinal))
        {
            string name = Path.GetRelativePath(root, path).Replace(Path.DirectorySeparatorChar, '/');
            var stream = File.OpenRead(path);
            await using (stream.ConfigureAwait(false))
            {
                byte[] sha = await SHA256.HashDataAsync(stream, cancellationToken).ConfigureAwait(false);
                source.Catalog.Add(name, stream.Length, sha);
                source._paths.Add(path);
            }
        }

        return source;
    }

    public void Read(int file, long offset, Span<byte> destination)
    {
        if (!_handles.TryGetValue(file, out var handle))
        {
            _handles[file] = handle = File.OpenHandle(_paths[file], FileMode.Open, FileAccess.Read, FileShare.Read);
        }

        int done = 0;
        while (done < destination.Length)
        {
            int n = RandomAccess.Read(handle, destination[done..], offset + done);
            if (n <= 0)
            {
                throw new IOException($"{_paths[file]} is shorter than when it was listed.");
            }

            done += n;
        }
    }

    public void Dispose()
    {
        foreach (var handle in _handles.Values)
        {
            handle.Dispose();
        }

        _handles.Clear();
    }
}

/// <summary>
/// A client's files on disk. A file being received is <c>NAME.part</c>, written page by page with
/// <see cref="RandomAccess"/> (never held whole in memory), beside <c>NAME.qsparts</c>: the file's size, SHA-256 and
/// page size, then one byte per page, set when that page is written, so a restarted client keeps what it has (resume). When the
/// whole file verifies, the .part is renamed to NAME and the .qsparts deleted. A complete NAME already there that
/// verifies counts as held.
/// </summary>
public sealed class DiskPageStore : IPageStore, IDisposable
{
    private const int Header = 44;
    private readonly string _root;
    private readonly Dictionary<string, Open> _open = new(StringComparer.Ordinal);
    private readonly Dictionary<string, int> _pageSize = new(StringComparer.Ordinal);

    public DiskPageStore(string directory)
    {
        _root = Path.GetFullPath(directory);
        Directory.CreateDirectory(_root);
    }

    /// <summary>The local path of <paramref name="name"/>; names that would leave the directory are refused.</summary>
    public string PathOf(string name)
    {
        string path = Path.GetFullPath(Path.Combine(_root, name));
        if (!path.StartsWith(_root + Path.DirectorySeparatorChar, StringComparison.Ordinal))
        {
            throw new ArgumentException($"'{name}' would be written outside {_root}.", nameof(name));
        }

        return path;
    }

    public void Prepare(FileEntry file, PageOptions pages) => _pageSize[file.Name] = pages.PageSize;

    public bool HasPage(FileEntry file, int page) => Get(file).Pages[page] != 0;

    public bool CanHoldPartials => true;

    /// <summary>Writes received bytes of an incomplete page into the .part file at their place (the page's mark stays 0).</summary>
    public void WritePartial(FileEntry file, long offset, ReadOnlySpan<byte> data) => RandomAccess.Write(DataHandle(Get(file)), data, offset);

    /// <summary>Reads bytes of the .part file; past its end they read as zero.</summary>
    public void ReadPartial(FileEntry file, long offset, Span<byte> destination)
    {
        var handle = DataHandle(Get(file));
        int done = 0;
        while (done < destination.Length)
        {
            int n = RandomAccess.Read(handle, destination[done..], offset + done);
            if (n <= 0)
            {
                destination[done..].Clear();
                break;
            }

            done += n;
        }
    }

    private static SafeFileHandle DataHandle(Open f) => f.Data ??= File.OpenHandle(f.Path + ".part", FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.Read);

    public void WritePage(FileEntry file, int page, long offset, ReadOnlySpan<byte> data)
    {
        var f = Get(file);
        RandomAccess.Write(DataHandle(f), data, offset);
        f.Pages[page] = 1;
        RandomAccess.Write(f.Marks!, f.Pages.AsSpan(page, 1), Header + page);
        HashInOrder(file, f, page, data);
    }

    /// <summary>Hashes the file as its prefix of written pages grows (pages arrive nearly in order), so the check when
    /// the last page lands reads only what is left, not the whole file: on a busy machine that final read and hash
    /// was the tail of every transfer. A page written before its predecessors is read back when they arrive.</summary>
    private void HashInOrder(FileEntry file, Open f, int page, ReadOnlySpan<byte> data)
    {
        int pageSize = _pageSize.TryGetValue(file.Name, out int ps) ? ps : PageOptions.MaxPageSize;
        f.Sha ??= IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
        while (f.NextPage < f.Pages.Length && f.Pages[f.NextPage] != 0)
        {
            long offset = (long)f.NextPage * pageSize;
            int length = (int)Math.Min(pageSize, file.Size - offset);
            if (f.NextPage == page && data.Length >= length)
            {
                f.Sha.AppendData(data[..length]);
            }
            else
            {
                f.Scratch ??= new byte[pageSize];
                int n = RandomAccess.Read(DataHandle(f), f.Scratch.AsSpan(0, length), offset);
                if (n != length)
                {
                    return; // not all there: Verify hashes the rest from disk
                }

                f.Sha.AppendData(f.Scratch, 0, length);
            }

            f.HashedTo = offset + length;
            f.NextPage++;
        }
    }

    public bool Verify(FileEntry file)
    {
        var f = Get(file);
        if (f.Complete)
        {
            return true;
        }

        var data = DataHandle(f);
        RandomAccess.SetLength(data, file.Size);
        byte[] hash;
        if (f.Sha is { } sha && f.HashedTo <= file.Size)
        {
            // The pages hashed in order as they were written; only the rest is read now.
            var buffer = new byte[1 << 16];
            for (long offset = f.HashedTo; offset < file.Size;)
            {
                int n = RandomAccess.Read(data, buffer.AsSpan(0, (int)Math.Min(buffer.Length, file.Size - offset)), offset);
                if (n <= 0)
                {
                    break;
                }

                sha.AppendData(buffer, 0, n);
                offset += n;
            }

            hash = sha.GetHashAndReset();
            ResetHash(f);
        }
        else
        {
            hash = Hash(data, file.Size);
        }

        if (!hash.AsSpan().SequenceEqual(file.Sha256))
        {
            return false;
        }

        data.Dispose();
        f.Marks?.Dispose();
        f.Data = null;
        f.Marks = null;
        File.Move(f.Path + ".part", f.Path, overwrite: true);
        File.Delete(f.Path + ".qsparts");
        f.Complete = true;
        return true;
    }

    public void Discard(FileEntry file)
    {
        var f = Get(file);
        ResetHash(f);
        Array.Clear(f.Pages);
        if (f.Marks is not null)
        {
            RandomAccess.Write(f.Marks, f.Pages, Header);
        }
    }

    private static void ResetHash(Open f)
    {
        f.Sha?.Dispose();
        f.Sha = null;
        f.HashedTo = 0;
        f.NextPage = 0;
        f.Scratch = null;
    }

    private static byte[] Hash(SafeFileHandle handle, long size)
    {
        using var sha = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
        var buffer = new byte[1 << 16];
        for (long offset = 0; offset < size;)
        {
            int n = RandomAccess.Read(handle, buffer.AsSpan(0, (int)Math.Min(buffer.Length, size - offset)), offset);
            if (n <= 0)
            {
                break;
            }

            sha.AppendData(buffer, 0, n);
            offset += n;
        }

        return sha.GetHashAndReset();
    }

    private Open Get(FileEntry file)
    {
        if (_open.TryGetValue(file.Name, out var f))
        {
            return f;
        }

        string path = PathOf(file.Name);
        Directory.CreateDirectory(Path.GetDirectoryName(path)!);
        int pageSize = _pageSize.TryGetValue(file.Name, out int ps) ? ps : PageOptions.MaxPageSize;
        int pages = (int)new PageOptions { PageSize = pageSize, PacketPayload = 16 }.PageCount(file.Size);
        f = new Open(path, new byte[pages]);
        _open[file.Name] = f;
        if (File.Exists(path) && new FileInfo(path).Length == file.Size)
        {
            using var handle = File.OpenHandle(path);
            if (Hash(handle, file.Size).AsSpan().SequenceEqual(file.Sha256))
            {
                Array.Fill(f.Pages, (byte)1);
                f.Complete = true;
                return f;
            }
        }

        // The marks file: size u64, SHA-256, page size u32, then a byte per page. Kept only if it describes this same
        // file cut the same way.
        var header = new byte[Header];
        BitConverter.TryWriteBytes(header.AsSpan(0, 8), file.Size);
        file.Sha256.CopyTo(header.AsSpan(8));
        BitConverter.TryWriteBytes(header.AsSpan(40, 4), pageSize);
        f.Marks = File.OpenHandle(path + ".qsparts", FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.Read);
        var existing = new byte[Header];
        bool same = RandomAccess.GetLength(f.Marks) == Header + f.Pages.Length && RandomAccess.Read(f.Marks, existing, 0) == Header && existing.AsSpan().SequenceEqual(header);
        if (same && File.Exists(path + ".part"))
        {
            RandomAccess.Read(f.Marks, f.Pages, Header);
        }
        else
        {
            RandomAccess.SetLength(f.Marks, 0);
            RandomAccess.Write(f.Marks, header, 0);
            RandomAccess.Write(f.Marks, f.Pages, Header);
        }

        return f;
    }

    public void Dispose()
    {
        foreach (var f in _open.Values)
        {
            f.Data?.Dispose();
            f.Marks?.Dispose();
            f.Sha?.Dispose();
        }

        _open.Clear();
    }

    private sealed class Open(string path, byte[] pages)
    {
        public string Path { get; } = path;
        public byte[] Pages { get; } = pages;
        public SafeFileHandle? Data { get; set; }
        public SafeFileHandle? Marks { get; set; }
        public bool Complete { get; set; }

        /// <summary>SHA-256 of the file's first <see cref="HashedTo"/> bytes: pages 0..NextPage−1, hashed as written.</summary>
        public IncrementalHash? Sha { get; set; }
        public long HashedTo { get; set; }
        public int NextPage { get; set; }
        public byte[]? Scratch { get; set; }
    }
}
