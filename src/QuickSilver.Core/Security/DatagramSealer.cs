using System.Buffers.Binary;
using System.Security.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary>Why <see cref="SecureTransport"/> dropped a received datagram.</summary>
public enum DatagramRejection
{
    None = 0,

    /// <summary>Shorter than the trailer plus a common header.</summary>
    Truncated,

    /// <summary>Sealed under a key id this endpoint does not hold (never handed out, or retired).</summary>
    UnknownKey,

    /// <summary>The tag does not verify: forged, modified, truncated, or sealed under another secret or mode.</summary>
    BadTag,

    /// <summary>Verified, but its counter is more than the replay window behind the highest seen from its sender.</summary>
    Replayed,

    /// <summary>Verified under a key that does not cover it: a region's datagram under the cluster key or another region's
    /// key while this endpoint holds keys for that region, or a region key on a datagram of another region or type.</summary>
    WrongKey,
}

/// <summary>
/// Seals and opens one datagram at a time with AES-GCM under a <see cref="DatagramKeyRing"/>, in place and without
/// allocating. The trailer (docs/wire-format.md, "Datagram trailer") follows the datagram the layers wrote:
/// <code>u32 keyId | u32 salt | u64 counter | u8[16] tag</code>
/// The 12-byte nonce is salt‖counter as they appear. The salt is drawn at random per sealer (per endpoint), the counter
/// starts at a random value below 2^62 and goes up by one per datagram, so a sealer never repeats a nonce, and two
/// sealers that drew the same salt would need counter ranges 2^62 apart at random to meet.
/// <list type="bullet">
/// <item>Authenticate: GMAC. Associated data = datagram ‖ keyId ‖ nonce, nothing encrypted; verification recomputes
/// the tag and compares it in constant time (no exception for a forged datagram).</item>
/// <item>Encrypt: the datagram is encrypted in place; associated data = keyId ‖ nonce. Opening decrypts into the
/// caller's buffer; a bad tag costs the runtime's exception (caught here).</item>
/// </list>
/// Core thread only (an <see cref="AesGcm"/> instance is not thread-safe).
/// </summary>
public sealed class DatagramSealer
{
    public const int KeyIdBytes = 4;
    public const int NonceBytes = 12;
    public const int TagBytes = 16;

    /// <summary>Bytes the trailer adds to every datagram.</summary>
    public const int Overhead = KeyIdBytes + NonceBytes + TagBytes;

    private const int HeaderBytes = KeyIdBytes + NonceBytes; // what precedes the tag in the trailer
    private readonly DatagramKeyRing _keys;
    private readonly uint _salt;
    private ulong _counter;

    /// <param name="mode">Authenticate or Encrypt.</param>
    /// <param name="salt">Null: random (production). Given: tests that need two sealers to collide.</param>
    /// <param name="firstCounter">Null: random below 2^62.</param>
    public DatagramSealer(DatagramSecurity mode, DatagramKeyRing keys, uint? salt = null, ulong? firstCounter = null)
    {
        if (mode == DatagramSecurity.Off || !Enum.IsDefined(mode))
        {
            throw new ArgumentException($"A sealer needs Authenticate or Encrypt, got {mode}.", nameof(mode));
        }

        Mode = mode;
        _keys = keys ?? throw new ArgumentNullException(nameof(keys));
        Span<byte> random = stackalloc byte[12];
        RandomNumberGenerator.Fill(random);
        _salt = salt ?? BinaryPrimitives.ReadUInt32LittleEndian(random);
        _counter = (firstCounter ?? (BinaryPrimitives.ReadUInt64LittleEndian(random[4..]) >> 2)) - 1;
    }

    public DatagramSecurity Mode { get; }

    /// <summary>This sealer's salt (the first four nonce bytes of every datagram it seals).</summary>
    public uint Salt => _salt;

    /// <summary>The counter of the last datagram sealed.</summary>
    public ulong LastCounter => _counter;

    /// <summary>Seals <paramref name="buffer"/>[..<paramref name="length"/>] in place and appends the trailer;
    /// <paramref name="buffer"/> must have <see cref="Overhead"/> bytes beyond <paramref name="length"/>. Returns the
    /// sealed length.</summary>
    public int Seal(Span<byte> buffer, int length)
    {
        var aes = _keys.Current(out uint keyId);
        return Seal(buffer, length, aes, keyId);
    }

    /// <summary>Seals under <paramref name="aes"/>, named <paramref name="keyId"/> in the trailer (a region's key).</summary>
    internal int Seal(Span<byte> buffer, int length, AesGcm aes, uint keyId)
    {
        if ((uint)length > (uint)(buffer.Length - Overhead))
        {
            throw new ArgumentOutOfRangeException(nameof(length), length, $"A sealed datagram needs {Overhead} bytes after its {length}; the buffer has {buffer.Length}.");
        }

        var trailer = buffer.Slice(length, Overhead);
        BinaryPrimitives.WriteUInt32LittleEndian(trailer, keyId);
        BinaryPrimitives.WriteUInt32LittleEndian(trailer[KeyIdBytes..], _salt);
        BinaryPrimitives.WriteUInt64LittleEndian(trailer[(KeyIdBytes + 4)..], ++_counter);
        var nonce = trailer.Slice(KeyIdBytes, NonceBytes);
        var tag = trailer.Slice(HeaderBytes, TagBytes);
        if (Mode == DatagramSecurity.Authenticate)
        {
            aes.Encrypt(nonce, ReadOnlySpan<byte>.Empty, Span<byte>.Empty, tag, buffer[..(length + HeaderBytes)]);
        }
        else
        {
            var body = buffer[..length];
            aes.Encrypt(nonce, body, body, tag, trailer[..HeaderBytes]);
        }

        return length + Overhead;
    }

    /// <summary>Verifies (and, encrypting, decrypts) a received datagram. On success the datagram the layers wrote is
    /// <paramref name="datagram"/>[..<paramref name="length"/>] (Authenticate) or
    /// <paramref name="plaintext"/>[..<paramref name="length"/>] (Encrypt; <paramref name="plaintext"/> at least as
    /// long as the datagram), and <paramref name="salt"/> and <paramref name="counter"/> are the sender's. Never throws
    /// on input.</summary>
    public DatagramRejection Open(ReadOnlySpan<byte> datagram, Span<byte> plaintext, out int length, out uint salt, out ulong counter)
        => Open(datagram, plaintext, null, out length, out salt, out counter, out _);

    /// <summary>As <see cref="Open(ReadOnlySpan{byte}, Span{byte}, out int, out uint, out ulong)"/>, looking the key id up
    /// in <paramref name="scoped"/> first (the keys the GMS handed out), then in the ring; <paramref name="key"/> is the
    /// scoped key it verified under (null: a key of the ring, i.e. the cluster key).</summary>
    internal DatagramRejection Open(ReadOnlySpan<byte> datagram, Span<byte> plaintext, ScopedKeyTable? scoped, out int length, out uint salt, out ulong counter, out ScopedKey? key)
    {
        length = datagram.Length - Overhead;
        salt = 0;
        counter = 0;
        key = null;
        if (length < Wire.PacketHeader.Size)
        {
            return DatagramRejection.Truncated;
        }

        var trailer = datagram.Slice(length, Overhead);
        uint keyId = BinaryPrimitives.ReadUInt32LittleEndian(trailer);
        AesGcm? aes;
        if (scoped is not null && scoped.TryGet(keyId, out key))
        {
            aes = key.Aes;
        }
        else if (!_keys.TryGet(keyId, out aes))
        {
            return DatagramRejection.UnknownKey;
        }

        salt = BinaryPrimitives.ReadUInt32LittleEndian(trailer[KeyIdBytes..]);
        counter = BinaryPrimitives.ReadUInt64LittleEndian(trailer[(KeyIdBytes + 4)..]);
        var nonce = trailer.Slice(KeyIdBytes, NonceBytes);
        var tag = trailer.Slice(HeaderBytes, TagBytes);
        if (Mode == DatagramSecurity.Authenticate)
        {
            Span<byte> expected = stackalloc byte[TagBytes];
            aes.Encrypt(nonce, ReadOnlySpan<byte>.Empty, Span<byte>.Empty, expected, datagram[..(length + HeaderBytes)]);
            return CryptographicOperations.FixedTimeEquals(expected, tag) ? DatagramRejection.None : DatagramRejection.BadTag;
        }

        try
        {
            aes.Decrypt(nonce, datagram[..length], tag, plaintext[..length], trailer[..HeaderBytes]);
            return DatagramRejection.None;
        }
        catch (AuthenticationTagMismatchException)
        {
            return DatagramRejection.BadTag;
        }
    }
}
