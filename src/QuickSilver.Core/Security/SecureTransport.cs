using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Security;

/// <summary>
/// The one place every datagram of a stack is authenticated (and, if asked, encrypted): a decorator around the
/// stack's endpoint, so region data, flow status, reliable-unicast segments (tokens, NAKs, ACKs, GMS messages) and
/// anything a later layer sends all pass through it. The layers see a <see cref="MaxDatagramSize"/> smaller by the
/// trailer (<see cref="DatagramSealer.Overhead"/>) and write as before:
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
/// No allocation per datagram: one <see cref="System.Security.Cryptography.AesGcm"/> per key, reused; the tag is compared on the stack.
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

    public SecureTransport(IDatagramTransport inner, DatagramSecurityOptions options, RateLimitedLog? log = null)
    {
        ArgumentNullException.ThrowIfNull(inner);
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        if (!options.Enabled)
        {
            throw new ArgumentException("A SecureTransport needs DatagramSecurityOptions.Mode Authenticate or Encrypt.", nameof(options));
        }

        if (inner.MaxDatagramSize <= DatagramSealer.Overhead + Wire.PacketHeader.Size)
        {
            throw new ArgumentException($"The endpoint's datagrams ({inner.MaxDatagramSize} bytes) leave no room for the {DatagramSealer.Overhead}-byte trailer.", nameof(inner));
        }

        _inner = inner;
        _log = log;
        Keys = DatagramKeyRing.FromSecret(options.ClusterSecret, options.Mode);
        _sealer = new DatagramSealer(options.Mode, Keys);
        _replays = options.ReplayWindow > 0 ? new ReplayWindow(options.ReplayWindow, options.MaxReplaySources) : null;
        if (_replays is { } replays)
        {
            Counters.ReplayEvictions = () => replays.Evicted;
        }

        _plaintext = options.Mode == DatagramSecurity.Encrypt ? new byte[inner.MaxDatagramSize] : null;
    }

    public DatagramSecurity Mode => _sealer.Mode;

    /// <summary>The keys datagrams are sealed and opened under (the cluster key, id 0, until keys are rotated).</summary>
    public DatagramKeyRing Keys { get; }

    public DatagramSecurityCounters Counters { get; } = new();

    /// <summary>The endpoint this decorates.</summary>
    public IDatagramTransport Inner => _inner;

    public NetAddress LocalAddress => _inner.LocalAddress;

    /// <summary>The endpoint's datagram size less the trailer.</summary>
    public int MaxDatagramSize => _inner.MaxDatagramSize - DatagramSealer.Overhead;

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
            throw new ArgumentException($"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({MaxDatagramSize}, the endpoint's less the {DatagramSealer.Overhead}-byte trailer).", nameof(datagram));
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
        return _sealer.Seal(slot, length);
    }

    /// <summary>The part of an endpoint slot a layer may write: all but the trailer's room.</summary>
    internal static Span<byte> Layer(Span<byte> whole) => whole[..(whole.Length - DatagramSealer.Overhead)];

    void IDatagramHandler.OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        var rejection = _sealer.Open(datagram, _plaintext, out int length, out uint salt, out ulong counter);
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

    /// <summary>Log keys of rejections, clear of the dispatcher's (which uses the <see cref="Wire.WireError"/> values).</summary>
    private const int RejectionLogKey = 1000;

    public void Dispose() => Keys.Dispose();
}
