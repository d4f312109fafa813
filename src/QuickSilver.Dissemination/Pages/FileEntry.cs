namespace QuickSilver.Dissemination.Pages;

/// <summary>One file of the server's list: name, id, size and SHA-256 (the client verifies the whole file against it).</summary>
public sealed class FileEntry
{
    public FileEntry(string name, long size, byte[] sha256)
    {
        ArgumentNullException.ThrowIfNull(name);
        ArgumentNullException.ThrowIfNull(sha256);
        ArgumentOutOfRangeException.ThrowIfNegative(size);
        if (sha256.Length != 32)
        {
            throw new ArgumentException("A SHA-256 digest is 32 bytes.", nameof(sha256));
        }

        Name = name;
        Size = size;
        Sha256 = sha256;
        FileId = PageId.FileIdOf(name);
    }

    public string Name { get; }

    public ulong FileId { get; }

    public long Size { get; }

    public byte[] Sha256 { get; }

    public override string ToString() => $"{Name} ({Size} B, id {FileId:x16})";
}
