using System.Diagnostics.CodeAnalysis;

namespace QuickSilver.Core.Security;

/// <summary>One key of a <see cref="ScopedKeyTable"/>: its id (unique among the keys a GMS hands out in one epoch), the
/// scope it covers (a region id), and how many datagrams this endpoint sealed under it.</summary>
public sealed class ScopedKey
{
    internal ScopedKey(uint id, uint scope, DatagramCipherSuite suite, ReadOnlySpan<byte> key)
    {
        Id = id;
        Scope = scope;
        Cipher = DatagramCipher.Create(suite, key);
    }

    public uint Id { get; }

    /// <summary>The scope (region id) whose datagrams this key, and only this key's scope, may seal.</summary>
    public uint Scope { get; }

    /// <summary>Datagrams this endpoint sealed under the key.</summary>
    public long Sealed { get; internal set; }

    /// <summary>The sealed count at which <see cref="SecureTransport.KeyWornOut"/> is raised next.</summary>
    internal long NextWearReport { get; set; }

    internal DatagramCipher Cipher { get; }
}

/// <summary>
/// The keys an endpoint holds besides the cluster key: per scope (a region) up to <see cref="KeysPerScope"/> keys
/// handed out by the GMS, the one installed last current for sealing, the others kept for opening until they are
/// retired (docs/security.md, "Keys per region and view"). Looked up by key id when a datagram arrives (one dictionary
/// lookup), by scope when one is sealed. One <see cref="DatagramCipher"/> per key, made once. Bounded: at most
/// <see cref="KeysPerScope"/> per scope (installing a fifth drops the oldest at once) and <see cref="MaxScopes"/>
/// scopes (installing into a new scope beyond it is refused). Core thread only.
/// </summary>
public sealed class ScopedKeyTable : IDisposable
{
    public ScopedKeyTable(DatagramCipherSuite suite = DatagramCipherSuite.Aegis128L)
    {
        _ = DatagramCipher.TagBytesOf(suite); // throws for an unknown suite
        Suite = suite;
    }

    /// <summary>The suite of every key in the table (the endpoint's).</summary>
    public DatagramCipherSuite Suite { get; }

    /// <summary>Keys held per scope, the current one included.</summary>
    public const int KeysPerScope = DatagramKeyRing.Capacity;

    /// <summary>Scopes held at once.</summary>
    public const int MaxScopes = 1 << 16;

    private readonly Dictionary<uint, ScopedKey> _byId = new();
    private readonly Dictionary<uint, List<ScopedKey>> _byScope = new(); // oldest first; the last is current

    /// <summary>Keys held, all scopes.</summary>
    public int Count => _byId.Count;

    /// <summary>Scopes that have keys.</summary>
    public IReadOnlyCollection<uint> Scopes => _byScope.Keys;

    /// <summary>Raised after a key was installed (its id): a message that arrived under it before it did can be opened now.</summary>
    public event Action<uint>? Installed;

    /// <summary>Keys dropped because a scope already held <see cref="KeysPerScope"/> when a new one came.</summary>
    public long Overflowed { get; private set; }

    /// <summary>Adds key <paramref name="id"/> for <paramref name="scope"/> and makes it the scope's current key. The same
    /// id again is a no-op (false); an id held for another scope is replaced (a restarted GMS numbers keys from 1 again).
    /// Throws when <paramref name="id"/> is <see cref="DatagramKeyRing.ClusterKeyId"/>, the key is not
    /// <see cref="DatagramKeyRing.KeyBytes"/> long, or the table holds <see cref="MaxScopes"/> scopes.</summary>
    public bool Install(uint scope, uint id, ReadOnlySpan<byte> key)
    {
        if (id == DatagramKeyRing.ClusterKeyId)
        {
            throw new ArgumentException($"Key id {DatagramKeyRing.ClusterKeyId} is the cluster key's.", nameof(id));
        }

        if (key.Length != DatagramKeyRing.KeyBytes)
        {
            throw new ArgumentException($"A datagram key is {DatagramKeyRing.KeyBytes} bytes, got {key.Length}.", nameof(key));
        }

        if (_byId.TryGetValue(id, out var held))
        {
            if (held.Scope == scope)
            {
                return false;
            }

            Remove(held);
        }

        if (!_byScope.TryGetValue(scope, out var keys))
        {
            if (_byScope.Count >= MaxScopes)
            {
                throw new InvalidOperationException($"The key table holds keys for {MaxScopes} scopes already.");
            }

            _byScope[scope] = keys = new List<ScopedKey>(KeysPerScope);
        }

        if (keys.Count >= KeysPerScope)
        {
            Overflowed++;
            Remove(keys[0]);
        }

        var entry = new ScopedKey(id, scope, Suite, key);
        keys.Add(entry);
        _byId.Add(id, entry);
        Installed?.Invoke(id);
        return true;
    }

    /// <summary>The key datagrams of <paramref name="scope"/> are sealed under, if the scope has keys.</summary>
    public bool TryCurrent(uint scope, [NotNullWhen(true)] out ScopedKey? key)
    {
        key = _byScope.TryGetValue(scope, out var keys) ? keys[^1] : null;
        return key is not null;
    }

    /// <summary>Whether <paramref name="scope"/> has keys (its datagrams are then accepted only under them).</summary>
    public bool HasScope(uint scope) => _byScope.ContainsKey(scope);

    /// <summary>The key with id <paramref name="id"/>, if held.</summary>
    public bool TryGet(uint id, [NotNullWhen(true)] out ScopedKey? key) => _byId.TryGetValue(id, out key);

    /// <summary>The ids <paramref name="scope"/> holds, oldest first (the last is current).</summary>
    public uint[] IdsOf(uint scope) => _byScope.TryGetValue(scope, out var keys) ? [.. keys.Select(k => k.Id)] : [];

    /// <summary>Forgets every key of <paramref name="scope"/> older than the key <paramref name="keepFrom"/>
    /// (datagrams under them are dropped as <see cref="DatagramRejection.UnknownKey"/> from now on). Returns how many.</summary>
    public int RetireBefore(uint scope, uint keepFrom)
    {
        if (!_byScope.TryGetValue(scope, out var keys))
        {
            return 0;
        }

        int index = keys.FindIndex(k => k.Id == keepFrom);
        for (int i = 0; i < index; i++)
        {
            Remove(keys[0]);
        }

        return Math.Max(0, index);
    }

    /// <summary>Forgets every key of <paramref name="scope"/>: its datagrams are then sealed and accepted under the cluster key
    /// again, as before the GMS handed out any (a node that no longer sends into or belongs to the region).</summary>
    public void RemoveScope(uint scope)
    {
        if (_byScope.TryGetValue(scope, out var keys))
        {
            while (keys.Count > 0)
            {
                Remove(keys[0]);
            }
        }
    }

    private void Remove(ScopedKey key)
    {
        _byId.Remove(key.Id);
        var keys = _byScope[key.Scope];
        keys.Remove(key);
        if (keys.Count == 0)
        {
            _byScope.Remove(key.Scope);
        }

        key.Cipher.Dispose();
    }

    public void Dispose()
    {
        foreach (var key in _byId.Values)
        {
            key.Cipher.Dispose();
        }

        _byId.Clear();
        _byScope.Clear();
    }
}
