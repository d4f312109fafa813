using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Security;

/// <summary>
/// The one place every datagram of a stack is authenticated (and, if asked, encrypted): a decorator around the
/// stack's endpoint, so region data, flow status, reliable-unicast segments (tokens, NAKs, ACKs, GMS messages) and
/// anything a later layer sends all pass through it. The layers see a <see cref="MaxDatagramSize"/> smaller by the
/// trailer (<see cref="Overhead"/>) and write as before:
/// <list type="bullet">
/// <item><see cref="TrySend"/>: the datagram is copied into the endpoint's next slot and sealed there.</item>
/// <item><see cref="TryClaim"/>/<see cref="Commit"/>: the layer writes into the endpoint's slot, less the trailer's
/// room; <see cref="Commit"/> seals it in place (<see cref="IDatagramTransport.ClaimedSlot"/>).</item>
/// <item><see cref="RegisterFeed"/>: the feed is wrapped (<see cref="SealingFeed"/>) so what it writes into a slot is
/// sealed in place before the endpoint queues it.</item>
/// <item>Receiving: every datagram is verified before the stack's dispatcher sees it (decrypted into a buffer of this
/// transport's own when encrypting); one that fails is dropped and counted (<see cref="Counters"/>), never thrown on,
/// and logged at most once per reason per interval.</item>
/// </list>
/// No allocation per datagram: one <see cref="DatagramCipher"/> per key, reused.
/// Built by <see cref="Stack.StackBuilder"/> when the stack's <see cref="DatagramSecurityOptions.Mode"/> is not Off.
/// Core thread only.
/// </summary>
public sealed class SecureTransport : IDatagramTransport, IDatagramHandler, IDisposable
{
    private readonly IDatagramTransport _inner;
    private readonly DatagramSealer _sealer;
    private readonly ReplayWindow? _replays;
    private readonly byte[]? _plaintext;
    private readonly RateLimitedLog? _log;
    private IDatagramHandler? _handler;
    private readonly long _maxDatagramsPerKey;

    /// <summary>Per packet type, the offset of the u32 scope (region id) in its datagrams, or -1: not scoped.</summary>
    private readonly short[] _scopeOffset = CreateScopeOffsets();

    public SecureTransport(IDatagramTransport inner, DatagramSecurityOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(inner);
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        if (!options.Enabled)
        {
            throw new ArgumentException("A SecureTransport needs DatagramSecurityOptions.Mode Authenticate or Encrypt.", nameof(options));
        }

        Overhead = DatagramSealer.OverheadOf(options.Cipher);
        if (inner.MaxDatagramSize <= Overhead + Wire.PacketHeader.Size)
        {
            throw new ArgumentException($"The endpoint's datagrams ({inner.MaxDatagramSize} bytes) leave no room for the {Overhead}-byte trailer.", nameof(inner));
        }

        _inner = inner;
        _log = log;
        Keys = DatagramKeyRing.FromSecret(options.ClusterSecret, options.Mode, options.Cipher);
        ScopedKeys = new ScopedKeyTable(options.Cipher);
        _sealer = new DatagramSealer(options.Mode, Keys);
        _replays = options.ReplayWindow > 0 ? new ReplayWindow(options.ReplayWindow, options.MaxReplaySources) : null;
        if (_replays is { } replays)
        {
            Counters.ReplayEvictions = () => replays.Evicted;
        }

        _plaintext = options.Mode == DatagramSecurity.Encrypt ? new byte[inner.MaxDatagramSize] : null;
        _maxDatagramsPerKey = options.MaxDatagramsPerKey;
        KeyWrap = new RegionKeyWrap(options.ClusterSecret);
        KeyRetireDelay = options.KeyRetireDelay;
    }

    /// <summary>The keys the GMS handed out per region (docs/security.md, "Keys per region and view"): a datagram of a
    /// scoped type (<see cref="ScopeByField"/>) is sealed under its region's current key when this endpoint holds one,
    /// and accepted only under a key of that region once it does.</summary>
    public ScopedKeyTable ScopedKeys { get; }

    /// <summary>Bytes the trailer adds to every datagram (<see cref="DatagramSealer.OverheadOf"/> the suite).</summary>
    public int Overhead { get; }

    /// <summary>Wraps region keys for the GMS's hand-out and unwraps them at a node (key derived from the cluster secret).</summary>
    public RegionKeyWrap KeyWrap { get; }

    /// <summary><see cref="DatagramSecurityOptions.KeyRetireDelay"/>, for the layer that installs and retires keys.</summary>
    public TimeSpan KeyRetireDelay { get; }

    /// <summary>Raised (scope, key id) when this endpoint has sealed <see cref="DatagramSecurityOptions.MaxDatagramsPerKey"/>
    /// datagrams under a region key, and again after each further eighth of it while the key stays current: time to ask
    /// for a new one. Sealing goes on under the worn key meanwhile.</summary>
    public event Action<uint, uint>? KeyWornOut;

    /// <summary>Datagrams of <paramref name="type"/> carry their scope (a region id) as a u32 at
    /// <paramref name="offset"/>: they are sealed under that scope's key and accepted only under it
    /// (<see cref="ScopedKeys"/>). Called by the layer that owns the type when it attaches.</summary>
    public void ScopeByField(Wire.PacketType type, int offset)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(offset, Wire.PacketHeader.Size);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(offset, 1024);
        _scopeOffset[(byte)type] = (short)offset;
    }

    private static short[] CreateScopeOffsets()
    {
        var offsets = new short[256];
        Array.Fill(offsets, (short)-1);
        return offsets;
    }

    /// <summary>The scope a layer's datagram names, if its type is scoped and it is long enough to name one.</summary>
    private bool TryScope(ReadOnlySpan<byte> datagram, out uint scope)
    {
        scope = 0;
        if (datagram.Length < Wire.PacketHeader.Size)
        {
            return false;
        }

        int offset = _scopeOffset[datagram[3]]; // the common header's type byte
        if (offset < 0 || datagram.Length < offset + 4)
        {
            return false;
        }

        scope = System.Buffers.Binary.BinaryPrimitives.ReadUInt32LittleEndian(datagram[offset..]);
        return true;
    }

    public DatagramSecurity Mode => _sealer.Mode;

    /// <summary>The keys datagrams are sealed and opened under (the cluster key, id 0, until keys are rotated).</summary>
    public DatagramKeyRing Keys { get; }

    public DatagramSecurityCounters Counters { get; } = new();

    /// <summary>Control messages of scoped channels (<see cref="ScopedControlChannel"/>: a region's tokens, pulls, NAKs,
    /// ACKs and stream-start hints) sealed, opened and dropped under region keys.</summary>
    public DatagramSecurityCounters MessageCounters { get; } = new();

    /// <summary>The endpoint this decorates.</summary>
    public IDatagramTransport Inner => _inner;

    /// <summary>The inner transport's (a datagram dropped for a full queue was never opened).</summary>
    public long ReceiveOverflows => _inner.ReceiveOverflows;

    public NetAddress LocalAddress => _inner.LocalAddress;

    /// <summary>The endpoint's datagram size less the trailer.</summary>
    public int MaxDatagramSize => _inner.MaxDatagramSize - Overhead;

    public Span<byte> ClaimedSlot => Layer(_inner.ClaimedSlot);

    public void SetHandler(IDatagramHandler handler)
    {
        _handler = handler ?? throw new ArgumentNullException(nameof(handler));
        _inner.SetHandler(this);
    }

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > MaxDatagramSize)
        {
            throw new ArgumentException($"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({MaxDatagramSize}, the endpoint's less the {Overhead}-byte trailer).", nameof(datagram));
        }

        if (!_inner.TryClaim(out var slot))
        {
            return false;
        }

        datagram.CopyTo(slot);
        _inner.Commit(to, Seal(slot, datagram.Length));
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        if (!_inner.TryClaim(out var whole))
        {
            slot = default;
            return false;
        }

        slot = Layer(whole);
        return true;
    }

    public void Commit(NetAddress to, int length)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(length, MaxDatagramSize);
        _inner.Commit(to, Seal(_inner.ClaimedSlot, length));
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        ArgumentNullException.ThrowIfNull(feed);
        return _inner.RegisterFeed(new SealingFeed(feed, this));
    }

    public void JoinGroup(NetAddress group) => _inner.JoinGroup(group);

    public void LeaveGroup(NetAddress group) => _inner.LeaveGroup(group);

    /// <summary>Seals <paramref name="slot"/>[..<paramref name="length"/>] in place; returns the sealed length.</summary>
    internal int Seal(Span<byte> slot, int length)
    {
        Counters.CountSealed();
        if (ScopedKeys.Count > 0 && TryScope(slot[..length], out uint scope) && ScopedKeys.TryCurrent(scope, out var key))
        {
            if (++key.Sealed >= _maxDatagramsPerKey && key.Sealed >= key.NextWearReport)
            {
                key.NextWearReport = key.Sealed + Math.Max(1, _maxDatagramsPerKey / 8);
                KeyWornOut?.Invoke(scope, key.Id);
            }

            return _sealer.Seal(slot, length, key.Cipher, key.Id);
        }

        return _sealer.Seal(slot, length);
    }

    /// <summary>The part of an endpoint slot a layer may write: all but the trailer's room.</summary>
    internal Span<byte> Layer(Span<byte> whole) => whole[..(whole.Length - Overhead)];

    void IDatagramHandler.OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        var rejection = _sealer.Open(datagram, _plaintext, ScopedKeys, out int length, out uint salt, out ulong counter, out var key);
        if (rejection == DatagramRejection.None && !Covers(key, _plaintext is null ? datagram[..length] : _plaintext.AsSpan(0, length)))
        {
            rejection = DatagramRejection.WrongKey;
        }

        if (rejection == DatagramRejection.None && _replays is not null && !_replays.Accept(from, salt, counter))
        {
            rejection = DatagramRejection.Replayed;
        }

        if (rejection != DatagramRejection.None)
        {
            Counters.CountRejected(rejection);
            _log?.Warn(RejectionLogKey + (int)rejection, "Dropped a datagram that failed authentication from {Peer}", from);
            return;
        }

        Counters.CountOpened();
        var inner = _plaintext is null ? datagram[..length] : _plaintext.AsSpan(0, length);
        if (_handler is null)
        {
            return;
        }

        _handler.OnDatagram(from, inner);
    }

    /// <summary>Whether the key a datagram verified under may seal it: a region key only its own region's datagrams; the
    /// cluster key (<paramref name="key"/> null) anything but the datagrams of a region this endpoint holds keys for.</summary>
    private bool Covers(ScopedKey? key, ReadOnlySpan<byte> datagram)
    {
        bool scoped = TryScope(datagram, out uint scope);
        return key is null ? !scoped || !ScopedKeys.HasScope(scope) : scoped && scope == key.Scope;
    }

    /// <summary>Log keys of rejections, clear of the dispatcher's (which uses the <see cref="Wire.WireError"/> values).</summary>
    private const int RejectionLogKey = 1000;

    public void Dispose()
    {
        Keys.Dispose();
        ScopedKeys.Dispose();
        KeyWrap.Dispose();
    }
}
