using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// The reliable unicast protocol (QSM §2.3: "a simple TCP-like reliable unicast protocol", rate-limited) as a stack layer:
/// in-order, exactly-once delivery per peer over UDP or the simulated network. It owns the ReliableData,
/// ReliableFragment and ReliableAck packet types and offers control channels to the layers above
/// (<see cref="IControlTransport"/>): every message starts with its channel's one-byte id, and arrives at the layer that
/// opened that channel; a message for a channel nobody opened is dropped and counted (UnknownType). I/O-free: it acts
/// only through the context its stack hands it. Core thread only.
/// </summary>
internal sealed class ReliableUnicast : IProtocolLayer, IPacketHandler, IControlTransport
{
    private readonly ReliableUnicastOptions _options;
    private readonly Dictionary<NetAddress, ReliableConnection> _connections = new();
    private readonly List<ReliableConnection> _transmitQueue = new();
    private readonly Channel?[] _channels = new Channel?[256];
    private readonly List<Channel> _open = new();
    private readonly Alarm _paceAlarm;
    private IDatagramTransport _transport = null!;
    private int _maxDatagram;
    private RateLimitedLog? _log;
    private uint _conversations;
    private double _tokens;
    private TimeSpan _tokensAt;

    /// <param name="epoch">This endpoint's incarnation: non-zero and different after a restart (random in production,
    /// from the node's seeded generator in simulation).</param>
    public ReliableUnicast(uint epoch, ReliableUnicastOptions? options = null, uint senderId = 0)
    {
        if (epoch == 0)
        {
            throw new ArgumentOutOfRangeException(nameof(epoch), "The epoch must not be 0 (0 means 'unknown' on the wire).");
        }

        _options = options ?? new ReliableUnicastOptions();
        _options.Validate();
        Epoch = epoch;
        SenderId = senderId;
        _tokens = _options.RateBurstBytes;
        _paceAlarm = new Alarm(_ => Pump());
    }

    public string Name => "reliable-unicast";

    public void Attach(LayerContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        _transport = context.Transport;
        Scheduler = context.Scheduler;
        _log = context.Log;
        _maxDatagram = PacketHeader.Size + ReliableWire.DataHeaderSize + _options.MaxSegmentBytes;
        if (_maxDatagram > _transport.MaxDatagramSize)
        {
            throw new ArgumentException(
                $"ReliableUnicastOptions.MaxSegmentBytes ({_options.MaxSegmentBytes}) plus {PacketHeader.Size + ReliableWire.DataHeaderSize} bytes of headers exceeds the transport's MaxDatagramSize ({_transport.MaxDatagramSize}).",
                nameof(context));
        }

        context.RegisterPacketType(ReliableWire.DataType, this);
        context.RegisterPacketType(ReliableWire.FragmentType, this);
        context.RegisterPacketType(ReliableWire.AckType, this);
    }

    /// <summary>Sends what the layers above queued last (a goodbye) as far as the rate limit allows; retransmission
    /// timers stay, so a stack that stops but keeps running its core still finishes its conversations.</summary>
    public void Stop() => Pump();

    public string Describe() =>
        $"{_connections.Count} peers, channels [{string.Join(", ", _open.Select(c => $"{c.Id}:{c.Owner}"))}], drops {Drops.Total}";

    public uint Epoch { get; }

    public uint SenderId { get; }

    public NetAddress LocalAddress => _transport.LocalAddress;

    public DropCounters Drops { get; } = new();

    /// <summary>The peer stopped acknowledging (or restarted): its connection was reset; the int is how many messages
    /// accepted for it were never acknowledged.</summary>
    public event Action<NetAddress, int>? PeerFailed;

    /// <summary>A connection that refused a send has room again.</summary>
    public event Action<ReliableConnection>? SpaceAvailable;

    internal IAlarmScheduler Scheduler { get; private set; } = null!;

    public int ConnectionCount => _connections.Count;

    /// <summary>The largest message <see cref="TrySend"/> takes (one larger than a segment travels in several); a
    /// control channel's messages are one byte shorter (its id).</summary>
    public int MaxMessageBytes => _options.MaxMessageBytes;

    /// <summary>Opens control channel <paramref name="id"/> for the layer named <paramref name="owner"/>.</summary>
    public IControlChannel OpenChannel(byte id, string owner)
    {
        if (_channels[id] is { } taken)
        {
            throw new ArgumentException($"Control channel {id} is owned by layer '{taken.Owner}'; layer '{owner}' cannot open it too.", nameof(id));
        }

        var channel = new Channel(this, id, owner);
        _channels[id] = channel;
        _open.Add(channel);
        return channel;
    }

    /// <summary>The connection to <paramref name="peer"/>, created on first use.</summary>
    public ReliableConnection Connection(NetAddress peer)
    {
        if (!_connections.TryGetValue(peer, out var connection))
        {
            if (_connections.Count >= _options.MaxPeers)
            {
                throw new InvalidOperationException($"ReliableUnicastOptions.MaxPeers ({_options.MaxPeers}) reached; cannot open a connection to {peer}.");
            }

            connection = new ReliableConnection(this, peer, _options);
            _connections.Add(peer, connection);
        }

        return connection;
    }

    /// <summary>Sends <paramref name="message"/> to <paramref name="peer"/>; false when its send buffer is full.</summary>
    public bool TrySend(NetAddress peer, ReadOnlySpan<byte> message) => Connection(peer).TrySend(message);

    /// <summary>Drops all state for <paramref name="peer"/> without reporting it (the layer above already knows).</summary>
    public void Forget(NetAddress peer)
    {
        if (_connections.Remove(peer, out var connection))
        {
            connection.Reset();
            connection.MarkFailed();
            _transmitQueue.Remove(connection);
        }
    }

    public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        WireError error;
        var body = datagram[PacketHeader.Size..];
        if (header.Type is ReliableWire.DataType or ReliableWire.FragmentType)
        {
            error = ReliableWire.TryReadData(body, out var data);
            if (error != WireError.None)
            {
                Reject(from, error);
                return;
            }

            if (data.PayloadLength > _options.MaxSegmentBytes)
            {
                Reject(from, WireError.Oversized);
                return;
            }

            var connection = FindOrCreateForPeer(from);
            if (connection is null)
            {
                return;
            }

            CheckPeerEpoch(connection, data.SenderEpoch);
            if (data.ReceiverEpoch != 0 && data.ReceiverEpoch != connection.LocalEpoch)
            {
                // Meant for a conversation this side no longer has (it restarted or reset): say which one is current,
                // so the sender ends the old conversation now rather than after its timeouts.
                Drops.Increment(DropReason.Malformed);
                connection.Announce();
                return;
            }

            connection.OnData(data.Seq, datagram.Slice(data.PayloadOffset, data.PayloadLength), last: header.Type == ReliableWire.DataType);
        }
        else
        {
            error = ReliableWire.TryReadAck(body, out var ack);
            if (error != WireError.None)
            {
                Reject(from, error);
                return;
            }

            if (!_connections.TryGetValue(from, out var connection))
            {
                Drops.Increment(DropReason.Malformed); // an ack from a peer we keep no conversation with
                return;
            }

            CheckPeerEpoch(connection, ack.SenderEpoch);
            if (ack.ReceiverEpoch != connection.LocalEpoch)
            {
                Drops.Increment(DropReason.Malformed); // acknowledges an old conversation of ours
                return;
            }

            connection.OnAck(ack.Next, ack.Sack);
        }
    }

    private ReliableConnection? FindOrCreateForPeer(NetAddress from)
    {
        if (_connections.TryGetValue(from, out var connection))
        {
            return connection;
        }

        if (_connections.Count >= _options.MaxPeers)
        {
            Drops.Increment(DropReason.ReceiveBufferFull);
            return null;
        }

        return Connection(from);
    }

    /// <summary>Learns the peer's conversation number; a different one means the peer restarted or reset: the old
    /// conversation is over in both directions, and what it had not acknowledged is reported lost.</summary>
    private void CheckPeerEpoch(ReliableConnection connection, uint senderEpoch)
    {
        if (connection.PeerEpoch == senderEpoch)
        {
            return;
        }

        if (connection.PeerEpoch != 0)
        {
            int lost = connection.Reset();
            RaisePeerFailed(connection.Peer, lost);
        }

        connection.PeerEpoch = senderEpoch;
    }

    /// <summary>A fresh, non-zero conversation number derived from the endpoint's epoch.</summary>
    internal uint NextConversationEpoch()
    {
        uint value;
        do
        {
            value = Epoch + (++_conversations * 0x9E3779B9u);
        }
        while (value == 0);
        return value;
    }

    private void Reject(NetAddress from, WireError error)
    {
        Drops.Increment(error);
        _log?.Warn((int)error, "Reliable unicast: dropped a malformed datagram from {Peer}", from);
    }

    internal void WantsToTransmit(ReliableConnection connection)
    {
        if (!_transmitQueue.Contains(connection))
        {
            _transmitQueue.Add(connection);
        }

        if (!_paceAlarm.IsScheduled)
        {
            Scheduler.Schedule(_paceAlarm, Scheduler.Now);
        }
    }

    private void Pump()
    {
        for (int i = 0; i < _transmitQueue.Count; i++)
        {
            if (!_transmitQueue[i].TransmitNew())
            {
                // Out of rate-limit tokens: come back when one full datagram's worth has refilled.
                var wait = TimeSpan.FromSeconds((double)_maxDatagram / _options.RateLimitBytesPerSecond);
                Scheduler.ScheduleAfter(_paceAlarm, wait);
                return;
            }

            _transmitQueue.RemoveAt(i--);
        }
    }

    internal bool TrySendData(ReliableConnection connection, ulong seq, ReadOnlySpan<byte> payload, bool last)
    {
        int length = PacketHeader.Size + ReliableWire.DataHeaderSize + payload.Length;
        if (!TakeTokens(length))
        {
            WantsToTransmit(connection);
            return false;
        }

        // Written in place into the transport's send slot. A full send queue loses this transmission (counted by the
        // transport); the retransmission timer sends it again.
        if (_transport.TryClaim(out var slot))
        {
            ReliableWire.WriteData(slot, last ? ReliableWire.DataType : ReliableWire.FragmentType, SenderId, connection.LocalEpoch, connection.PeerEpoch, seq, payload);
            _transport.Commit(connection.Peer, length);
        }

        return true;
    }

    internal void SendAck(ReliableConnection connection, ulong next, ulong sack)
    {
        if (connection.PeerEpoch == 0)
        {
            return;
        }

        if (_transport.TryClaim(out var slot))
        {
            int length = ReliableWire.WriteAck(slot, SenderId, connection.LocalEpoch, connection.PeerEpoch, next, sack);
            _transport.Commit(connection.Peer, length);
        }
    }

    private bool TakeTokens(int bytes)
    {
        var now = Scheduler.Now;
        _tokens = Math.Min(_options.RateBurstBytes, _tokens + ((now - _tokensAt).TotalSeconds * _options.RateLimitBytesPerSecond));
        _tokensAt = now;
        if (_tokens < bytes)
        {
            return false;
        }

        _tokens -= bytes;
        return true;
    }

    /// <summary>A whole message from a connection: to the channel its first byte names.</summary>
    internal void Deliver(ReliableConnection connection, ReadOnlySpan<byte> payload)
    {
        if (payload.IsEmpty || _channels[payload[0]] is not { } channel)
        {
            Reject(connection.Peer, payload.IsEmpty ? WireError.Truncated : WireError.UnknownType);
            return;
        }

        channel.Receive(connection.Peer, payload[1..]);
    }

    internal void RaiseSpaceAvailable(ReliableConnection connection) => SpaceAvailable?.Invoke(connection);

    internal void ReportFailed(ReliableConnection connection)
    {
        _connections.Remove(connection.Peer);
        _transmitQueue.Remove(connection);
        int lost = connection.Reset();
        connection.MarkFailed();
        RaisePeerFailed(connection.Peer, lost);
    }

    private void RaisePeerFailed(NetAddress peer, int lost)
    {
        PeerFailed?.Invoke(peer, lost);
        foreach (var channel in _open)
        {
            channel.PeerFailed(peer);
        }
    }

    /// <summary>One layer's control channel: its id goes in front of each message it sends.</summary>
    private sealed class Channel(ReliableUnicast owner, byte id, string name) : IControlChannel
    {
        private Action<NetAddress, ReadOnlySpan<byte>>? _onMessage;
        private Action<NetAddress>? _onPeerFailed;

        public byte Id => id;

        public string Owner => name;

        public int MaxMessageBytes => owner.MaxMessageBytes - 1;

        public bool Send(NetAddress peer, ReadOnlySpan<byte> message) => owner.Connection(peer).TrySend(id, message);

        public void SetReceiver(Action<NetAddress, ReadOnlySpan<byte>> onMessage, Action<NetAddress> onPeerFailed)
        {
            _onMessage = onMessage ?? throw new ArgumentNullException(nameof(onMessage));
            _onPeerFailed = onPeerFailed ?? throw new ArgumentNullException(nameof(onPeerFailed));
        }

        public void Forget(NetAddress peer) => owner.Forget(peer);

        internal void Receive(NetAddress peer, ReadOnlySpan<byte> message)
        {
            if (_onMessage is null)
            {
                owner.Drops.Increment(DropReason.NoHandler);
                return;
            }

            _onMessage(peer, message);
        }

        internal void PeerFailed(NetAddress peer) => _onPeerFailed?.Invoke(peer);
    }
}

