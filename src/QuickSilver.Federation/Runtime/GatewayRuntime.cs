using System.Collections.Concurrent;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Time;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Io;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Runtime;

/// <summary>
/// Runs one <see cref="BroadcastGateway"/> for real: one loop thread (<see cref="RuntimeLoop"/>) owns the gateway and its
/// plug-in (every event, native packets and peers' frames included, is copied into its bounded inbox and handled there
/// in batches, and <see cref="BroadcastGateway.Tick"/> runs every 100 ms on a monotonic stopwatch); peering links are TCP connections framed by <see cref="FramedConnection"/> (u32 length + frame,
/// System.IO.Pipelines), at most <see cref="PeerCodec.MaxFrameBytes"/> a frame. A link starts with HELLO both ways;
/// the first frame must be a HELLO from a configured peer within 5 s, else the connection is closed and counted.
/// Data frames are dropped (counted) when a link's send queue is full; control frames close the link instead. The same
/// listener takes bulk data channels (<see cref="BulkDataChannels"/>: first frame DATA_CHANNEL) from the configured data
/// nodes of peer gateways, and this gateway dials such channels to carry bulk DATA to a peer's data node.
/// With a peering secret (<see cref="GatewayOptions.PeeringSecret"/>) a link starts with PEER_AUTH both ways instead
/// (<see cref="PeeringHandshake"/>) and every later frame, the HELLO first, is sealed; a peer that cannot open or seal,
/// or sends in the clear, is refused, counted and logged.
/// </summary>
public sealed class GatewayRuntime : IGatewayHost, IControlHost, IAsyncDisposable, IClock
{
    /// <summary>Events the loop's inbox holds (both halves).</summary>
    public const int QueueCapacity = 2 * LoopInbox.DefaultRecords;

    private static readonly TimeSpan HelloTimeout = TimeSpan.FromSeconds(5);

    // The loop's own events (RuntimeLoop kinds): a frame on a peering link, on a bulk data channel, a UDP datagram.
    private const byte PeerFrameKind = RuntimeLoop.FirstOwnerKind;
    private const byte ChannelFrameKind = RuntimeLoop.FirstOwnerKind + 1;
    private const byte DatagramKind = RuntimeLoop.FirstOwnerKind + 2;

    private readonly RuntimeLoop _loop;
    private readonly int _peerQueueBytes;
    private readonly Dictionary<GatewayId, FramedConnection> _links = []; // loop thread only
    private readonly Dictionary<GatewayId, IPEndPoint> _datagramPeers = []; // loop thread only
    private readonly Dictionary<GatewayId, Destination> _batchedDatagramPeers = []; // the IPv4 ones; loop thread only
    private readonly DatagramSendBatch _datagramBatch; // real-time DATA to peers, flushed after every loop turn
    private readonly Dictionary<IPEndPoint, GatewayId> _datagramSources = []; // loop thread only
    private readonly Socket _udp;
    private readonly DatagramAddressBook _addresses; // every address in the tables below, converted once
    private long _datagramsRefused;
    private readonly Dictionary<GatewayId, PeerConfig> _peers;
    private readonly CancellationTokenSource _stop = new();
    private readonly Stopwatch _clock = Stopwatch.StartNew();
    private readonly Socket _listener;
    private readonly List<Task> _tasks = [];
    private readonly INativeNet _native;
    private readonly ConnectionLimit _acceptLimit;
    private long _helloRefused;
    private readonly Dictionary<uint, IPEndPoint> _ownNodes = []; // this control node's data nodes
    private readonly Dictionary<IPEndPoint, uint> _ownNodeSources = [];
    private IPEndPoint? _otherControl; // the standby's (or the primary's) address, when the gateway has two control nodes
    private readonly Dictionary<uint, IPEndPoint> _peerNodes = []; // clustered peers' data nodes
    private readonly Dictionary<IPEndPoint, GatewayId> _peerNodeSources = [];
    private readonly Dictionary<IPEndPoint, uint> _peerNodeIds = []; // the same addresses: which data node
    private readonly Dictionary<uint, PeeringDatagrams> _nodeDatagramKeys = []; // peers' data nodes' authenticated channels; loop thread only
    private readonly ConcurrentDictionary<uint, DataNodeAddress> _peerNodeConfig = []; // read by the channel acceptor
    private readonly HashSet<uint> _configuredPeerNodes = [];
    private long _learnedRefused;
    private readonly BulkDataChannels _bulk;
    private long _datagramsToNodes;
    private long _datagramsDroppedForTest;
    private readonly byte[]? _peeringSecret;
    private readonly Dictionary<GatewayId, PeeringDatagrams> _datagramKeys = []; // authenticated links; loop thread only
    private readonly byte[]? _sealed; // a real-time datagram being sealed (loop thread)
    private readonly byte[]? _opened; // a real-time datagram opened, while the gateway handles it (loop thread; apart
                                      // from _sealed, since handling it may forward it: seal while it is read)
    private long _datagramsUnauthenticated;
    private long _peeringUnauthenticated;
    private long _peeringHandshakesFailed;
    private long _peeringFramesRejected;
    private RateLimitedLog? _log; // loop thread only

    /// <param name="cluster">Makes this gateway a clustered gateway's control node: its data nodes' numbers and UDP
    /// addresses (the ASSIGN and HEARTBEAT frames travel as datagrams on the peering port).</param>
    /// <param name="peerDataNodes">Data nodes of clustered peer gateways: where to send a session's DATA when the peer
    /// announced one of them (DATA_ENDPOINT), and which sources to accept datagrams from as that peer.</param>
    /// <param name="otherControl">With <see cref="ClusterOptions.ControlNodes"/> = 2: the gateway's other control node's
    /// listen address (LEAD frames travel between the two as datagrams on the peering port).</param>
    public GatewayRuntime(GatewayOptions options, INativeNet native, IPEndPoint listen, IReadOnlyList<PeerConfig> peers,
        (ClusterOptions Options, IReadOnlyDictionary<uint, IPEndPoint> Addresses)? cluster, IReadOnlyList<DataNodeAddress>? peerDataNodes = null, IPEndPoint? otherControl = null)
        : this(options, native, listen, peers, cluster?.Options)
    {
        if ((cluster?.Options.ControlNodes == 2) != (otherControl is not null))
        {
            throw new ArgumentException("two control nodes need the other control node's address, and only they", nameof(otherControl));
        }

        _otherControl = otherControl;
        foreach (var (node, address) in cluster?.Addresses ?? new Dictionary<uint, IPEndPoint>())
        {
            if (!cluster!.Value.Options.DataNodes.Contains(node))
            {
                throw new ArgumentException($"data node {node} has an address but is not in ClusterOptions.DataNodes", nameof(cluster));
            }

            _ownNodes[node] = address;
            _ownNodeSources[address] = node;
        }

        foreach (var d in peerDataNodes ?? [])
        {
            if (!_peers.ContainsKey(d.Gateway))
            {
                throw new ArgumentException($"data node {d.Node} belongs to gateway {d.Gateway}, which is not a configured peer", nameof(peerDataNodes));
            }

            _peerNodes[d.Node] = d.Address;
            _peerNodeSources[d.Address] = d.Gateway;
            _peerNodeIds[d.Address] = d.Node;
            _peerNodeConfig[d.Node] = d;
            _configuredPeerNodes.Add(d.Node);
        }

        RefreshAddresses();
    }

    public GatewayRuntime(GatewayOptions options, INativeNet native, IPEndPoint listen, IReadOnlyList<PeerConfig> peers)
        : this(options, native, listen, peers, (ClusterOptions?)null)
    {
    }

    private GatewayRuntime(GatewayOptions options, INativeNet native, IPEndPoint listen, IReadOnlyList<PeerConfig> peers, ClusterOptions? clusterOptions)
    {
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(peers);
        options.Validate();
        _peers = peers.ToDictionary(p => p.Gateway);
        if (_peers.ContainsKey(options.Gateway))
        {
            throw new ArgumentException($"gateway {options.Gateway} lists itself as a peer", nameof(peers));
        }

        _native = native;
        _peeringSecret = options.PeeringSecret;
        _sealed = _peeringSecret is null ? null : new byte[PeerCodec.MaxFrameBytes + 64];
        _opened = _peeringSecret is null ? null : new byte[PeerCodec.MaxFrameBytes + 64];
        _peerQueueBytes = options.PeerQueueBytes;
        Gateway = clusterOptions is null ? new BroadcastGateway(options, this, native) : new BroadcastGateway(options, this, native, clusterOptions, this, ClusterAuthenticator.WallClockCounter());
        // Real-time DATA travels as UDP datagrams to and from the same address and port as the TCP listener.
        (_listener, _udp) = SamePortSockets.Bind(listen);
        _listener.Listen(options.MaxPeers);
        ListenEndpoint = (IPEndPoint)_listener.LocalEndPoint!;
        _udp.ReceiveBufferSize = 4 << 20;
        _udp.SendBufferSize = 4 << 20;
        _datagramBatch = new DatagramSendBatch(_udp);
        _addresses = new DatagramAddressBook(_udp.AddressFamily);
        _loop = new RuntimeLoop($"gateway {options.Gateway}", () => Now, now => Gateway.Tick(now), OnRecord, afterTurn: _datagramBatch.Flush);
        _loop.Bind(Gateway, native);
        _bulk = new BulkDataChannels(options.Gateway, 0, Post, () => Now, options.PeeringSecret);
        _acceptLimit = new ConnectionLimit(() => 2 * (_peers.Count + _peerNodeConfig.Count) + 2);
    }

    public BroadcastGateway Gateway { get; }

    public IPEndPoint ListenEndpoint { get; }

    public TimeSpan Now => _clock.Elapsed;

    public long HelloRefused => Interlocked.Read(ref _helloRefused);

    /// <summary>Where refused peers are logged (rate-limited, a line per reason per 10 s at most). Set before <see cref="Start"/>.</summary>
    public ILogger Logger { get; init; } = NullLogger.Instance;

    /// <summary>Connections refused because one side has a peering secret and the other none: a HELLO in the clear
    /// reaching a gateway with a secret, or a PEER_AUTH reaching one without.</summary>
    public long PeeringUnauthenticated => Interlocked.Read(ref _peeringUnauthenticated);

    /// <summary>Handshakes that failed: the peer's first sealed frame (its HELLO) did not open (another secret, or a
    /// recorded handshake replayed), or its PEER_AUTH was a reflection of ours.</summary>
    public long PeeringHandshakesFailed => Interlocked.Read(ref _peeringHandshakesFailed);

    /// <summary>Real-time datagrams from a peer's address that did not open under its link's datagram key, or were
    /// replayed (dropped; the link stays up, since anyone can forge a UDP source).</summary>
    public long DatagramsUnauthenticated => Interlocked.Read(ref _datagramsUnauthenticated);

    /// <summary>Sealed frames that did not open on an authenticated link (altered, forged, replayed or reordered); each
    /// closed its link.</summary>
    public long PeeringFramesRejected => Interlocked.Read(ref _peeringFramesRejected);

    /// <summary>Events dropped because the loop's inbox was full (native packets, datagrams).</summary>
    public long EventsDropped => _loop.Dropped;

    /// <summary>UDP datagrams refused: not from a connected peer's announced address, or dropped for a full queue.</summary>
    public long DatagramsRefused => Interlocked.Read(ref _datagramsRefused);

    /// <summary>Real-time DATA datagrams to peers that the kernel refused when their batch was flushed (dropped).</summary>
    public long DatagramSendsFailed => _datagramBatch.Failed;

    /// <summary>Tests only: drop every n-th DATA datagram sent to a peer's data node (0: none), to inject UDP loss.</summary>
    internal int DropEveryNthDataDatagram { get; set; }

    /// <summary>Real-time DATA datagrams sent to peers' data nodes (sealed with a peering secret; before the channel that
    /// gives their keys is confirmed such frames travel on it instead and are not counted here).</summary>
    public long DataDatagramsToNodes => Interlocked.Read(ref _datagramsToNodes);

    /// <summary>With a peering secret: outgoing bulk data channels whose receiver failed authentication (its first frame
    /// not a PEER_AUTH of the data node dialled, or its confirmation did not open).</summary>
    public long ChannelHandshakesFailed => _bulk.HandshakesFailed;

    /// <summary>DATA datagrams to peers' data nodes dropped on purpose (<see cref="DropEveryNthDataDatagram"/>).</summary>
    public long DataDatagramsDroppedForTest => Interlocked.Read(ref _datagramsDroppedForTest);

    /// <summary>The outgoing bulk data channels' counters, read on the loop thread: (opened, failed, sent, dropped).</summary>
    public Task<(long Opened, long Failed, long Sent, long Dropped)> BulkCountersAsync()
        => InvokeAsync(_ => (_bulk.Opened, _bulk.Failed, _bulk.FramesSent, _bulk.FramesDropped));

    /// <summary>Binds a hosted plug-in (<see cref="IHostedNativeNet"/>) to the gateway and this loop, then starts the
    /// loop, the listener and the dialers.</summary>
    public void Start()
    {
        if (_native is IHostedNativeNet hosted)
        {
            hosted.Bind(Gateway, _loop);
        }

        _loop.Start();
        _tasks.Add(Task.Run(AcceptLoopAsync));
        _tasks.Add(Task.Run(DatagramLoopAsync));
        foreach (var peer in _peers.Values.Where(p => p.Gateway.Value > Gateway.Id.Value))
        {
            _tasks.Add(Task.Run(() => DialLoopAsync(peer)));
        }
    }

    /// <summary>Runs <paramref name="action"/> on the loop thread, waiting for room in the queue (back-pressure).</summary>
    public void Post(Action action) => _loop.Post(action);

    /// <summary>Runs <paramref name="action"/> on the loop thread unless the queue is full (then dropped and counted):
    /// for events that must never block a receive loop.</summary>
    public bool TryPost(Action action) => _loop.TryPost(action);

    /// <summary>Runs <paramref name="func"/> on the loop thread and returns its result.</summary>
    public Task<T> InvokeAsync<T>(Func<BroadcastGateway, T> func)
    {
        var done = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        Post(() =>
        {
            try
            {
                done.SetResult(func(Gateway));
            }
            catch (Exception e) when (e is InvalidOperationException or ArgumentException or FormatException)
            {
                done.SetException(e);
            }
        });
        return done.Task;
    }

    /// <summary>A snapshot of the gateway for <c>qs sessions</c>, with this runtime's own counters (refused
    /// connections and datagrams, peering authentication) among the gateway's.</summary>
    public Task<GatewaySnapshot> SnapshotAsync() => InvokeAsync(g =>
    {
        var snapshot = GatewaySnapshot.Of(g, Now);
        var counters = new Dictionary<string, long>(snapshot.Counters, StringComparer.Ordinal);
        foreach (var (name, value) in new (string, long)[]
        {
            (nameof(HelloRefused), HelloRefused), (nameof(DatagramsRefused), DatagramsRefused), (nameof(DatagramSourcesUnknown), DatagramSourcesUnknown),
            (nameof(DatagramSendsFailed), DatagramSendsFailed), (nameof(EventsDropped), EventsDropped),
            (nameof(PeeringUnauthenticated), PeeringUnauthenticated), (nameof(PeeringHandshakesFailed), PeeringHandshakesFailed),
            (nameof(PeeringFramesRejected), PeeringFramesRejected), (nameof(DatagramsUnauthenticated), DatagramsUnauthenticated),
            (nameof(ChannelHandshakesFailed), ChannelHandshakesFailed),
        })
        {
            counters.TryAdd(name, value);
        }

        return snapshot with { Counters = counters };
    });

    bool IGatewayHost.Send(GatewayId peer, ReadOnlySpan<byte> frame)
        => _links.TryGetValue(peer, out var link) && link.TrySend(frame, dropWhenFull: frame.Length > 1 && frame[1] == (byte)FrameType.Data);

    bool IGatewayHost.SendDatagram(GatewayId peer, ReadOnlySpan<byte> frame)
    {
        if (_sealed is not null)
        {
            // An authenticated link's datagrams are sealed under its datagram key (PeeringDatagrams).
            if (!_datagramKeys.TryGetValue(peer, out var keys) || frame.Length + keys.Overhead > _sealed.Length)
            {
                return ((IGatewayHost)this).Send(peer, frame);
            }

            frame.CopyTo(_sealed);
            frame = _sealed.AsSpan(0, keys.Seal(_sealed, frame.Length));
        }

        if (_batchedDatagramPeers.TryGetValue(peer, out var destination))
        {
            return _datagramBatch.Add(frame, destination); // sent with the loop turn's other datagrams (sendmmsg)
        }

        if (!_datagramPeers.TryGetValue(peer, out var endpoint))
        {
            return ((IGatewayHost)this).Send(peer, frame);
        }

        try
        {
            return _addresses.SendTo(_udp, frame, endpoint) == frame.Length;
        }
        catch (SocketException)
        {
            return false;
        }
    }

    bool IGatewayHost.SendToDataNode(GatewayId peer, uint node, ReadOnlySpan<byte> frame, bool realTime)
    {
        if (!_peerNodes.TryGetValue(node, out var address))
        {
            return realTime ? ((IGatewayHost)this).SendDatagram(peer, frame) : ((IGatewayHost)this).Send(peer, frame);
        }

        var receiver = new GatewayId(node);
        if (!realTime)
        {
            return _bulk.Send(address, receiver, frame); // bulk: a TCP channel to the data node
        }

        if (_sealed is not null)
        {
            // With a peering secret a real-time datagram is sealed under the keys of this gateway's bulk data channel to
            // the node; until that channel is up and confirmed, the frame travels on it (sealed, TCP).
            if (_bulk.DatagramKeys(address) is not { } keys || frame.Length + keys.Overhead > _sealed.Length)
            {
                return _bulk.Send(address, receiver, frame);
            }

            frame.CopyTo(_sealed);
            frame = _sealed.AsSpan(0, keys.Seal(_sealed, frame.Length));
        }

        return LossInjection.Drop(DropEveryNthDataDatagram, ref _datagramsToNodes, ref _datagramsDroppedForTest) || SendUdp(frame, address);
    }

    /// <summary>Peers' data nodes learnt from DATA_ENDPOINT (directly, or through the control node's ASSIGN) rather than
    /// configured, at most; configuration wins over what a peer says.</summary>
    public const int MaxLearnedDataNodes = 1024;

    /// <summary>Learnt addresses refused: the bound, or an address that is one of ours or another peer's.</summary>
    public long LearnedDataNodesRefused => Interlocked.Read(ref _learnedRefused);

    IPEndPoint? IControlHost.AddressOf(uint node) => _ownNodes.GetValueOrDefault(node);

    void IGatewayHost.LearnDataNode(GatewayId peer, uint node, IPEndPoint address)
    {
        if (_configuredPeerNodes.Contains(node))
        {
            return; // configuration wins
        }

        _peerNodes.TryGetValue(node, out var known);
        bool taken = address.Equals(ListenEndpoint) || _ownNodeSources.ContainsKey(address) || _datagramSources.ContainsKey(address)
            || (_peerNodeSources.TryGetValue(address, out var owner) && owner != peer);
        if (taken || (known is null && _peerNodes.Count - _configuredPeerNodes.Count >= MaxLearnedDataNodes))
        {
            Interlocked.Increment(ref _learnedRefused);
            return;
        }

        if (known is not null)
        {
            _peerNodeSources.Remove(known);
            _peerNodeIds.Remove(known);
        }

        _peerNodes[node] = address;
        _peerNodeSources[address] = peer;
        _peerNodeIds[address] = node;
        _peerNodeConfig[node] = new DataNodeAddress(peer, node, address);
        RefreshAddresses();
    }

    /// <summary>Datagrams received from a source in none of the runtime's tables (each cost an endpoint object; they are
    /// refused, <see cref="DatagramsRefused"/>).</summary>
    public long DatagramSourcesUnknown => _addresses.Misses;

    // After any change to the tables of addresses (loop thread, or the constructor).
    private void RefreshAddresses()
        => _addresses.Replace(_datagramSources.Keys.Concat(_ownNodeSources.Keys).Concat(_peerNodeSources.Keys).Concat(_peerNodes.Values)
            .Concat(_otherControl is null ? [] : [_otherControl]));

    bool IControlHost.SendToDataNode(uint node, ReadOnlySpan<byte> frame) => _ownNodes.TryGetValue(node, out var address) && SendUdp(frame, address);

    bool IControlHost.SendToOtherControl(ReadOnlySpan<byte> frame) => _otherControl is { } other && SendUdp(frame, other);

    private bool SendUdp(ReadOnlySpan<byte> frame, IPEndPoint address)
    {
        try
        {
            return _addresses.SendTo(_udp, frame, address) == frame.Length;
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            return false;
        }
    }

    void IGatewayHost.Disconnect(GatewayId peer)
    {
        if (_links.Remove(peer, out var link))
        {
            link.Close();
        }

        ForgetDatagrams(peer);
    }

    private void ForgetDatagrams(GatewayId peer)
    {
        if (_datagramPeers.Remove(peer, out var endpoint))
        {
            _datagramSources.Remove(endpoint);
            RefreshAddresses();
        }

        _batchedDatagramPeers.Remove(peer);
        _datagramKeys.Remove(peer); // disposed when its connection ends
    }

    private Task DatagramLoopAsync() => DatagramReceiveLoop.RunAsync(_udp, _addresses, (from, frame) =>
    {
        if (!_loop.TryWrite(DatagramKind, 0, from, frame))
        {
            Interlocked.Increment(ref _datagramsRefused);
        }
    }, _stop.Token);

    // On the loop thread: the runtime's own events, in the order they arrived.
    private void OnRecord(in InboxRecord record, ReadOnlySpan<byte> frame)
    {
        switch (record.Kind)
        {
            case PeerFrameKind:
                Gateway.OnFrame(new GatewayId(record.Key), frame, Now);
                break;
            case ChannelFrameKind:
                // As a datagram from a peer's data node: accepted while the peering link to that peer is up.
                var from = new GatewayId(record.Key);
                if (_links.ContainsKey(from))
                {
                    Gateway.OnFrame(from, frame, Now, fromPeerDataNode: true);
                }
                else
                {
                    Interlocked.Increment(ref _datagramsRefused);
                }

                break;
            case DatagramKind:
                OnDatagram((IPEndPoint)record.Target!, frame);
                break;
        }
    }

    private void OnDatagram(IPEndPoint from, ReadOnlySpan<byte> frame)
    {
        // Well-formed is not trusted: only a connected peer's announced address (or one of its configured data
        // nodes), or one of our own data nodes, may send datagrams.
        if (_ownNodeSources.ContainsKey(from) || from.Equals(_otherControl))
        {
            Gateway.OnDataNodeFrame(frame, Now); // a data node's HEARTBEAT or REPORT, or the other control node's LEAD
        }
        else if (_peerNodeSources.TryGetValue(from, out var viaNode) && _links.ContainsKey(viaNode))
        {
            if (_opened is null)
            {
                Gateway.OnFrame(viaNode, frame, Now, fromPeerDataNode: true);
            }
            else if (_peerNodeIds.TryGetValue(from, out uint node) && _nodeDatagramKeys.TryGetValue(node, out var keys) && keys.Open(frame, _opened, out int length))
            {
                // Sealed under the keys of the data node's authenticated bulk data channel to this gateway.
                Gateway.OnFrame(viaNode, _opened.AsSpan(0, length), Now, fromPeerDataNode: true);
            }
            else
            {
                Interlocked.Increment(ref _datagramsUnauthenticated);
            }
        }
        else if (_datagramSources.TryGetValue(from, out var peer) && _links.ContainsKey(peer))
        {
            if (_opened is null)
            {
                Gateway.OnFrame(peer, frame, Now);
            }
            else if (_datagramKeys.TryGetValue(peer, out var keys) && keys.Open(frame, _opened, out int length))
            {
                Gateway.OnFrame(peer, _opened.AsSpan(0, length), Now);
            }
            else
            {
                Interlocked.Increment(ref _datagramsUnauthenticated);
            }
        }
        else
        {
            Interlocked.Increment(ref _datagramsRefused);
        }
    }

    private Task AcceptLoopAsync() => TcpAcceptor.RunAsync(_listener, OnAccepted, _stop.Token);

    private void OnAccepted(Socket socket)
    {
        if (!_acceptLimit.TryServe(socket, s => RunLinkAsync(s, expected: null)))
        {
            Interlocked.Increment(ref _helloRefused);
        }
    }

    private async Task DialLoopAsync(PeerConfig peer)
    {
        int next = 0;
        while (!_stop.IsCancellationRequested)
        {
            // A passive control node (a standby) dials nobody; a peer with a standby is tried at each address in turn.
            var address = peer.Addresses[next++ % peer.Addresses.Count];
            var socket = new Socket(address.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
            try
            {
                if (Gateway.IsActive)
                {
                    await socket.ConnectAsync(address, _stop.Token).ConfigureAwait(false);
                    await RunLinkAsync(socket, peer.Gateway).ConfigureAwait(false);
                }
                else
                {
                    socket.Dispose();
                }
            }
            catch (OperationCanceledException)
            {
                socket.Dispose();
                return;
            }
            catch (SocketException)
            {
                socket.Dispose();
            }

            try
            {
                await Task.Delay(TimeSpan.FromSeconds(1), _stop.Token).ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
                return;
            }
        }
    }

    private async Task RunLinkAsync(Socket socket, GatewayId? expected)
    {
        var link = new FramedConnection(socket, PeerCodec.MaxFrameBytes, _peerQueueBytes);
        await using (link.ConfigureAwait(false))
        {
            GatewayId? peer = null;
            bool refused = false;
            var remote = (socket.RemoteEndPoint as IPEndPoint)?.Address;
            // A bulk data channel from a peer's data node: first frame DATA_CHANNEL, then DATA only.
            var handshake = _peeringSecret is null ? null : new PeeringHandshake(_peeringSecret, Gateway.Id);
            var channel = new BulkDataChannels.Inbound(hello =>
                hello.Node != 0 && _peerNodeConfig.TryGetValue(hello.Node, out var d) && d.Gateway == hello.Gateway
                && remote is not null && d.Address.Address.Equals(remote) ? hello.Gateway : null, handshake, link);
            PeeringLinkKeys? keys = null; // the keys of this link once the peer's PEER_AUTH arrived
            GatewayId? authenticated = null; // that peer
            link.TrySend(handshake?.AuthFrame ?? PeerCodec.Hello(Gateway.Id, Gateway.Island, (ushort)ListenEndpoint.Port));
            using var helloTimer = new CancellationTokenSource(HelloTimeout);
            using var registration = helloTimer.Token.Register(() =>
            {
                if (peer is null && !channel.Authenticated)
                {
                    Interlocked.Increment(ref _helloRefused);
                    link.Close();
                }
            });
            await link.RunAsync(new FrameSpanHandler(frame =>
            {
                if (refused)
                {
                    return;
                }

                if (peer is { } known)
                {
                    _loop.Write(PeerFrameKind, known.Value, null, frame); // waits for room: TCP pushes back on the peer
                    return;
                }

                if (channel.From is not null || (authenticated is null && PeerCodec.PeekType(frame, out var first) == FrameError.None && first == FrameType.DataChannel))
                {
                    bool wasAuthenticated = channel.Authenticated;
                    if (channel.OnFrame(frame, out refused))
                    {
                        _loop.Write(ChannelFrameKind, channel.From!.Value.Value, null, frame);
                    }
                    else if (refused)
                    {
                        OnChannelRefused(channel.Refusal, channel.Sender, remote);
                        link.Close();
                    }
                    else if (!wasAuthenticated && channel.Authenticated && channel.Keys is { } channelKeys)
                    {
                        var sender = channel.Sender.Value;
                        Post(() =>
                        {
                            // The sender's real-time datagrams open under this channel's keys from now on; then the
                            // confirmation (its first sealed frame) tells the sender to seal them.
                            _nodeDatagramKeys[sender] = channelKeys.Datagrams;
                            link.TrySend(PeerCodec.DataChannel(Gateway.Id, 0));
                        });
                    }

                    return;
                }

                if (handshake is not null && authenticated is null)
                {
                    (authenticated, keys) = OnPeerAuth(handshake, link, frame, expected, remote);
                    refused = authenticated is null;
                    return;
                }

                if (PeerCodec.Decode(frame, out var message) != FrameError.None || message is not HelloMessage hello
                    || !_peers.TryGetValue(hello.Gateway, out var config) || (expected is { } e && e != hello.Gateway)
                    || (authenticated is { } a && a != hello.Gateway))
                {
                    refused = true;
                    Interlocked.Increment(ref _helloRefused);
                    if (handshake is null && message is PeerAuthMessage asks)
                    {
                        Interlocked.Increment(ref _peeringUnauthenticated);
                        Warn(1, "Peering: gateway {Peer} at {Address} asks for peering authentication (PEER_AUTH) and this gateway has no peering secret (GatewayOptions.PeeringSecret, qs gateway --peering-secret-file): refused", asks.Gateway.Value, remote);
                    }

                    link.Close();
                    return;
                }

                peer = hello.Gateway;
                Post(() =>
                {
                    // Registered first: PeerConnected already sends (the whole routing table) on the link.
                    if (_links.ContainsKey(hello.Gateway))
                    {
                        link.Close();
                        return;
                    }

                    _links[hello.Gateway] = link;
                    if (!Gateway.PeerConnected(hello.Gateway, hello.Island, config.Costs, Now))
                    {
                        _links.Remove(hello.Gateway);
                        link.Close();
                    }
                    else if (hello.UdpPort != 0 && remote is not null)
                    {
                        var endpoint = new IPEndPoint(remote, hello.UdpPort);
                        _datagramPeers[hello.Gateway] = endpoint;
                        _datagramSources[endpoint] = hello.Gateway;
                        if (keys is not null)
                        {
                            _datagramKeys[hello.Gateway] = keys.Datagrams;
                        }

                        RefreshAddresses();
                        if (endpoint.AddressFamily == AddressFamily.InterNetwork)
                        {
                            _batchedDatagramPeers[hello.Gateway] = DatagramSendBatch.To(endpoint);
                        }
                    }
                });
            }), _stop.Token).ConfigureAwait(false);

            if (link.RejectedFrames > 0 && channel.From is not null)
            {
                Interlocked.Increment(ref _peeringHandshakesFailed);
                Warn(7, "Peering: a bulk data channel from endpoint {Sender} at {Address} sent a frame that did not open (another peering secret, or altered): closed", channel.Sender.Value, remote);
            }
            else if (link.RejectedFrames > 0)
            {
                if (peer is null)
                {
                    Interlocked.Increment(ref _peeringHandshakesFailed);
                    Warn(2, "Peering: the HELLO of gateway {Peer} at {Address} did not open under this connection's keys (another peering secret, or a recorded handshake replayed): refused", authenticated?.Value, remote);
                }
                else
                {
                    Interlocked.Increment(ref _peeringFramesRejected);
                    Warn(3, "Peering: a frame from gateway {Peer} at {Address} failed authentication (altered, forged or replayed): link closed", peer.Value.Value, remote);
                }
            }

            if (peer is { } gone)
            {
                Post(() =>
                {
                    if (_links.TryGetValue(gone, out var current) && current == link)
                    {
                        _links.Remove(gone);
                        ForgetDatagrams(gone);
                        Gateway.PeerDisconnected(gone, Now);
                    }
                });
            }

            if (channel.Keys is { } ended)
            {
                var sender = channel.Sender.Value;
                Post(() =>
                {
                    if (_nodeDatagramKeys.TryGetValue(sender, out var current) && current == ended.Datagrams)
                    {
                        _nodeDatagramKeys.Remove(sender);
                    }

                    ended.Datagrams.Dispose();
                });
            }

            if (keys is not null)
            {
                Post(() =>
                {
                    if (authenticated is { } a && _datagramKeys.TryGetValue(a, out var current) && current == keys.Datagrams)
                    {
                        _datagramKeys.Remove(a);
                    }

                    keys.Datagrams.Dispose(); // the loop thread was its only user
                });
            }
        }
    }

    // The first frame on a link when this gateway has a peering secret: the peer's PEER_AUTH. Seals the link and sends
    // the HELLO (sealed); returns the peer, or null when refused (counted, logged, link closed). The connection's reader.
    private (GatewayId?, PeeringLinkKeys?) OnPeerAuth(PeeringHandshake handshake, FramedConnection link, ReadOnlySpan<byte> frame, GatewayId? expected, IPAddress? remote)
    {
        var error = PeerCodec.Decode(frame, out var message);
        if (message is PeerAuthMessage auth && _peers.ContainsKey(auth.Gateway) && (expected is not { } e || e == auth.Gateway))
        {
            if (handshake.Complete(auth) is { } keys)
            {
                link.Seal(keys.Frames);
                link.TrySend(PeerCodec.Hello(Gateway.Id, Gateway.Island, (ushort)ListenEndpoint.Port));
                return (auth.Gateway, keys);
            }

            Interlocked.Increment(ref _peeringHandshakesFailed);
            Warn(6, "Peering: gateway {Peer} at {Address} sent a PEER_AUTH that reflects ours: refused", auth.Gateway.Value, remote);
        }
        else if (message is HelloMessage hello)
        {
            Interlocked.Increment(ref _peeringUnauthenticated);
            Warn(4, "Peering: gateway {Peer} at {Address} sent its HELLO in the clear, but this gateway requires peering authentication (GatewayOptions.PeeringSecret, qs gateway --peering-secret-file) and the peer has none: refused", hello.Gateway.Value, remote);
        }
        else
        {
            Warn(5, "Peering: a connection from {Address} did not start with a PEER_AUTH of a configured peer ({Error}): refused", remote, error);
        }

        Interlocked.Increment(ref _helloRefused);
        link.Close();
        return (null, null);
    }

    // A bulk data channel refused on this listener (counted; logged for the authentication failures). The reader.
    private void OnChannelRefused(InboundRefusal why, GatewayId sender, IPAddress? remote)
    {
        Interlocked.Increment(ref _helloRefused);
        if (why == InboundRefusal.Unauthenticated)
        {
            Interlocked.Increment(ref _peeringUnauthenticated);
            Warn(8, "Peering: a bulk data channel from endpoint {Sender} at {Address} did not authenticate (no PEER_AUTH: the sender has no peering secret): refused", sender.Value, remote);
        }
        else if (why == InboundRefusal.HandshakeFailed)
        {
            Interlocked.Increment(ref _peeringHandshakesFailed);
            Warn(9, "Peering: a bulk data channel from endpoint {Sender} at {Address} failed its handshake (another endpoint's PEER_AUTH, a reflection, or a wrong opening): refused", sender.Value, remote);
        }
    }

    private void Warn<T0, T1>(int key, string template, T0 arg0, T1 arg1)
    {
        if (Logger.IsEnabled(LogLevel.Warning))
        {
            _loop.TryPost(() => (_log ??= new RateLimitedLog(Logger, this)).Warn(key, template, arg0, arg1));
        }
    }

    public async ValueTask DisposeAsync()
    {
        if (_stop.IsCancellationRequested)
        {
            return;
        }

        var closed = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        Post(() =>
        {
            foreach (var link in _links.Values)
            {
                link.Close();
            }

            _links.Clear();
            closed.TrySetResult();
        });
        await Task.WhenAny(closed.Task, Task.Delay(TimeSpan.FromSeconds(2))).ConfigureAwait(false);
        await _stop.CancelAsync().ConfigureAwait(false);
        _listener.Dispose();
        _udp.Dispose();
        if (_loop.Stop(TimeSpan.FromSeconds(2)))
        {
            _datagramBatch.Dispose(); // only once the loop that uses it has ended
        }

        await _bulk.DisposeAsync().ConfigureAwait(false);

        try
        {
            await Task.WhenAll(_tasks).WaitAsync(TimeSpan.FromSeconds(2)).ConfigureAwait(false);
        }
        catch (TimeoutException)
        {
        }

        _stop.Dispose();
    }
}
