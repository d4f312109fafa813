using System.Diagnostics.CodeAnalysis;
using System.Security.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary>
/// The keys (<see cref="DatagramCipher"/>s of one suite) one endpoint seals and opens datagrams with, each under a 32-bit key id that travels in every
/// datagram's trailer. Key id <see cref="ClusterKeyId"/> is derived from the cluster secret; the ring holds up to
/// <see cref="Capacity"/> keys so a key handed out later (per region and view, by the GMS) can be added, made current
/// for sending, and the old one kept for receiving until its datagrams have drained, then removed. One cipher per
/// key, made once and reused for every datagram. Core thread only.
/// </summary>
public sealed class DatagramKeyRing : IDisposable
{
    /// <summary>The id of the key derived from the cluster secret.</summary>
    public const uint ClusterKeyId = 0;

    /// <summary>Keys held at once.</summary>
    public const int Capacity = 4;

    /// <summary>Bytes of key material per key (<see cref="DatagramCipher.KeyBytes"/>).</summary>
    public const int KeyBytes = DatagramCipher.KeyBytes;

    private readonly uint[] _ids = new uint[Capacity];
    private readonly DatagramCipher?[] _keys = new DatagramCipher?[Capacity];
    private int _current = -1;

    public DatagramKeyRing(DatagramCipherSuite suite = DatagramCipherSuite.Aegis128L)
    {
        _ = DatagramCipher.TagBytesOf(suite); // throws for an unknown suite
        Suite = suite;
    }

    /// <summary>The suite of every key in the ring.</summary>
    public DatagramCipherSuite Suite { get; }

    /// <summary>A ring holding the cluster key for <paramref name="mode"/> and <paramref name="suite"/>, current.</summary>
    public static DatagramKeyRing FromSecret(ReadOnlySpan<byte> clusterSecret, DatagramSecurity mode, DatagramCipherSuite suite = DatagramCipherSuite.Aegis128L)
    {
        var ring = new DatagramKeyRing(suite);
        Span<byte> key = stackalloc byte[KeyBytes];
        DeriveClusterKey(clusterSecret, mode, key, suite);
        ring.Add(ClusterKeyId, key);
        CryptographicOperations.ZeroMemory(key);
        ring.Use(ClusterKeyId);
        return ring;
    }

    /// <summary>HKDF-SHA256 (RFC 5869) of the cluster secret, with a fixed salt and the mode and suite in the info, so
    /// clusters of another mode or suite with one secret never share a key.</summary>
    public static void DeriveClusterKey(ReadOnlySpan<byte> clusterSecret, DatagramSecurity mode, Span<byte> key, DatagramCipherSuite suite = DatagramCipherSuite.Aegis128L)
    {
        if (mode == DatagramSecurity.Off)
        {
            throw new ArgumentException("No key is derived for DatagramSecurity.Off.", nameof(mode));
        }

        var info = (mode, suite) switch
        {
            (DatagramSecurity.Authenticate, DatagramCipherSuite.AesGcm) => "QuickSilver datagram v1 authenticate key 0"u8,
            (DatagramSecurity.Encrypt, DatagramCipherSuite.AesGcm) => "QuickSilver datagram v1 encrypt key 0"u8,
            (DatagramSecurity.Authenticate, _) => "QuickSilver datagram v2 aegis128l authenticate key 0"u8,
            _ => "QuickSilver datagram v2 aegis128l encrypt key 0"u8,
        };
        HKDF.DeriveKey(HashAlgorithmName.SHA256, clusterSecret, key[..KeyBytes], "QuickSilver cluster secret"u8, info);
    }

    /// <summary>The id datagrams are sealed under.</summary>
    public uint CurrentId => _current >= 0 ? _ids[_current] : throw new InvalidOperationException("The key ring has no current key (Use one).");

    /// <summary>Keys held.</summary>
    public int Count
    {
        get
        {
            int n = 0;
            foreach (var key in _keys)
            {
                n += key is null ? 0 : 1;
            }

            return n;
        }
    }

    /// <summary>Adds (or replaces) the key <paramref name="id"/>. Throws when the ring is full.</summary>
    public void Add(uint id, ReadOnlySpan<byte> key)
    {
        if (key.Length != KeyBytes)
        {
            throw new ArgumentException($"A datagram key is {KeyBytes} bytes, got {key.Length}.", nameof(key));
        }

        int slot = IndexOf(id);
        if (slot < 0)
        {
            slot = Array.IndexOf(_keys, null);
            if (slot < 0)
            {
                throw new InvalidOperationException($"The key ring holds {Capacity} keys already; remove one first.");
            }
        }

        _keys[slot]?.Dispose();
        _keys[slot] = DatagramCipher.Create(Suite, key);
        _ids[slot] = id;
    }

    /// <summary>Seals from now on under key <paramref name="id"/> (held).</summary>
    public void Use(uint id)
    {
        int slot = IndexOf(id);
        _current = slot >= 0 ? slot : throw new ArgumentException($"The key ring holds no key {id}.", nameof(id));
    }

    /// <summary>Forgets key <paramref name="id"/>: datagrams under it are dropped from now on. The current key cannot be removed.</summary>
    public bool Remove(uint id)
    {
        int slot = IndexOf(id);
        if (slot < 0)
        {
            return false;
        }

        if (slot == _current)
        {
            throw new InvalidOperationException($"Key {id} is the current key; Use another before removing it.");
        }

        _keys[slot]!.Dispose();
        _keys[slot] = null;
        return true;
    }

    /// <summary>The current key and its id.</summary>
    internal DatagramCipher Current(out uint id)
    {
        if (_current < 0)
        {
            throw new InvalidOperationException("The key ring has no current key (Use one).");
        }

        id = _ids[_current];
        return _keys[_current]!;
    }

    /// <summary>The key with id <paramref name="id"/>, if held (a scan of <see cref="Capacity"/> entries).</summary>
    internal bool TryGet(uint id, [NotNullWhen(true)] out DatagramCipher? key)
    {
        int slot = IndexOf(id);
        key = slot >= 0 ? _keys[slot] : null;
        return key is not null;
    }

    private int IndexOf(uint id)
    {
        for (int i = 0; i < Capacity; i++)
        {
            if (_keys[i] is not null && _ids[i] == id)
            {
                return i;
            }
        }

        return -1;
    }

    public void Dispose()
    {
        for (int i = 0; i < Capacity; i++)
        {
            _keys[i]?.Dispose();
            _keys[i] = null;
        }

        _current = -1;
    }
}
