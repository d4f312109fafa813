using System.Security.Cryptography;
using NSec.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary><see cref="DatagramCipherSuite.Aegis128L"/>: AEGIS-128L, libsodium's implementation (AES-NI or the ARM
/// crypto extensions, a portable one elsewhere) through NSec. Its 16-byte key is HKDF-Expand (SHA-256) of the 32 bytes
/// of key material with this suite's name as the info; its 16-byte nonce is the trailer's 12 bytes and four zeros.
/// Authenticating passes the data as associated data with an empty message (the tag is the whole output); a bad tag is
/// a <c>false</c> from libsodium, no exception.</summary>
internal sealed class Aegis128LCipher : DatagramCipher
{
    public const int TagLength = 32;

    private static readonly AeadAlgorithm Algorithm = AeadAlgorithm.Aegis128L;
    private readonly Key _key;

    public Aegis128LCipher(ReadOnlySpan<byte> keyMaterial)
    {
        Span<byte> key = stackalloc byte[16];
        HKDF.Expand(HashAlgorithmName.SHA256, keyMaterial, key, "QuickSilver datagram AEGIS-128L key"u8);
        _key = Key.Import(Algorithm, key, KeyBlobFormat.RawSymmetricKey);
        CryptographicOperations.ZeroMemory(key);
    }

    public override DatagramCipherSuite Suite => DatagramCipherSuite.Aegis128L;

    public override void Authenticate(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, Span<byte> tag)
    {
        Span<byte> n = stackalloc byte[16];
        Widen(nonce, n);
        Algorithm.Encrypt(_key, n, data, ReadOnlySpan<byte>.Empty, tag[..TagLength]);
    }

    public override bool Verify(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, ReadOnlySpan<byte> tag)
    {
        Span<byte> n = stackalloc byte[16];
        Widen(nonce, n);
        return tag.Length == TagLength && Algorithm.Decrypt(_key, n, data, tag, Span<byte>.Empty);
    }

    public override void Encrypt(ReadOnlySpan<byte> nonce, Span<byte> bodyThenTag, int bodyLength, ReadOnlySpan<byte> associatedData)
    {
        Span<byte> n = stackalloc byte[16];
        Widen(nonce, n);
        Algorithm.Encrypt(_key, n, associatedData, bodyThenTag[..bodyLength], bodyThenTag[..(bodyLength + TagLength)]); // in place
    }

    public override bool Decrypt(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> bodyThenTag, Span<byte> plaintext, ReadOnlySpan<byte> associatedData)
    {
        Span<byte> n = stackalloc byte[16];
        Widen(nonce, n);
        return Algorithm.Decrypt(_key, n, associatedData, bodyThenTag, plaintext);
    }

    private static void Widen(ReadOnlySpan<byte> nonce, Span<byte> wide)
    {
        wide.Clear();
        nonce[..NonceBytes].CopyTo(wide);
    }

    public override void Dispose() => _key.Dispose();
}
