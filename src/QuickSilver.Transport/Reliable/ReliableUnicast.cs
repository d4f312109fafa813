using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// The reliable unicast protocol (QSM §2.3: "a simple TCP-like reliable unicast protocol", rate-limited) on one
/// datagram endpoint: in-order, exactly-once delivery per peer over UDP or the simulated network. It handles
/// ReliableData and ReliableAck packets and passes every other datagram to <see cref="Fallback"/>. I/O-free: it acts
/// only through the <see cref="IDatagramTransport"/> and <see cref="IAlarmScheduler"/> it is given. Core thread only.
/// </summary>
public sealed class ReliableUnicast : IDatagramHandler
{
    private readonly IDatagramTransport _transport;
    private readonly ReliableUnicastOptions _options;
    private readonly Dictionary<NetAddress, ReliableConnection> _connections = new();
    private readonly List<ReliableConnection> _transmitQueue = new();
    private readonly byte[] _datagram;
    private readonly Alarm _paceAlarm;
    private readonly RateLimitedLog? _log;
    private uint _conversations;
    private double _tokens;
    private TimeSpan _tokensAt;

    /// <param name="epoch">This endpoint's incarnation: non-zero and different after a restart (random in production,
    /// from the node's seeded generator in simulation).</param>
    public ReliableUnicast(IDatagramTransport transport, IAlarmScheduler scheduler, uint epoch, ReliableUnicastOptions? options = null,
        uint senderId = 0, RateLimitedLog? log = null)
    {
        _transport = transport ?? throw new ArgumentNullException(nameof(transport));
        Scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        if (epoch == 0)
        {
            throw new ArgumentOutOfRangeException(nameof(epoch), "The epoch must not be 0 (0 means 'unknown' on the wire).");
        }

        _options = options ?? new ReliableUnicastOptions();
        _options.Validate();
        Epoch = epoch;
        SenderId = senderId;
        _log = log;
        _datagram = new byte[PacketHeader.Size + ReliableWire.DataHeaderSize + _options.MaxSegmentBytes];
        if (_datagram.Length > transport.MaxDatagramSize)
        {
            throw new ArgumentException(
                $"ReliableUnicastOptions.MaxSegmentBytes ({_options.MaxSegmentBytes}) plus {PacketHeader.Size + ReliableWire.DataHeaderSize} bytes of headers exceeds the transport's MaxDatagramSize ({transport.MaxDatagramSize}).",
                nameof(options));
        }

        _tokens = _options.RateBurstBytes;
        _paceAlarm = new Alarm(_ => Pump());
    }

    public uint Epoch { get; }

    public uint SenderId { get; }

    public NetAddress LocalAddress => _transport.LocalAddress;

    public DropCounters Drops { get; } = new();

    /// <summary>Datagrams that are not reliable-unicast packets go here.</summary>
    public IDatagramHandler? Fallback { get; set; }

    /// <summary>A message from <c>peer</c>, in order, exactly once. The span is valid only during the call.</summary>
    public event ReliableMessageHandler? MessageReceived;

    /// <summary>The peer stopped acknowledging (or restarted): its connection was reset; the int is how many messages
    /// accepted for it were never acknowledged.</summary>
    public event Action<NetAddress, int>? PeerFailed;

    /// <summary>A connection that refused a send has room again.</summary>
    public event Action<ReliableConnection>? SpaceAvailable;

    internal IAlarmScheduler Scheduler { get; }

    public int ConnectionCount => _connections.Count;

    /// <summary>The largest message <see cref="TrySend"/> takes (one larger than a segment travels in several).</summary>
    public int MaxMessageBytes => _options.MaxMessageBytes;

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

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        var error = PacketHeader.TryRead(datagram, out var header);
        if (error != WireError.None || header.Type is not (PacketType.ReliableData or PacketType.ReliableFragment or PacketType.ReliableAck))
        {
            if (error == WireError.None && Fallback is not null)
            {
                Fallback.OnDatagram(from, datagram);
                return;
            }

            Reject(from, error == WireError.None ? WireError.UnknownType : error);
            return;
        }

        var body = datagram[PacketHeader.Size..];
        if (header.Type is PacketType.ReliableData or PacketType.ReliableFragment)
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

            connection.OnData(data.Seq, datagram.Slice(data.PayloadOffset, data.PayloadLength), last: header.Type == PacketType.ReliableData);
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
            PeerFailed?.Invoke(connection.Peer, lost);
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
                var wait = TimeSpan.FromSeconds((double)_datagram.Length / _options.RateLimitBytesPerSecond);
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

        ReliableWire.WriteData(_datagram, last ? PacketType.ReliableData : PacketType.ReliableFragment, SenderId, connection.LocalEpoch, connection.PeerEpoch, seq, payload);
        _transport.TrySend(connection.Peer, _datagram.AsSpan(0, length));
        return true;
    }

    internal void SendAck(ReliableConnection connection, ulong next, ulong sack)
    {
        if (connection.PeerEpoch == 0)
        {
            return;
        }

        Span<byte> ack = stackalloc byte[PacketHeader.Size + ReliableWire.AckBodySize];
        int length = ReliableWire.WriteAck(ack, SenderId, connection.LocalEpoch, connection.PeerEpoch, next, sack);
        _transport.TrySend(connection.Peer, ack[..length]);
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

    internal void Deliver(ReliableConnection connection, ReadOnlySpan<byte> payload) => MessageReceived?.Invoke(connection.Peer, payload);

    internal void RaiseSpaceAvailable(ReliableConnection connection) => SpaceAvailable?.Invoke(connection);

    internal void ReportFailed(ReliableConnection connection)
    {
        _connections.Remove(connection.Peer);
        _transmitQueue.Remove(connection);
        int lost = connection.Reset();
        connection.MarkFailed();
        PeerFailed?.Invoke(connection.Peer, lost);
    }
}

/// <summary>Receives one reliable message; the span is valid only during the call.</summary>
public delegate void ReliableMessageHandler(NetAddress peer, ReadOnlySpan<byte> message);
