using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Runtime;

/// <summary>Where a data node of some gateway takes its datagrams: (gateway, data node number, UDP address). Text
/// form <c>gateway:node@ip:port</c>, e.g. <c>2:201@127.0.0.1:47401</c>; <see cref="ParseOwn"/> reads <c>node@ip:port</c>.</summary>
public sealed record DataNodeAddress(GatewayId Gateway, uint Node, IPEndPoint Address)
{
    public static DataNodeAddress Parse(string text)
    {
        ArgumentNullException.ThrowIfNull(text);
        int colon = text.IndexOf(':', StringComparison.Ordinal);
        int at = text.IndexOf('@', StringComparison.Ordinal);
        if (colon <= 0 || at <= colon + 1
            || !uint.TryParse(text.AsSpan(0, colon), NumberStyles.None, CultureInfo.InvariantCulture, out uint gateway) || gateway == 0)
        {
            throw new FormatException($"data node '{text}' must be <gateway>:<node>@<ip>:<port>");
        }

        var own = ParseOwn(text[(colon + 1)..]);
        return own with { Gateway = new GatewayId(gateway) };
    }

    /// <summary>Reads <c>node@ip:port</c> (a control node's own data node; the gateway is left 0).</summary>
    public static DataNodeAddress ParseOwn(string text)
    {
        ArgumentNullException.ThrowIfNull(text);
        int at = text.IndexOf('@', StringComparison.Ordinal);
        if (at <= 0 || !uint.TryParse(text.AsSpan(0, at), NumberStyles.None, CultureInfo.InvariantCulture, out uint node) || node == 0)
        {
            throw new FormatException($"data node '{text}' must be <node>@<ip>:<port> with a node number of 1 or more");
        }

        if (!IPEndPoint.TryParse(text[(at + 1)..], out var endpoint) || endpoint.Port == 0)
        {
            throw new FormatException($"data node '{text}': '{text[(at + 1)..]}' is not an ip:port with a non-zero port");
        }

        return new DataNodeAddress(default, node, endpoint);
    }
}

/// <summary>
/// Runs one <see cref="DataNode"/> on real sockets: a loop thread owns the state machine (ticks every 100 ms), one UDP
/// socket carries both the control↔data frames (only from the configured control node's address) and real-time DATA
/// datagrams (only from a configured peer gateway's or peer data node's address; anything else is counted in
/// <see cref="DatagramsRefused"/>). Bulk sessions' DATA travels on TCP bulk data channels (<see cref="BulkDataChannels"/>):
/// this node dials the peer gateway or peer data node it sends to, and takes channels from configured peers on a TCP
/// listener at the same address as its UDP socket. The island plug-in (<see cref="IHostedNativeNet"/>) sends into the island and, for
/// roots and multi-source sessions, listens there. Stopping it (<see cref="DisposeAsync"/>) is a crash as far as the
/// control node can tell: heartbeats stop.
/// </summary>
public sealed class DataNodeRuntime : IDataNodeHost, IAsyncDisposable
{
    // The loop's own events (RuntimeLoop kinds): a control frame, a DATA frame from a peer (datagram or bulk channel).
    private const byte ControlFrameKind = RuntimeLoop.FirstOwnerKind;
    private const byte DataFrameKind = RuntimeLoop.FirstOwnerKind + 1;
    private const byte SealedDatagramKind = RuntimeLoop.FirstOwnerKind + 2; // with a peering secret; key: the sending endpoint

    private readonly Socket _udp;
    private readonly IPEndPoint _control;
    private readonly IPEndPoint? _standbyControl;
    private readonly Dictionary<GatewayId, IPEndPoint> _peers;
    private readonly Dictionary<uint, IPEndPoint> _peerNodes;
    private readonly ConcurrentDictionary<uint, DataNodeAddress> _peerNodeConfig; // read by the channel acceptor
    private readonly HashSet<uint> _configuredNodes;
    private long _learnedRefused;
    private readonly Socket _tcp;
    private readonly BulkDataChannels _bulk;
    private readonly ConnectionLimit _inboundLimit;
    private long _channelsRefused;
    private long _datagramsSent;
    private long _datagramsDroppedForTest;
    private readonly ConcurrentDictionary<IPEndPoint, GatewayId> _sources = []; // read by the receive loop
    private readonly ConcurrentDictionary<IPEndPoint, uint> _sourceIds = []; // the same addresses: which endpoint (data node or gateway)
    private readonly byte[]? _peeringSecret;
    private readonly GatewayId _gateway;
    private readonly Dictionary<uint, (GatewayId Gateway, PeeringDatagrams Keys)> _datagramKeys = []; // authenticated inbound channels; loop thread only
    private readonly byte[]? _sealed; // a real-time datagram being sealed (loop thread)
    private readonly byte[]? _opened; // one being opened (loop thread)
    private long _channelsUnauthenticated;
    private long _datagramsUnauthenticated;
    private readonly DatagramAddressBook _addresses; // the control node and every address in _sources, converted once
    private readonly IHostedNativeNet _native;
    private readonly CancellationTokenSource _stop = new();
    private readonly Stopwatch _clock = Stopwatch.StartNew();
    private readonly RuntimeLoop _loop;
    private Task? _receive;
    private Task? _accept;
    private long _datagramsRefused;

    /// <param name="peers">The peer gateways' UDP addresses (their peering listen address: a gateway takes datagrams there).</param>
    /// <param name="peerDataNodes">Data nodes of clustered peer gateways.</param>
    /// <param name="peeringSecret">The federation's peering secret (<see cref="Gateway.GatewayOptions.PeeringSecret"/>,
    /// the same on every gateway and data node): bulk data channels both ways authenticate and seal, real-time datagrams
    /// to and from peers are sealed under their channel's keys; null: both in the clear.</param>
    /// <param name="standbyControl">With <see cref="ClusterOptions.ControlNodes"/> = 2: the gateway's second control
    /// node (HEARTBEATs and REPORTs go to both; control frames are taken from both, the higher term winning).</param>
    public DataNodeRuntime(uint node, GatewayId gateway, ClusterOptions options, IHostedNativeNet native, IPEndPoint listen, IPEndPoint control,
        IReadOnlyDictionary<GatewayId, IPEndPoint> peers, IReadOnlyList<DataNodeAddress> peerDataNodes, int maxPayloadBytes = 65_000, byte[]? peeringSecret = null,
        IPEndPoint? standbyControl = null)
    {
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(peers);
        ArgumentNullException.ThrowIfNull(peerDataNodes);
        options.Validate();
        if (peeringSecret is { Length: < PeeringHandshake.MinSecretBytes })
        {
            throw new ArgumentOutOfRangeException(nameof(peeringSecret), $"a peering secret is at least {PeeringHandshake.MinSecretBytes} bytes, got {peeringSecret.Length}");
        }

        _peeringSecret = peeringSecret;
        _gateway = gateway;
        _sealed = peeringSecret is null ? null : new byte[PeerCodec.MaxFrameBytes + 64];
        _opened = peeringSecret is null ? null : new byte[PeerCodec.MaxFrameBytes + 64];
        _native = native;
        _control = control;
        if ((options.ControlNodes == 2) != (standbyControl is not null) || control.Equals(standbyControl))
        {
            throw new ArgumentException("two control nodes need a second, distinct control address, and only they", nameof(standbyControl));
        }

        _standbyControl = standbyControl;
        _peers = peers.ToDictionary();
        _peerNodes = peerDataNodes.ToDictionary(d => d.Node, d => d.Address);
        _peerNodeConfig = new ConcurrentDictionary<uint, DataNodeAddress>(peerDataNodes.ToDictionary(d => d.Node));
        _configuredNodes = [.. peerDataNodes.Select(d => d.Node)];
        foreach (var (g, address) in _peers)
        {
            _sources[address] = g;
            _sourceIds[address] = g.Value;
        }

        foreach (var d in peerDataNodes)
        {
            _sources[d.Address] = d.Gateway;
            _sourceIds[d.Address] = d.Node;
        }

        Node = new DataNode(node, gateway, options, this, native, maxPayloadBytes: maxPayloadBytes, firstAuthCounter: ClusterAuthenticator.WallClockCounter());
        (_tcp, _udp) = SamePortSockets.Bind(listen);
        _udp.ReceiveBufferSize = 4 << 20;
        _udp.SendBufferSize = 4 << 20;
        ListenEndpoint = (IPEndPoint)_udp.LocalEndPoint!;
        _addresses = new DatagramAddressBook(_udp.AddressFamily);
        RefreshAddresses();
        _tcp.Listen(64);
        _loop = new RuntimeLoop($"data node {node}", () => Now, now => Node.Tick(now), OnRecord, tickAtStart: true);
        _loop.Bind(Node, native);
        _bulk = new BulkDataChannels(gateway, node, _loop.Post, () => Now, peeringSecret);
        _inboundLimit = new ConnectionLimit(() => 2 * (_peers.Count + _peerNodeConfig.Count) + 2);
    }

    public DataNode Node { get; }

    public IPEndPoint ListenEndpoint { get; }

    public TimeSpan Now => _clock.Elapsed;

    public long DatagramsRefused => Interlocked.Read(ref _datagramsRefused);

    public long EventsDropped => _loop.Dropped;

    /// <summary>Inbound bulk data channels refused: a first frame that is not DATA_CHANNEL from a configured peer at its
    /// configured IP address, a later frame that is not DATA, or too many connections.</summary>
    public long ChannelsRefused => Interlocked.Read(ref _channelsRefused);

    /// <summary>With a peering secret: inbound bulk data channels that failed authentication (no PEER_AUTH, another
    /// endpoint's or a reflected one, a wrong opening, or a frame that did not open: another secret, altered, replayed,
    /// truncated); each closed, and counted in <see cref="ChannelsRefused"/> too.</summary>
    public long ChannelsUnauthenticated => Interlocked.Read(ref _channelsUnauthenticated);

    /// <summary>With a peering secret: real-time datagrams from a peer's address that did not open under the keys of
    /// that peer's channel (none yet, forged, altered, truncated, another secret) or were replays; dropped.</summary>
    public long DatagramsUnauthenticated => Interlocked.Read(ref _datagramsUnauthenticated);

    /// <summary>With a peering secret: outgoing bulk data channels whose receiver failed authentication.</summary>
    public long ChannelHandshakesFailed => _bulk.HandshakesFailed;

    /// <summary>DATA datagrams sent (real-time sessions) and, for tests, dropped on purpose before the socket.</summary>
    public long DataDatagramsSent => Interlocked.Read(ref _datagramsSent);

    public long DataDatagramsDroppedForTest => Interlocked.Read(ref _datagramsDroppedForTest);

    /// <summary>Tests only: drop every n-th outgoing DATA datagram (0: none), to inject loss on the UDP path.</summary>
    internal int DropEveryNthDataDatagram { get; set; }

    /// <summary>The outgoing bulk data channels' counters, read on the loop thread: (opened, failed, sent, dropped).</summary>
    public Task<(long Opened, long Failed, long Sent, long Dropped)> BulkCountersAsync()
        => InvokeAsync(_ => (_bulk.Opened, _bulk.Failed, _bulk.FramesSent, _bulk.FramesDropped));

    public void Start()
    {
        _native.Bind(Node, _loop);
        _loop.Start();
        _receive = Task.Run(ReceiveLoopAsync);
        _accept = Task.Run(() => TcpAcceptor.RunAsync(_tcp, OnAccepted, _stop.Token));
    }

    /// <summary>Runs <paramref name="func"/> on the loop thread (counters, session count).</summary>
    public Task<T> InvokeAsync<T>(Func<DataNode, T> func)
    {
        var done = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        if (!_loop.TryPost(() => done.SetResult(func(Node))))
        {
            done.SetException(new InvalidOperationException("the data node's event queue is full or stopped"));
        }

        return done.Task;
    }

    bool IDataNodeHost.SendToControl(ReadOnlySpan<byte> frame) => SendTo(frame, _control) | (_standbyControl is { } standby && SendTo(frame, standby));

    bool IDataNodeHost.SendData(GatewayId peer, uint endpoint, ReadOnlySpan<byte> frame, bool realTime)
    {
        // Real-time flows as UDP datagrams (no retransmission); bulk flows on a TCP channel to the same address.
        var target = endpoint != 0 ? _peerNodes.GetValueOrDefault(endpoint) : _peers.GetValueOrDefault(peer);
        if (target is null)
        {
            return false;
        }

        var receiver = endpoint != 0 ? new GatewayId(endpoint) : peer;
        if (!realTime)
        {
            return _bulk.Send(target, receiver, frame);
        }

        if (_sealed is not null)
        {
            // Sealed under the keys of this node's bulk data channel to the target; until that channel is up and
            // confirmed, the frame travels on it (sealed, TCP).
            if (_bulk.DatagramKeys(target) is not { } keys || frame.Length + keys.Overhead > _sealed.Length)
            {
                return _bulk.Send(target, receiver, frame);
            }

            frame.CopyTo(_sealed);
            frame = _sealed.AsSpan(0, keys.Seal(_sealed, frame.Length));
        }

        if (LossInjection.Drop(DropEveryNthDataDatagram, ref _datagramsSent, ref _datagramsDroppedForTest))
        {
            return true; // lost on the wire, as far as the sender can tell
        }

        return SendTo(frame, target);
    }

    /// <summary>Peers' data nodes learnt from DATA_ENDPOINT (directly, or through the control node's ASSIGN) rather than
    /// configured, at most; configuration wins over what a peer says.</summary>
    public const int MaxLearnedDataNodes = 1024;

    /// <summary>Peers' data nodes this node can reach and admits channels from (configured and learnt).</summary>
    public int KnownPeerDataNodes => _peerNodeConfig.Count;

    /// <summary>Learnt addresses refused: the bound, or an address that is the control node's or another peer's.</summary>
    public long LearnedDataNodesRefused => Interlocked.Read(ref _learnedRefused);

    void IDataNodeHost.LearnPeerNode(GatewayId gateway, uint node, IPEndPoint address)
    {
        if (_configuredNodes.Contains(node) || (_peerNodes.TryGetValue(node, out var known) && known.Equals(address) && _sources.GetValueOrDefault(address) == gateway))
        {
            return;
        }

        bool taken = address.Equals(_control) || address.Equals(_standbyControl) || (_sources.TryGetValue(address, out var owner) && owner != gateway);
        if (taken || (known is null && _peerNodes.Count - _configuredNodes.Count >= MaxLearnedDataNodes))
        {
            Interlocked.Increment(ref _learnedRefused);
            return;
        }

        if (known is not null)
        {
            _sources.TryRemove(known, out _);
            _sourceIds.TryRemove(known, out _);
        }

        _peerNodes[node] = address;
        _peerNodeConfig[node] = new DataNodeAddress(gateway, node, address);
        _sourceIds[address] = node;
        _sources[address] = gateway;
        RefreshAddresses();
    }

    // After any change to the addresses this node exchanges datagrams with (the loop thread, or the constructor).
    private void RefreshAddresses() => _addresses.Replace(_sources.Keys.Append(_control).Concat(_standbyControl is null ? [] : [_standbyControl])
        .Concat(_peers.Values).Concat(_peerNodes.Values));

    // Who may open a bulk data channel to this node: a configured peer gateway, or a configured data node of one, from
    // its configured IP address.
    private GatewayId? Admit(DataChannelMessage hello, IPAddress? remote)
    {
        var expected = hello.Node == 0
            ? _peers.GetValueOrDefault(hello.Gateway)
            : _peerNodeConfig.TryGetValue(hello.Node, out var d) && d.Gateway == hello.Gateway ? d.Address : null;
        return expected is not null && remote is not null && expected.Address.Equals(remote) ? hello.Gateway : null;
    }

    private void OnAccepted(Socket socket)
    {
        if (!_inboundLimit.TryServe(socket, ServeChannelAsync))
        {
            Interlocked.Increment(ref _channelsRefused);
        }
    }

    private async Task ServeChannelAsync(Socket socket)
    {
        try
        {
            var remote = (socket.RemoteEndPoint as IPEndPoint)?.Address;
            var link = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
            var handshake = _peeringSecret is null ? null : new PeeringHandshake(_peeringSecret, new GatewayId(Node.Id));
            var inbound = new BulkDataChannels.Inbound(hello => Admit(hello, remote), handshake, link);
            await using (link.ConfigureAwait(false))
            {
                if (handshake is not null)
                {
                    link.TrySend(handshake.AuthFrame); // PEER_AUTH first, as a gateway's listener does
                }

                using var helloTimer = new CancellationTokenSource(TimeSpan.FromSeconds(5));
                using var registration = helloTimer.Token.Register(() =>
                {
                    if (!inbound.Authenticated)
                    {
                        link.Close();
                    }
                });
                bool refused = false;
                await link.RunAsync(new FrameSpanHandler(frame =>
                {
                    if (refused)
                    {
                        return;
                    }

                    bool wasAuthenticated = inbound.Authenticated;
                    if (inbound.OnFrame(frame, out refused))
                    {
                        // Waits for room: TCP pushes back on the sender.
                        _loop.Write(DataFrameKind, inbound.From!.Value.Value, null, frame);
                    }
                    else if (refused)
                    {
                        Interlocked.Increment(ref _channelsRefused);
                        if (inbound.Refusal is InboundRefusal.Unauthenticated or InboundRefusal.HandshakeFailed)
                        {
                            Interlocked.Increment(ref _channelsUnauthenticated);
                        }

                        link.Close();
                    }
                    else if (!wasAuthenticated && inbound.Authenticated && inbound.Keys is { } keys)
                    {
                        var (sender, from) = (inbound.Sender.Value, inbound.From!.Value);
                        _loop.Post(() =>
                        {
                            // The sender's real-time datagrams open under this channel's keys from now on; then the
                            // confirmation (its first sealed frame) tells the sender to seal them.
                            _datagramKeys[sender] = (from, keys.Datagrams);
                            link.TrySend(PeerCodec.DataChannel(_gateway, Node.Id));
                        });
                    }
                }), _stop.Token).ConfigureAwait(false);

                if (link.RejectedFrames > 0)
                {
                    Interlocked.Increment(ref _channelsRefused);
                    Interlocked.Increment(ref _channelsUnauthenticated);
                }

                if (inbound.Keys is { } ended)
                {
                    var sender = inbound.Sender.Value;
                    _loop.Post(() =>
                    {
                        if (_datagramKeys.TryGetValue(sender, out var current) && current.Keys == ended.Datagrams)
                        {
                            _datagramKeys.Remove(sender);
                        }

                        ended.Datagrams.Dispose();
                    });
                }
            }
        }
        catch (Exception e) when (e is SocketException or IOException or OperationCanceledException or ObjectDisposedException)
        {
        }
    }

    private bool SendTo(ReadOnlySpan<byte> frame, IPEndPoint target)
    {
        try
        {
            return _addresses.SendTo(_udp, frame, target) == frame.Length;
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            return false;
        }
    }

    private Task ReceiveLoopAsync() => DatagramReceiveLoop.RunAsync(_udp, _addresses, (from, frame) =>
    {
        if (from.Equals(_control) || from.Equals(_standbyControl))
        {
            _loop.TryWrite(ControlFrameKind, 0, null, frame);
        }
        else if (_peeringSecret is not null && _sourceIds.TryGetValue(from, out uint endpoint))
        {
            _loop.TryWrite(SealedDatagramKind, endpoint, null, frame); // opened on the loop, under that endpoint's channel keys
        }
        else if (_sources.TryGetValue(from, out var peer))
        {
            _loop.TryWrite(DataFrameKind, peer.Value, null, frame);
        }
        else
        {
            Interlocked.Increment(ref _datagramsRefused); // well-formed is not trusted: unknown senders are dropped
        }
    }, _stop.Token);

    // On the loop thread, in arrival order.
    private void OnRecord(in InboxRecord record, ReadOnlySpan<byte> frame)
    {
        if (record.Kind == ControlFrameKind)
        {
            Node.OnControlFrame(frame, Now);
        }
        else if (record.Kind == SealedDatagramKind)
        {
            if (_datagramKeys.TryGetValue(record.Key, out var sender) && sender.Keys.Open(frame, _opened!, out int length))
            {
                Node.OnData(sender.Gateway, _opened!.AsSpan(0, length), Now);
            }
            else
            {
                Interlocked.Increment(ref _datagramsUnauthenticated);
            }
        }
        else
        {
            Node.OnData(new GatewayId(record.Key), frame, Now);
        }
    }

    public async ValueTask DisposeAsync()
    {
        if (_stop.IsCancellationRequested)
        {
            return;
        }

        await _stop.CancelAsync().ConfigureAwait(false);
        _udp.Dispose();
        _tcp.Dispose();
        _loop.Stop(TimeSpan.FromSeconds(2));

        await _bulk.DisposeAsync().ConfigureAwait(false);
        if (_accept is not null)
        {
            try
            {
                await _accept.WaitAsync(TimeSpan.FromSeconds(2)).ConfigureAwait(false);
            }
            catch (TimeoutException)
            {
            }
        }

        if (_receive is not null)
        {
            try
            {
                await _receive.WaitAsync(TimeSpan.FromSeconds(2)).ConfigureAwait(false);
            }
            catch (TimeoutException)
            {
            }
        }

        _stop.Dispose();
    }
}
