namespace QuickSilver.Core.Security;

/// <summary>
/// One key of one <see cref="DatagramCipherSuite"/>, made once and reused for every datagram (core thread only): the
/// primitive <see cref="DatagramSealer"/> lays its trailer around. Every operation works on spans the caller owns and
/// allocates nothing; a datagram that fails to verify is a <c>false</c>, never an exception.
/// </summary>
public abstract class DatagramCipher : IDisposable
{
    /// <summary>Bytes of key material a cipher is made from (the cluster key's HKDF output, or a region key the GMS
    /// hands out); a suite with a shorter key derives it from these (<see cref="Aegis128LCipher"/>).</summary>
    public const int KeyBytes = 32;

    /// <summary>Bytes of the nonce the trailer carries (salt ‖ counter); a suite with a longer nonce pads it with zeros.</summary>
    public const int NonceBytes = 12;

    /// <summary>The suite's tag length.</summary>
    public static int TagBytesOf(DatagramCipherSuite suite) => suite switch
    {
        DatagramCipherSuite.Aegis128L => Aegis128LCipher.TagLength,
        DatagramCipherSuite.AesGcm => AesGcmCipher.TagLength,
        _ => throw new ArgumentOutOfRangeException(nameof(suite), suite, "Unknown cipher suite."),
    };

    /// <summary>A cipher of <paramref name="suite"/> under <paramref name="key"/> (<see cref="KeyBytes"/> bytes).</summary>
    public static DatagramCipher Create(DatagramCipherSuite suite, ReadOnlySpan<byte> key)
    {
        if (key.Length != KeyBytes)
        {
            throw new ArgumentException($"A datagram key is {KeyBytes} bytes, got {key.Length}.", nameof(key));
        }

        return suite switch
        {
            DatagramCipherSuite.Aegis128L => new Aegis128LCipher(key),
            DatagramCipherSuite.AesGcm => new AesGcmCipher(key),
            _ => throw new ArgumentOutOfRangeException(nameof(suite), suite, "Unknown cipher suite."),
        };
    }

    public abstract DatagramCipherSuite Suite { get; }

    public int TagBytes => TagBytesOf(Suite);

    /// <summary>Writes into <paramref name="tag"/> the tag of <paramref name="data"/> (authenticated, not encrypted).</summary>
    public abstract void Authenticate(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, Span<byte> tag);

    /// <summary>Whether <paramref name="tag"/> is <paramref name="data"/>'s (compared in constant time).</summary>
    public abstract bool Verify(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> data, ReadOnlySpan<byte> tag);

    /// <summary>Encrypts <paramref name="bodyThenTag"/>[..<paramref name="bodyLength"/>] in place and writes the tag
    /// (over it and <paramref name="associatedData"/>) right after it, in the rest of <paramref name="bodyThenTag"/>.</summary>
    public abstract void Encrypt(ReadOnlySpan<byte> nonce, Span<byte> bodyThenTag, int bodyLength, ReadOnlySpan<byte> associatedData);

    /// <summary>Verifies <paramref name="bodyThenTag"/> (ciphertext then tag) and decrypts it into
    /// <paramref name="plaintext"/> (exactly the ciphertext's length); false when it does not verify.</summary>
    public abstract bool Decrypt(ReadOnlySpan<byte> nonce, ReadOnlySpan<byte> bodyThenTag, Span<byte> plaintext, ReadOnlySpan<byte> associatedData);

    public abstract void Dispose();
}
