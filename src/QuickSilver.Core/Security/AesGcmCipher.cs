using System.Security.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary><see cref="DatagramCipherSuite.AesGcm"/>: AES-256-GCM through the runtime (OpenSSL on Linux, CNG on
/// Windows). Authenticating is GMAC (the data as associated data, nothing encrypted); verifying recomputes the tag.
/// The runtime's decrypt throws on a bad tag: caught here, so a forged datagram costs an exception in Encrypt mode.</summary>
internal sealed class AesGcmCipher(ReadOnlySpan<byte> key) : DatagramCipher
{
    public const int TagLength = 16;

    private readonly AesGcm _aes = new(key, TagLength);

    public override DatagramCipherSuite Suite => DatagramCipherSuite.AesGcm;

    public override void Authenticate(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, Span<byte> tag)
        => _aes.Encrypt(nonce, ReadOnlySpan<byte>.Empty, Span<byte>.Empty, tag, data);

    public override bool Verify(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, ReadOnlySpan<byte> tag)
    {
        Span<byte> expected = stackalloc byte[TagLength];
        Authenticate(nonce, data, expected);
        return CryptographicOperations.FixedTimeEquals(expected, tag);
    }

    public override void Encrypt(ReadOnlySpan<byte> nonce, Span<byte> bodyThenTag, int bodyLength, ReadOnlySpan<byte> associatedData)
    {
        var body = bodyThenTag[..bodyLength];
        _aes.Encrypt(nonce, body, body, bodyThenTag.Slice(bodyLength, TagLength), associatedData);
    }

    public override bool Decrypt(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> bodyThenTag, Span<byte> plaintext, ReadOnlySpan<byte> associatedData)
    {
        int length = bodyThenTag.Length - TagLength;
        try
        {
            _aes.Decrypt(nonce, bodyThenTag[..length], bodyThenTag[length..], plaintext, associatedData);
            return true;
        }
        catch (AuthenticationTagMismatchException)
        {
            return false;
        }
    }

    public override void Dispose() => _aes.Dispose();
}
