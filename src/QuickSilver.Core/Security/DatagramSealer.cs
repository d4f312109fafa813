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
/// Seals and opens one datagram at a time under a <see cref="DatagramKeyRing"/>'s <see cref="DatagramCipher"/>s, in
/// place and without allocating. The trailer (docs/wire-format.md, "Datagram trailer") follows the datagram the layers
/// wrote:
/// <code>u8[T] tag | u32 keyId | u32 salt | u64 counter</code>
/// T being the suite's tag length (<see cref="DatagramCipher.TagBytesOf"/>: 32 for AEGIS-128L, 16 for AES-GCM). The
/// 12-byte nonce is salt‖counter as they appear. The salt is drawn at random per sealer (per endpoint), the counter
/// starts at a random value below 2^62 and goes up by one per datagram, so a sealer never repeats a nonce, and two
/// sealers that drew the same salt would need counter ranges 2^62 apart at random to meet.
/// <list type="bullet">
/// <item>Authenticate: the tag of the datagram (associated data; nothing encrypted). The key id and nonce are bound by
/// being the key and nonce: another key id opens under another key, another nonce gives another tag.</item>
/// <item>Encrypt: the datagram is encrypted in place and the tag follows it; associated data = keyId ‖ nonce. Opening
/// decrypts into the caller's buffer.</item>
/// </list>
/// Core thread only (a cipher is not thread-safe).
/// </summary>
public sealed class DatagramSealer
{
    public const int KeyIdBytes = 4;
    public const int NonceBytes = DatagramCipher.NonceBytes;

    /// <summary>The key id and nonce, the trailer's last bytes.</summary>
    public const int HeaderBytes = KeyIdBytes + NonceBytes;

    private readonly DatagramKeyRing _keys;
    private readonly uint _salt;
    private readonly int _tagBytes;
    private ulong _counter;

    /// <param name="mode">Authenticate or Encrypt.</param>
    /// <param name="keys">The ring; its suite is this sealer's.</param>
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
        Suite = keys.Suite;
        _tagBytes = DatagramCipher.TagBytesOf(Suite);
        Overhead = _tagBytes + HeaderBytes;
        Span<byte> random = stackalloc byte[12];
        RandomNumberGenerator.Fill(random);
        _salt = salt ?? BinaryPrimitives.ReadUInt32LittleEndian(random);
        _counter = (firstCounter ?? (BinaryPrimitives.ReadUInt64LittleEndian(random[4..]) >> 2)) - 1;
    }

    /// <summary>Bytes the trailer of <paramref name="suite"/> adds to every datagram: 48 (AEGIS-128L) or 32 (AES-GCM).</summary>
    public static int OverheadOf(DatagramCipherSuite suite) => DatagramCipher.TagBytesOf(suite) + HeaderBytes;

    public DatagramSecurity Mode { get; }

    public DatagramCipherSuite Suite { get; }

    /// <summary>Bytes the trailer adds to every datagram.</summary>
    public int Overhead { get; }

    /// <summary>This sealer's salt (the first four nonce bytes of every datagram it seals).</summary>
    public uint Salt => _salt;

    /// <summary>The counter of the last datagram sealed.</summary>
    public ulong LastCounter => _counter;

    /// <summary>The key id a sealed datagram names (the first bytes of its trailer's header), if it is long enough.</summary>
    public static bool TryReadKeyId(ReadOnlySpan<byte> datagram, out uint keyId)
    {
        keyId = datagram.Length >= HeaderBytes ? BinaryPrimitives.ReadUInt32LittleEndian(datagram[^HeaderBytes..]) : 0;
        return datagram.Length >= HeaderBytes;
    }

    /// <summary>Seals <paramref name="buffer"/>[..<paramref name="length"/>] in place and appends the trailer;
    /// <paramref name="buffer"/> must have <see cref="Overhead"/> bytes beyond <paramref name="length"/>. Returns the
    /// sealed length.</summary>
    public int Seal(Span<byte> buffer, int length)
    {
        var cipher = _keys.Current(out uint keyId);
        return Seal(buffer, length, cipher, keyId);
    }

    /// <summary>Seals under <paramref name="cipher"/>, named <paramref name="keyId"/> in the trailer (a region's key).</summary>
    internal int Seal(Span<byte> buffer, int length, DatagramCipher cipher, uint keyId)
    {
        if ((uint)length > (uint)(buffer.Length - Overhead))
        {
            throw new ArgumentOutOfRangeException(nameof(length), length, $"A sealed datagram needs {Overhead} bytes after its {length}; the buffer has {buffer.Length}.");
        }

        var header = buffer.Slice(length + _tagBytes, HeaderBytes);
        BinaryPrimitives.WriteUInt32LittleEndian(header, keyId);
        BinaryPrimitives.WriteUInt32LittleEndian(header[KeyIdBytes..], _salt);
        BinaryPrimitives.WriteUInt64LittleEndian(header[(KeyIdBytes + 4)..], ++_counter);
        var nonce = header[KeyIdBytes..];
        if (Mode == DatagramSecurity.Authenticate)
        {
            cipher.Authenticate(nonce, buffer[..length], buffer.Slice(length, _tagBytes));
        }
        else
        {
            cipher.Encrypt(nonce, buffer[..(length + _tagBytes)], length, header);
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

        var header = datagram[^HeaderBytes..];
        uint keyId = BinaryPrimitives.ReadUInt32LittleEndian(header);
        DatagramCipher? cipher;
        if (scoped is not null && scoped.TryGet(keyId, out key))
        {
            cipher = key.Cipher;
        }
        else if (!_keys.TryGet(keyId, out cipher))
        {
            return DatagramRejection.UnknownKey;
        }

        salt = BinaryPrimitives.ReadUInt32LittleEndian(header[KeyIdBytes..]);
        counter = BinaryPrimitives.ReadUInt64LittleEndian(header[(KeyIdBytes + 4)..]);
        return Verify(cipher, datagram, plaintext, length) ? DatagramRejection.None : DatagramRejection.BadTag;
    }

    /// <summary>Whether <paramref name="datagram"/> (its layers' <paramref name="length"/> bytes and a trailer) verifies
    /// under <paramref name="cipher"/>; encrypting, it is decrypted into <paramref name="plaintext"/>.</summary>
    internal bool Verify(DatagramCipher cipher, ReadOnlySpan<byte> datagram, Span<byte> plaintext, int length)
    {
        var header = datagram[^HeaderBytes..];
        var nonce = header[KeyIdBytes..];
        return Mode == DatagramSecurity.Authenticate
            ? cipher.Verify(nonce, datagram[..length], datagram.Slice(length, _tagBytes))
            : cipher.Decrypt(nonce, datagram[..(length + _tagBytes)], plaintext[..length], header);
    }
}
