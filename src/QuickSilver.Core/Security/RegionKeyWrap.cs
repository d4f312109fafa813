using System.Buffers.Binary;
using System.Security.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary>
/// Wraps a region key for its trip from the GMS to a node (docs/wire-format.md, "Region key hand-out"): AES-256-GCM
/// under a key derived from the cluster secret (HKDF-SHA256, its own info string, so it is none of the datagram keys),
/// with the key id, region and view number as associated data, so a wrapped key cannot be passed off as another
/// region's or view's. <c>wrapped = nonce(12, random) | ciphertext(32) | tag(16)</c>, 60 bytes. Why wrap although the
/// GMS's segments are sealed: in Authenticate mode they travel in clear, and a region key read off the wire by a host
/// without the secret would let it forge that region's datagrams; wrapped, only a holder of the secret can read it
/// (every member holds it: docs/security.md says what that leaves). Control-plane only (a few per view change per node),
/// so it allocates. Thread-safe only as far as <see cref="AesGcm"/> is not: one thread (the core's).
/// </summary>
public sealed class RegionKeyWrap : IDisposable
{
    private const int NonceBytes = 12;
    private const int TagBytes = 16;

    /// <summary>Bytes of a wrapped key.</summary>
    public const int WrappedBytes = NonceBytes + DatagramKeyRing.KeyBytes + TagBytes;

    private readonly AesGcm _aes;

    public RegionKeyWrap(ReadOnlySpan<byte> clusterSecret)
    {
        if (clusterSecret.Length < DatagramSecurityOptions.MinSecretBytes)
        {
            throw new ArgumentException($"The cluster secret must be at least {DatagramSecurityOptions.MinSecretBytes} bytes.", nameof(clusterSecret));
        }

        Span<byte> key = stackalloc byte[DatagramKeyRing.KeyBytes];
        HKDF.DeriveKey(HashAlgorithmName.SHA256, clusterSecret, key, "QuickSilver cluster secret"u8, "QuickSilver region key wrap v1"u8);
        _aes = new AesGcm(key, TagBytes);
        CryptographicOperations.ZeroMemory(key);
    }

    /// <summary>Wraps <paramref name="key"/> (32 bytes), bound to its id, region and view.</summary>
    public byte[] Wrap(uint keyId, uint region, uint view, ReadOnlySpan<byte> key)
    {
        if (key.Length != DatagramKeyRing.KeyBytes)
        {
            throw new ArgumentException($"A region key is {DatagramKeyRing.KeyBytes} bytes, got {key.Length}.", nameof(key));
        }

        var wrapped = new byte[WrappedBytes];
        RandomNumberGenerator.Fill(wrapped.AsSpan(0, NonceBytes));
        Span<byte> associated = stackalloc byte[12];
        Bind(associated, keyId, region, view);
        _aes.Encrypt(wrapped.AsSpan(0, NonceBytes), key, wrapped.AsSpan(NonceBytes, DatagramKeyRing.KeyBytes), wrapped.AsSpan(NonceBytes + DatagramKeyRing.KeyBytes), associated);
        return wrapped;
    }

    /// <summary>Unwraps into <paramref name="key"/> (32 bytes); false when the blob is malformed, forged, under another
    /// secret, or bound to another id, region or view. Never throws on input.</summary>
    public bool TryUnwrap(uint keyId, uint region, uint view, ReadOnlySpan<byte> wrapped, Span<byte> key)
    {
        if (wrapped.Length != WrappedBytes || key.Length != DatagramKeyRing.KeyBytes)
        {
            return false;
        }

        Span<byte> associated = stackalloc byte[12];
        Bind(associated, keyId, region, view);
        try
        {
            _aes.Decrypt(wrapped[..NonceBytes], wrapped.Slice(NonceBytes, DatagramKeyRing.KeyBytes), wrapped[(NonceBytes + DatagramKeyRing.KeyBytes)..], key, associated);
            return true;
        }
        catch (AuthenticationTagMismatchException)
        {
            key.Clear();
            return false;
        }
    }

    private static void Bind(Span<byte> associated, uint keyId, uint region, uint view)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(associated, keyId);
        BinaryPrimitives.WriteUInt32LittleEndian(associated[4..], region);
        BinaryPrimitives.WriteUInt32LittleEndian(associated[8..], view);
    }

    public void Dispose() => _aes.Dispose();
}
