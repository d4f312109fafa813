using System.Buffers.Binary;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// The reliable unicast protocol (QSM §2.3: "a simple TCP-like reliable unicast protocol", rate-limited) as a stack layer:
/// in-order, exactly-once delivery per peer over UDP or the simulated network. It owns the ReliableData,
/// ReliableFragment, ReliableAck, ReliableConnect and ReliableChallenge packet types. A conversation starts with a
/// cookie handshake, so a host that cannot receive at the address it claims gets no state and cannot end or reset a
/// conversation; the peer table is bounded in total and per source address, and idle connections expire
/// (docs/security.md). It offers control channels to the layers above
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
    private readonly Alarm _sweepAlarm;
    private readonly Dictionary<uint, int> _perIp = new();
    private readonly List<ReliableConnection> _expired = new();
    private readonly HandshakeCookies _cookies;
    private IDatagramTransport _transport = null!;
    private int _maxDatagram;
    private RateLimitedLog? _log;
    private double _tokens;
    private TimeSpan _tokensAt;
    private double _challengeTokens;
    private TimeSpan _challengeTokensAt;

    private const int RefusedLogKey = 1000;

    /// <summary>The options this endpoint runs with.</summary>
    internal ReliableUnicastOptions Options => _options;

    /// <param name="epoch">This endpoint's incarnation: non-zero and different after a restart (random in production,
    /// from the node's seeded generator in simulation). Conversation numbers do not derive from it: they come from
    /// the endpoint's random handshake key, so no peer can predict one from another.</param>
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
        _challengeTokens = Math.Max(1, _options.MaxChallengesPerSecond / 10.0);
        _cookies = new HandshakeCookies(_options.CookieLifetime);
        _paceAlarm = new Alarm(_ => Pump());
        _sweepAlarm = new Alarm(_ => Sweep());
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
        context.RegisterPacketType(ReliableWire.ConnectType, this);
        context.RegisterPacketType(ReliableWire.ChallengeType, this);
    }

    /// <summary>Sends what the layers above queued last (a goodbye) as far as the rate limit allows; retransmission
    /// timers stay, so a stack that stops but keeps running its core still finishes its conversations.</summary>
    public void Stop() => Pump();

    public string Describe() =>
        $"{_connections.Count} peers, channels [{string.Join(", ", _open.Select(c => $"{c.Id}:{c.Owner}"))}], drops {Drops.Total}, {Counters}";

    public uint Epoch { get; }

    public uint SenderId { get; }

    public NetAddress LocalAddress => _transport.LocalAddress;

    public DropCounters Drops { get; } = new();

    /// <summary>The handshake's and the peer table's counters.</summary>
    public ReliableUnicastCounters Counters { get; } = new();

    /// <summary>The peer stopped answering (MaxRetransmissions timeouts in a row, or an unanswered handshake): its
    /// connection was dropped; the int is how many messages accepted for it were never acknowledged. Also raised, with
    /// 1, when a peer that restarted had acknowledged only the first segments of a message (the rest cannot be finished
    /// in a new conversation; whole unacknowledged messages move to the new conversation and are not reported).</summary>
    public event Action<NetAddress, int>? PeerFailed;

    /// <summary>A connection that refused a send has room again.</summary>
    public event Action<ReliableConnection>? SpaceAvailable;

    internal IAlarmScheduler Scheduler { get; private set; } = null!;

    public int ConnectionCount => _connections.Count;

    /// <summary>Connections with peers at <paramref name="ip"/>.</summary>
    public int ConnectionsTo(uint ip) => _perIp.GetValueOrDefault(ip);

    /// <summary>The connection to <paramref name="peer"/> if there is one (opening or established), without opening one.</summary>
    public ReliableConnection? Find(NetAddress peer) => _connections.GetValueOrDefault(peer);

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

    /// <summary>The connection to <paramref name="peer"/>, opened (handshake started) on first use. Throws
    /// <see cref="InvalidOperationException"/> when the peer table is full.</summary>
    public ReliableConnection Connection(NetAddress peer) => TryConnection(peer, out var connection)
        ? connection
        : throw new InvalidOperationException($"ReliableUnicastOptions.MaxPeers ({_options.MaxPeers}) reached; cannot open a connection to {peer}.");

    /// <summary>The connection to <paramref name="peer"/>, opened (handshake started) on first use; false, counted, when
    /// the peer table is full.</summary>
    internal bool TryConnection(NetAddress peer, out ReliableConnection connection)
    {
        if (_connections.TryGetValue(peer, out connection!))
        {
            return true;
        }

        if (_connections.Count >= _options.MaxPeers)
        {
            Counters.RefusedTableFull++;
            Drops.Increment(DropReason.SendQueueFull);
            _log?.Warn(RefusedLogKey + 2, "Reliable unicast: peer table full (ReliableUnicastOptions.MaxPeers): no connection to {Peer}", peer);
            return false;
        }

        connection = Add(peer, inbound: false);
        connection.StartHandshake();
        return true;
    }

    /// <summary>Sends <paramref name="message"/> to <paramref name="peer"/>; false when its send buffer or the peer
    /// table is full.</summary>
    public bool TrySend(NetAddress peer, ReadOnlySpan<byte> message) => TryConnection(peer, out var connection) && connection.TrySend(message);

    /// <summary>Drops all state for <paramref name="peer"/> without reporting it (the layer above already knows).</summary>
    public void Forget(NetAddress peer)
    {
        if (_connections.TryGetValue(peer, out var connection))
        {
            Remove(connection);
            connection.Reset();
            connection.MarkFailed();
        }
    }

    public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        var body = datagram[PacketHeader.Size..];
        switch (header.Type)
        {
            case ReliableWire.DataType or ReliableWire.FragmentType:
                OnDataPacket(from, header.Type, datagram, body);
                break;
            case ReliableWire.AckType:
                OnAckPacket(from, datagram, body);
                break;
            case ReliableWire.ConnectType:
                OnConnect(from, datagram, body);
                break;
            default:
                OnChallenge(from, datagram, body);
                break;
        }
    }

    /// <summary>Data is accepted only when it names this side's conversation number first (the receiver epoch, which an
    /// off-path host cannot know), then the peer's. Anything else belongs to no conversation here: at most it is answered
    /// by a challenge, and it never ends, resets or opens one.</summary>
    private void OnDataPacket(NetAddress from, PacketType type, ReadOnlySpan<byte> datagram, ReadOnlySpan<byte> body)
    {
        var error = ReliableWire.TryReadData(body, out var data);
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

        if (!_connections.TryGetValue(from, out var connection) || data.ReceiverEpoch != connection.LocalEpoch)
        {
            UnknownConversation(from, data.SenderEpoch, data.ReceiverEpoch, datagram.Length);
            return;
        }

        if (!connection.IsEstablished)
        {
            // Our connect was accepted and the acknowledgement saying so was lost: the data names our fresh number.
            connection.Establish(data.SenderEpoch);
            Counters.HandshakesCompleted++;
        }
        else if (data.SenderEpoch != connection.PeerEpoch)
        {
            StaleEpoch(); // the peer's previous conversation, delayed in the network
            return;
        }

        connection.LastHeard = Scheduler.Now;
        connection.OnData(data.Seq, datagram.Slice(data.PayloadOffset, data.PayloadLength), last: type == ReliableWire.DataType);
    }

    private void OnAckPacket(NetAddress from, ReadOnlySpan<byte> datagram, ReadOnlySpan<byte> body)
    {
        var error = ReliableWire.TryReadAck(body, out var ack);
        if (error != WireError.None)
        {
            Reject(from, error);
            return;
        }

        if (!_connections.TryGetValue(from, out var connection) || ack.ReceiverEpoch != connection.LocalEpoch)
        {
            UnknownConversation(from, ack.SenderEpoch, ack.ReceiverEpoch, datagram.Length);
            return;
        }

        if (!connection.IsEstablished)
        {
            connection.Establish(ack.SenderEpoch, answersOurConnect: true); // the peer accepted our cookie: its first ack names our number
            Counters.HandshakesCompleted++;
        }
        else if (ack.SenderEpoch != connection.PeerEpoch)
        {
            StaleEpoch();
            return;
        }

        connection.LastHeard = Scheduler.Now;
        connection.OnAck(ack.Next, ack.Sack);
    }

    /// <summary>Answering side of the handshake. A connect without a valid cookie is answered by a challenge and leaves
    /// no state; one with a valid cookie (so its sender receives at its address) opens a conversation, within the
    /// peer-table bounds. A valid connect with a new number from a peer we have a conversation with means the peer
    /// started a new one (it restarted or dropped ours): ours ends.</summary>
    private void OnConnect(NetAddress from, ReadOnlySpan<byte> datagram, ReadOnlySpan<byte> body)
    {
        var error = ReliableWire.TryReadConnect(body, out var connect);
        if (error != WireError.None || !IsUnicast(from))
        {
            Reject(from, error == WireError.None ? WireError.Malformed : error); // a group or broadcast source is forged
            return;
        }

        _connections.TryGetValue(from, out var connection);
        if (connection is { IsEstablished: true } && connection.PeerEpoch == connect.First)
        {
            connection.LastHeard = Scheduler.Now;
            connection.SendAckNow(); // our acceptance was lost: the opener repeats its connect
            return;
        }

        var cookie = datagram.Slice(ReliableWire.CookieOffset, HandshakeCookies.Size);
        if (BinaryPrimitives.ReadUInt128LittleEndian(cookie) == UInt128.Zero)
        {
            Challenge(from, connect.First, 0, datagram.Length);
            return;
        }

        if (!_cookies.IsValid(from, connect.First, Scheduler.Now, cookie))
        {
            Counters.CookiesRejected++;
            Drops.Increment(DropReason.Malformed);
            Challenge(from, connect.First, 0, datagram.Length); // an expired cookie: the real opener gets a fresh one
            return;
        }

        if (connection is { IsEstablished: true })
        {
            // The peer started a new conversation: ours is over; what it never acknowledged goes into the new one.
            Renew(connection);
            _connections.TryGetValue(from, out connection); // gone if the layer above forgot the peer on a loss report
        }

        if (connection is null)
        {
            if (_connections.Count >= _options.MaxPeers)
            {
                Counters.RefusedTableFull++;
                Drops.Increment(DropReason.ReceiveBufferFull);
                _log?.Warn(RefusedLogKey, "Reliable unicast: peer table full (ReliableUnicastOptions.MaxPeers): handshake from {Peer} not answered", from);
                return;
            }

            if (_perIp.GetValueOrDefault(from.Ip) >= _options.MaxConnectionsPerIp)
            {
                Counters.RefusedPerSource++;
                Drops.Increment(DropReason.ReceiveBufferFull);
                _log?.Warn(RefusedLogKey + 1, "Reliable unicast: {Peer}'s address has ReliableUnicastOptions.MaxConnectionsPerIp connections: handshake not answered", from);
                return;
            }

            connection = Add(from, inbound: true);
        }

        // Ours, still opening (both sides opened at once), or new: the peer's number is now known.
        connection.Establish(connect.First);
        connection.LastHeard = Scheduler.Now;
        Counters.HandshakesAccepted++;
        connection.SendAckNow();
    }

    /// <summary>Opening side: a challenge is believed only when it echoes one of our conversation numbers (which only a
    /// host that saw our datagram knows). Echoing an opening conversation's connect: send the cookie back. Echoing an
    /// established conversation's data or ack: the peer has no such conversation (it restarted, or expired ours), so
    /// ours is over.</summary>
    private void OnChallenge(NetAddress from, ReadOnlySpan<byte> datagram, ReadOnlySpan<byte> body)
    {
        var error = ReliableWire.TryReadChallenge(body, out var challenge);
        if (error != WireError.None)
        {
            Reject(from, error);
            return;
        }

        if (!_connections.TryGetValue(from, out var connection) || challenge.First != connection.LocalEpoch)
        {
            Counters.UnknownConversation++;
            Drops.Increment(DropReason.Malformed); // not an answer to anything of ours: never answered
            return;
        }

        if (challenge.Second == 0)
        {
            if (connection.IsEstablished)
            {
                StaleEpoch(); // a late answer to a connect repeated before the handshake completed
                return;
            }

            var cookie = BinaryPrimitives.ReadUInt128LittleEndian(datagram[ReliableWire.CookieOffset..]);
            if (cookie == UInt128.Zero)
            {
                Reject(from, WireError.Malformed);
                return;
            }

            connection.OnChallenge(cookie);
            return;
        }

        if (!connection.IsEstablished || challenge.Second != connection.PeerEpoch)
        {
            StaleEpoch();
            return;
        }

        // Whatever it never acknowledged goes out in a new conversation, after a new handshake.
        if (Renew(connection))
        {
            if (connection.Pending > 0)
            {
                connection.StartHandshake();
            }
            else
            {
                Remove(connection); // nothing to say: the next message opens a conversation
                connection.Reset();
                connection.MarkFailed();
            }
        }
    }

    /// <summary>A datagram names a conversation this side does not have (or a wrong number of one it has): counted, and
    /// answered by a challenge that echoes its two numbers, so a peer that really had a conversation with us learns it
    /// is over. Nothing else changes.</summary>
    private void UnknownConversation(NetAddress from, uint senderEpoch, uint receiverEpoch, int length)
    {
        Counters.UnknownConversation++;
        Drops.Increment(DropReason.Malformed);
        Challenge(from, senderEpoch, receiverEpoch, length);
    }

    private void StaleEpoch()
    {
        Counters.UnknownConversation++;
        Drops.Increment(DropReason.Malformed);
    }

    /// <summary>Sends a challenge to <paramref name="to"/>, echoing (<paramref name="first"/>, <paramref name="second"/>),
    /// if the trigger was long enough (no amplification) and the challenge budget allows. It carries a cookie only when
    /// it answers a connect (second = 0); the answer to data of an unknown conversation only needs the echo.</summary>
    private void Challenge(NetAddress to, uint first, uint second, int triggerLength)
    {
        if (triggerLength < ReliableWire.MinChallengeTrigger || !IsUnicast(to))
        {
            return; // never more than came in, and never to a group or broadcast address a forger named as its source
        }

        if (!TakeChallengeToken())
        {
            Counters.ChallengesSuppressed++;
            return;
        }

        Span<byte> cookie = stackalloc byte[HandshakeCookies.Size];
        if (second == 0)
        {
            _cookies.Write(to, first, Scheduler.Now, cookie);
        }
        else
        {
            cookie.Clear();
        }

        if (_transport.TryClaim(out var slot))
        {
            int length = ReliableWire.WriteHandshake(slot, ReliableWire.ChallengeType, SenderId, first, second, cookie);
            _transport.Commit(to, length);
            Counters.ChallengesSent++;
        }
    }

    private static bool IsUnicast(NetAddress address) => !address.IsMulticast && address.Ip is not 0 and not 0xFFFFFFFF && address.Port != 0;

    private bool TakeChallengeToken()
    {
        var now = Scheduler.Now;
        double burst = Math.Max(1, _options.MaxChallengesPerSecond / 10.0);
        _challengeTokens = Math.Min(burst, _challengeTokens + ((now - _challengeTokensAt).TotalSeconds * _options.MaxChallengesPerSecond));
        _challengeTokensAt = now;
        if (_challengeTokens < 1)
        {
            return false;
        }

        _challengeTokens--;
        return true;
    }

    /// <summary>Opening side: a connect (no cookie yet, or the last challenge's).</summary>
    internal void SendConnect(ReliableConnection connection, UInt128 cookie)
    {
        if (_transport.TryClaim(out var slot))
        {
            Span<byte> bytes = stackalloc byte[HandshakeCookies.Size];
            BinaryPrimitives.WriteUInt128LittleEndian(bytes, cookie);
            int length = ReliableWire.WriteHandshake(slot, ReliableWire.ConnectType, SenderId, connection.LocalEpoch, 0, bytes);
            _transport.Commit(connection.Peer, length);
        }
    }

    /// <summary>The peer proved it started a new conversation or lost ours: ours is over, and the connection starts a
    /// new one under a new number, carrying the whole messages the peer never acknowledged
    /// (<see cref="ReliableConnection.Renew"/>). The layers above hear of it only when a message was cut (its first
    /// segments acknowledged by a peer that then restarted): PeerFailed with that loss. False when they forgot the
    /// peer on that report.</summary>
    private bool Renew(ReliableConnection connection)
    {
        Counters.ConversationsReplaced++;
        _transmitQueue.Remove(connection);
        int lost = connection.Renew(NextConversationEpoch());
        if (lost > 0)
        {
            RaisePeerFailed(connection.Peer, lost);
        }

        return !connection.Failed;
    }

    /// <summary>Drops connections that have expired (idle, or opened by a peer and never used).</summary>
    private void Sweep()
    {
        var now = Scheduler.Now;
        foreach (var connection in _connections.Values)
        {
            if (connection.IsExpired(now))
            {
                _expired.Add(connection);
            }
        }

        foreach (var connection in _expired)
        {
            Remove(connection);
            connection.Reset();
            connection.MarkFailed();
            Counters.Expired++;
        }

        _expired.Clear();
        if (_connections.Count > 0)
        {
            Scheduler.ScheduleAfter(_sweepAlarm, SweepInterval);
        }
    }

    private TimeSpan SweepInterval => _options.HalfOpenTimeout / 4;

    private ReliableConnection Add(NetAddress peer, bool inbound)
    {
        var connection = new ReliableConnection(this, peer, _options, inbound);
        _connections.Add(peer, connection);
        _perIp[peer.Ip] = _perIp.GetValueOrDefault(peer.Ip) + 1;
        if (!_sweepAlarm.IsScheduled)
        {
            Scheduler.ScheduleAfter(_sweepAlarm, SweepInterval);
        }

        return connection;
    }

    private void Remove(ReliableConnection connection)
    {
        if (!_connections.Remove(connection.Peer))
        {
            return;
        }

        _transmitQueue.Remove(connection);
        int left = _perIp[connection.Peer.Ip] - 1;
        if (left == 0)
        {
            _perIp.Remove(connection.Peer.Ip);
        }
        else
        {
            _perIp[connection.Peer.Ip] = left;
        }
    }

    /// <summary>A fresh conversation number: non-zero and unpredictable (keyed by the endpoint's handshake secret).</summary>
    internal uint NextConversationEpoch() => _cookies.NextEpoch();

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
        Remove(connection);
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

        public bool Send(NetAddress peer, ReadOnlySpan<byte> message) => owner.TryConnection(peer, out var connection) && connection.TrySend(id, message);

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

