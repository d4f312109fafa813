using System.Buffers.Binary;
using System.Security.Cryptography;
using System.Text;

namespace QuickSilver.Dissemination.Pages;

/// <summary>
/// A page's identifier on the wire: the file's 64-bit id (the low 64 bits of SHA-1 of its name, seed 001 §3.4) with
/// the page's starting byte offset appended (§3.5: "hash the filename ... and append the starting file offset").
/// </summary>
public readonly record struct PageId(ulong FileId, ulong Offset)
{
    /// <summary>The file id of <paramref name="name"/>: SHA-1 over its UTF-8 bytes, of which the low 64 bits are the
    /// last eight bytes of the 20-byte digest read as a little-endian integer (the seed does not say which 64 bits
    /// are "low"; this is the choice, and both ends compute it the same way).</summary>
    public static ulong FileIdOf(string name)
    {
        ArgumentNullException.ThrowIfNull(name);
        Span<byte> digest = stackalloc byte[20];
        int count = Encoding.UTF8.GetByteCount(name);
        byte[] bytes = new byte[count];
        Encoding.UTF8.GetBytes(name, bytes);
#pragma warning disable CA5350 // SHA-1 is the seed's identifier hash, not a security measure
        SHA1.HashData(bytes, digest);
#pragma warning restore CA5350
        return BinaryPrimitives.ReadUInt64LittleEndian(digest[12..]);
    }

    public override string ToString() => $"{FileId:x16}+{Offset}";
}
