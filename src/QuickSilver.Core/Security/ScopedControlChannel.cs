using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;

namespace QuickSilver.Core.Security;

/// <summary>
/// A reliable control channel whose messages name a scope (a region id, as a u32 at <c>scopeOffset</c>) and are
/// authenticated under that scope's key (<see cref="SecureTransport.ScopedKeys"/>), on top of the cluster key that seals
/// the reliable-unicast segments carrying them: tokens, pulls, NAKs, ACKs and stream-start hints of a region then come
/// only from holders of the region's key (docs/security.md, "Keys per region and view"). Each message travels as
/// <code>u8 sealed | message | (sealed = 1:) u8[T] tag | u32 keyId | u32 salt | u64 counter</code>
/// the datagram trailer's layout (<see cref="DatagramSealer"/> in Authenticate mode, under the endpoint's suite), the tag
/// being over the flag and the message (the message stays readable to whoever can open the segment:
/// encryption, if any, is the datagram's). A message is sealed when this node holds a key for its scope; an unsealed one
/// is accepted only for a scope this node holds no key for (a region simulation without a GMS). A message that fails is
/// dropped and counted in <see cref="SecureTransport.MessageCounters"/>, never thrown on. One buffer, grown to the largest
/// message; nothing allocated per message. Core thread only.
/// <para>A message under a key id this node does not hold yet is <b>parked</b>, not dropped: when a region's key
/// rotates, the members install the new view (and key) at slightly different times, and a token or NAK sealed under the
/// new key by a member that installed it first reached one that had not (seen in the whole-stack simulation; the
/// message was lost, and the reliable layer below had already acknowledged it). It is opened when that key is installed
/// (<see cref="ScopedKeyTable.Installed"/>). At most <see cref="MaxParked"/> messages and <see cref="MaxParkedBytes"/>
/// bytes wait; past either the oldest is dropped and counted as <see cref="DatagramRejection.UnknownKey"/>.</para>
/// </summary>
public sealed class ScopedControlChannel : IControlChannel
{
    private readonly IControlChannel _inner;
    private readonly SecureTransport _transport;
    private readonly int _scopeOffset;
    private readonly DatagramSealer _sealer; // its own salt and counter; keys come from the scoped table
    private readonly int _trailerBytes;
    private byte[] _buffer = new byte[256];
    private readonly Queue<(NetAddress From, uint KeyId, byte[] Message)> _parked = new();
    private int _parkedBytes;
    private Action<NetAddress, ReadOnlySpan<byte>>? _onMessage;

    /// <summary>Messages under a key not yet installed that wait for it, at most.</summary>
    public const int MaxParked = 64;

    /// <summary>Bytes of such messages that wait, at most.</summary>
    public const int MaxParkedBytes = 256 << 10;

    public ScopedControlChannel(IControlChannel inner, SecureTransport transport, int scopeOffset)
    {
        _inner = inner ?? throw new ArgumentNullException(nameof(inner));
        _transport = transport ?? throw new ArgumentNullException(nameof(transport));
        ArgumentOutOfRangeException.ThrowIfNegative(scopeOffset);
        _scopeOffset = scopeOffset;
        _sealer = new DatagramSealer(DatagramSecurity.Authenticate, new DatagramKeyRing(transport.ScopedKeys.Suite));
        _trailerBytes = _sealer.Overhead;
        _transport.ScopedKeys.Installed += OnKeyInstalled;
    }

    /// <summary>Messages waiting for their key now.</summary>
    public int Parked => _parked.Count;

    public int MaxMessageBytes => _inner.MaxMessageBytes - 1 - _trailerBytes;

    public bool Send(NetAddress peer, ReadOnlySpan<byte> message)
    {
        if (message.Length > MaxMessageBytes)
        {
            throw new ArgumentException($"A message of {message.Length} bytes exceeds MaxMessageBytes ({MaxMessageBytes}).", nameof(message));
        }

        int length = 1 + message.Length;
        if (_buffer.Length < length + _trailerBytes)
        {
            _buffer = new byte[Math.Max(length + _trailerBytes, _buffer.Length * 2)];
        }

        var buffer = _buffer.AsSpan();
        message.CopyTo(buffer[1..]);
        if (TryScope(message, out uint scope) && _transport.ScopedKeys.TryCurrent(scope, out var key))
        {
            buffer[0] = 1;
            length = _sealer.Seal(buffer, length, key.Cipher, key.Id);
            _transport.MessageCounters.CountSealed();
        }
        else
        {
            buffer[0] = 0;
        }

        return _inner.Send(peer, buffer[..length]);
    }

    public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed)
    {
        ArgumentNullException.ThrowIfNull(onMessage);
        _onMessage = onMessage;
        _inner.SetReceiver((from, message) =>
        {
            if (Open(message, out var inner, out uint waitFor))
            {
                onMessage(from, inner);
            }
            else if (waitFor != 0)
            {
                Park(from, waitFor, message);
            }
        }, onPeerFailed);
    }

    public void Forget(NetAddress peer) => _inner.Forget(peer);

    private void Park(NetAddress from, uint keyId, ReadOnlySpan<byte> message)
    {
        _parked.Enqueue((from, keyId, message.ToArray()));
        _parkedBytes += message.Length;
        while (_parked.Count > MaxParked || _parkedBytes > MaxParkedBytes)
        {
            var (_, _, dropped) = _parked.Dequeue();
            _parkedBytes -= dropped.Length;
            _transport.MessageCounters.CountRejected(DatagramRejection.UnknownKey);
        }
    }

    /// <summary>A key arrived: the messages that waited for it are opened (in arrival order), the others wait on.</summary>
    private void OnKeyInstalled(uint id)
    {
        int count = _parked.Count;
        for (int i = 0; i < count; i++)
        {
            var entry = _parked.Dequeue();
            if (entry.KeyId != id)
            {
                _parked.Enqueue(entry);
                continue;
            }

            _parkedBytes -= entry.Message.Length;
            if (Open(entry.Message, out var inner, out _))
            {
                _onMessage?.Invoke(entry.From, inner);
            }
        }
    }

    /// <summary>Verifies a received message; the layer's message is <paramref name="inner"/>. A message under a key id
    /// not held is not counted but named in <paramref name="waitFor"/> (the caller parks it).</summary>
    private bool Open(ReadOnlySpan<byte> message, out ReadOnlySpan<byte> inner, out uint waitFor)
    {
        inner = default;
        waitFor = 0;
        var rejection = DatagramRejection.None;
        if (message.IsEmpty || message[0] > 1 || (message[0] == 1 && message.Length < 1 + _trailerBytes))
        {
            rejection = DatagramRejection.Truncated;
        }
        else if (message[0] == 0)
        {
            inner = message[1..];
            if (TryScope(inner, out uint scope) && _transport.ScopedKeys.HasScope(scope))
            {
                rejection = DatagramRejection.WrongKey; // this node holds the region's key: everything of it must be sealed
            }
        }
        else
        {
            int length = message.Length - _trailerBytes;
            inner = message[1..length];
            DatagramSealer.TryReadKeyId(message, out uint keyId);
            if (!_transport.ScopedKeys.TryGet(keyId, out var key))
            {
                waitFor = keyId == DatagramKeyRing.ClusterKeyId ? 0 : keyId;
                if (waitFor == 0)
                {
                    rejection = DatagramRejection.UnknownKey;
                }
                else
                {
                    return false; // parked by the caller, counted only if it is dropped
                }
            }
            else
            {
                if (!_sealer.Verify(key.Cipher, message, Span<byte>.Empty, length))
                {
                    rejection = DatagramRejection.BadTag;
                }
                else if (!TryScope(inner, out uint scope) || scope != key.Scope)
                {
                    rejection = DatagramRejection.WrongKey;
                }
            }
        }

        if (rejection != DatagramRejection.None)
        {
            _transport.MessageCounters.CountRejected(rejection);
            return false;
        }

        _transport.MessageCounters.CountOpened();
        return true;
    }

    private bool TryScope(ReadOnlySpan<byte> message, out uint scope)
    {
        scope = 0;
        if (message.Length < _scopeOffset + 4)
        {
            return false;
        }

        scope = BinaryPrimitives.ReadUInt32LittleEndian(message[_scopeOffset..]);
        return true;
    }
}
