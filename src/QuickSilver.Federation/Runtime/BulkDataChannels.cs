using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Runtime;

/// <summary>
/// The seed's "TCP for bulk between islands" where a clustered gateway's data nodes are involved: a bulk session's DATA
/// frames between a data node and a peer gateway, or between a gateway and a peer's data node, travel on a TCP
/// connection (framed by <see cref="FramedConnection"/>, as peering links are) instead of as UDP datagrams, so the
/// transport retransmits what the network loses and keeps the frames in order. Gateway to gateway, bulk DATA already
/// travels on the peering link.
/// <para>A channel is one-way and belongs to its sender: the first frame sending to an address dials it; the
/// connection opens with DATA_CHANNEL (who sends: gateway, data node or 0) and then carries only DATA frames. While it
/// connects, up to <see cref="MaxPending"/> frames wait; when a dial fails or the connection closes, the waiting frames
/// are dropped (counted) and sends to that address are dropped (counted) for <see cref="RetryAfter"/> before the next
/// dial, so an unreachable peer costs one connection attempt a second, not one per frame. Once connected, a full send
/// queue (<see cref="FramedConnection.OutgoingByteLimit"/> bytes) drops the frame, counted, as on a peering link.</para>
/// Loop thread only: dial results come back through the runtime's <c>post</c>.
/// </summary>
internal sealed class BulkDataChannels : IAsyncDisposable
{
    /// <summary>Frames that may wait for a channel being dialled.</summary>
    public const int MaxPending = FramedConnection.OutgoingLimit;

    /// <summary>How long sends to an address are dropped after its dial failed or its channel closed.</summary>
    public static readonly TimeSpan RetryAfter = TimeSpan.FromSeconds(1);

    private static readonly TimeSpan ConnectTimeout = TimeSpan.FromSeconds(3);

    private readonly byte[] _hello;
    private readonly GatewayId _self; // this sender's endpoint number: the data node's, or the gateway's
    private readonly byte[]? _secret;
    private readonly Action<Action> _post;
    private readonly Func<TimeSpan> _clock;
    private readonly Dictionary<IPEndPoint, Channel> _channels = [];
    private readonly List<Task> _tasks = [];
    private readonly CancellationTokenSource _stop = new();
    private long _handshakesFailed;

    /// <param name="gateway">The sender's gateway.</param>
    /// <param name="node">The sending data node; 0 when the gateway itself sends.</param>
    /// <param name="post">Runs an action on the owner's loop thread (may wait for room, never drops).</param>
    /// <param name="clock">The owner's monotonic clock.</param>
    /// <param name="peeringSecret">The federation's peering secret: every channel then authenticates both ends
    /// (PEER_AUTH both ways, <see cref="PeeringPurpose.BulkChannel"/> keys) and seals its frames; null: in the clear.</param>
    public BulkDataChannels(GatewayId gateway, uint node, Action<Action> post, Func<TimeSpan> clock, byte[]? peeringSecret = null)
    {
        _hello = PeerCodec.DataChannel(gateway, node);
        _self = node != 0 ? new GatewayId(node) : gateway;
        _secret = peeringSecret;
        _post = post;
        _clock = clock;
    }

    /// <summary>Channels connected (dials that succeeded; with a peering secret, handshakes that completed).</summary>
    public long Opened { get; private set; }

    /// <summary>Dials that failed, and channels that closed.</summary>
    public long Failed { get; private set; }

    /// <summary>DATA frames queued on a connected channel or waiting for one.</summary>
    public long FramesSent { get; private set; }

    /// <summary>DATA frames dropped: queue full, the dial failed, or sent during the back-off.</summary>
    public long FramesDropped { get; private set; }

    /// <summary>Channels whose receiver failed authentication (with a peering secret): its first frame was not a
    /// PEER_AUTH of the endpoint dialled, or its confirmation did not open (another secret); each closed (any thread).</summary>
    public long HandshakesFailed => Interlocked.Read(ref _handshakesFailed);

    /// <summary>Queues <paramref name="frame"/> (copied) for the channel to <paramref name="target"/>, dialling it if
    /// needed; false when the frame was dropped. <paramref name="receiver"/> is the endpoint there (a data node's
    /// number, or the gateway's): with a peering secret, the one whose PEER_AUTH the channel accepts.</summary>
    public bool Send(IPEndPoint target, GatewayId receiver, ReadOnlySpan<byte> frame)
    {
        var channel = Ensure(target, receiver);
        bool queued = channel.Link is { } link
            ? link.TrySend(frame, dropWhenFull: true)
            : channel.Pending is { } pending && pending.Count < MaxPending && Add(pending, frame);
        if (queued)
        {
            FramesSent++;
        }
        else
        {
            FramesDropped++;
        }

        return queued;
    }

    /// <summary>With a peering secret: the keys that seal real-time datagrams to <paramref name="target"/>, once its
    /// channel is up and the receiver confirmed it (it then holds the same keys); null before (the caller sends the
    /// frame on the channel instead, <see cref="Send"/>, which dials it if needed).</summary>
    public PeeringDatagrams? DatagramKeys(IPEndPoint target) => _channels.TryGetValue(target, out var c) && c.Confirmed ? c.Datagrams : null;

    private Channel Ensure(IPEndPoint target, GatewayId receiver)
    {
        if (!_channels.TryGetValue(target, out var channel))
        {
            channel = new Channel();
            _channels[target] = channel;
            Dial(target, receiver, channel);
        }
        else if (channel.Link is null && channel.Pending is null && _clock() >= channel.RetryAt)
        {
            Dial(target, receiver, channel);
        }

        return channel;
    }

    private static bool Add(List<byte[]> pending, ReadOnlySpan<byte> frame)
    {
        pending.Add(frame.ToArray());
        return true;
    }

    private void Dial(IPEndPoint target, GatewayId receiver, Channel channel)
    {
        channel.Pending = [];
        _tasks.RemoveAll(t => t.IsCompleted);
        _tasks.Add(Task.Run(() => RunAsync(target, receiver, channel)));
    }

    private async Task RunAsync(IPEndPoint target, GatewayId receiver, Channel channel)
    {
        var socket = new Socket(target.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        try
        {
            using var timeout = CancellationTokenSource.CreateLinkedTokenSource(_stop.Token);
            timeout.CancelAfter(ConnectTimeout);
            await socket.ConnectAsync(target, timeout.Token).ConfigureAwait(false);
        }
        catch (Exception e) when (e is SocketException or OperationCanceledException or ObjectDisposedException)
        {
            socket.Dispose();
            _post(() => Down(channel, link: null));
            return;
        }

        var link = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
        PeeringLinkKeys? keys = null;
        await using (link.ConfigureAwait(false))
        {
            link.TrySend(_hello);
            FrameSpanHandler onFrame;
            if (_secret is null)
            {
                _post(() => Up(target, channel, link, null));

                // Nothing the receiver sends means anything here (a gateway's listener greets every connection with its
                // HELLO before it knows what the connection is for): read and ignored, until the channel closes.
                onFrame = static _ => { };
            }
            else
            {
                // PEER_AUTH both ways: the receiver's (sent on accept) must name the endpoint dialled; then this side
                // seals, repeats DATA_CHANNEL sealed (what proves it holds the secret), and the channel is up. The
                // receiver's first sealed frame confirms it holds the keys: from then on real-time datagrams are sealed.
                var handshake = new PeeringHandshake(_secret, _self);
                link.TrySend(handshake.AuthFrame);
                bool confirmed = false;
                onFrame = frame =>
                {
                    if (keys is null)
                    {
                        if (PeerCodec.Decode(frame, out var message) != FrameError.None || message is not PeerAuthMessage auth || auth.Gateway != receiver
                            || handshake.Complete(auth, PeeringPurpose.BulkChannel) is not { } completed)
                        {
                            Interlocked.Increment(ref _handshakesFailed);
                            link.Close();
                            return;
                        }

                        keys = completed;
                        link.Seal(completed.Frames);
                        link.TrySend(_hello);
                        _post(() => Up(target, channel, link, completed.Datagrams));
                    }
                    else if (!confirmed)
                    {
                        confirmed = true;
                        _post(() => Confirm(channel, link));
                    }
                };
            }

            try
            {
                await link.RunAsync(onFrame, _stop.Token).ConfigureAwait(false);
            }
            catch (Exception e) when (e is SocketException or IOException or OperationCanceledException or ObjectDisposedException)
            {
            }

            if (link.RejectedFrames > 0)
            {
                Interlocked.Increment(ref _handshakesFailed); // the receiver's frames do not open: another secret
            }

            _post(() => Down(channel, link));
        }

        if (keys is not null)
        {
            _post(() => keys.Datagrams.Dispose()); // the loop thread was its only user, and Down forgot it
        }
    }

    private void Up(IPEndPoint target, Channel channel, FramedConnection link, PeeringDatagrams? datagrams)
    {
        if (_stop.IsCancellationRequested || !_channels.TryGetValue(target, out var current) || current != channel)
        {
            link.Close();
            return;
        }

        Opened++;
        channel.Link = link;
        channel.Datagrams = datagrams;
        foreach (var frame in channel.Pending ?? [])
        {
            if (!link.TrySend(frame, dropWhenFull: true))
            {
                FramesSent--;
                FramesDropped++;
            }
        }

        channel.Pending = null;
    }

    private static void Confirm(Channel channel, FramedConnection link)
    {
        if (channel.Link == link)
        {
            channel.Confirmed = channel.Datagrams is not null;
        }
    }

    // The dial failed (link null) or the channel closed: what waits is lost; sends drop until the back-off ends.
    private void Down(Channel channel, FramedConnection? link)
    {
        if (channel.Link is not null && channel.Link != link)
        {
            return;
        }

        Failed++;
        int lost = channel.Pending?.Count ?? 0;
        FramesSent -= lost;
        FramesDropped += lost;
        channel.Pending = null;
        channel.Link = null;
        channel.Datagrams = null;
        channel.Confirmed = false;
        channel.RetryAt = _clock() + RetryAfter;
    }

    /// <summary>Closes every channel (frames still queued are lost).</summary>
    public async ValueTask DisposeAsync()
    {
        if (_stop.IsCancellationRequested)
        {
            return;
        }

        await _stop.CancelAsync().ConfigureAwait(false);
        try
        {
            await Task.WhenAll(_tasks.ToArray()).WaitAsync(TimeSpan.FromSeconds(2)).ConfigureAwait(false);
        }
        catch (TimeoutException)
        {
        }

        _stop.Dispose();
    }

    // One channel's state: dialling (Pending set), up (Link set), or backing off (neither; RetryAt). With a peering
    // secret, an up channel also has its datagram keys, used once the receiver confirmed.
    private sealed class Channel
    {
        public FramedConnection? Link { get; set; }

        public PeeringDatagrams? Datagrams { get; set; }

        public bool Confirmed { get; set; }

        public List<byte[]>? Pending { get; set; }

        public TimeSpan RetryAt { get; set; }
    }

    /// <summary>The receiving side of a channel, for a runtime that accepted a connection: <see cref="OnFrame"/> takes
    /// every frame. The first must be DATA_CHANNEL from a sender <c>admit</c> accepts from the connection's remote
    /// address (it returns the gateway the DATA counts as coming from, or null); every later frame must be DATA. A
    /// refused first frame or a later non-DATA frame closes the connection (the caller counts it).
    /// <para>With a peering secret (<paramref name="handshake"/>, whose PEER_AUTH the runtime sent on accept) the
    /// DATA_CHANNEL must be followed by the sender's PEER_AUTH naming the sending endpoint (the data node, or the gateway
    /// when the node is 0); the connection is then sealed (<see cref="PeeringPurpose.BulkChannel"/> keys), and its first
    /// sealed frame must repeat the DATA_CHANNEL: only then is the channel <see cref="Authenticated"/> and DATA taken. A
    /// sealed frame that does not open ends the connection (<see cref="FramedConnection.RejectedFrames"/>).</para>
    /// The connection's reader only.</summary>
    internal sealed class Inbound(Func<DataChannelMessage, GatewayId?> admit, PeeringHandshake? handshake = null, FramedConnection? link = null)
    {
        private DataChannelMessage? _opening;

        /// <summary>The gateway this channel's DATA comes from, once admitted.</summary>
        public GatewayId? From { get; private set; }

        /// <summary>The sending endpoint: the data node's number, or the gateway's when the gateway sends.</summary>
        public GatewayId Sender { get; private set; }

        /// <summary>The keys once the sender's PEER_AUTH arrived (with a peering secret).</summary>
        public PeeringLinkKeys? Keys { get; private set; }

        /// <summary>Admitted and, with a peering secret, proven to hold it: DATA is taken from now on.</summary>
        public bool Authenticated { get; private set; }

        /// <summary>Why the connection was refused, when <c>refused</c>.</summary>
        public InboundRefusal Refusal { get; private set; }

        /// <summary>True when the frame is DATA to hand on (from <see cref="From"/>); false when the frame was part of the
        /// opening (nothing to hand on; <see cref="Authenticated"/> turns true on its last frame) or, with
        /// <paramref name="refused"/>, when the connection must close.</summary>
        public bool OnFrame(ReadOnlySpan<byte> frame, out bool refused)
        {
            refused = false;
            if (Authenticated)
            {
                refused = PeerCodec.PeekType(frame, out var type) != FrameError.None || type != FrameType.Data;
                Refusal = refused ? InboundRefusal.NotData : InboundRefusal.None;
                return !refused;
            }

            if (From is null)
            {
                if (PeerCodec.Decode(frame, out var message) != FrameError.None || message is not DataChannelMessage hello || admit(hello) is not { } from)
                {
                    return Refuse(InboundRefusal.NotAdmitted, out refused);
                }

                From = from;
                Sender = hello.Node != 0 ? new GatewayId(hello.Node) : hello.Gateway;
                _opening = hello;
                Authenticated = handshake is null;
                return false;
            }

            if (Keys is null)
            {
                if (PeerCodec.Decode(frame, out var message) != FrameError.None || message is not PeerAuthMessage auth)
                {
                    return Refuse(InboundRefusal.Unauthenticated, out refused); // a sender without the secret
                }

                if (auth.Gateway != Sender || handshake!.Complete(auth, PeeringPurpose.BulkChannel) is not { } keys)
                {
                    return Refuse(InboundRefusal.HandshakeFailed, out refused); // another endpoint's, or a reflection
                }

                Keys = keys;
                link!.Seal(keys.Frames);
                return false;
            }

            // The first sealed frame (it opened: the sender holds the secret) must repeat the opening.
            if (PeerCodec.Decode(frame, out var repeat) != FrameError.None || repeat != _opening)
            {
                return Refuse(InboundRefusal.HandshakeFailed, out refused);
            }

            Authenticated = true;
            return false;
        }

        private bool Refuse(InboundRefusal why, out bool refused)
        {
            Refusal = why;
            refused = true;
            return false;
        }
    }
}

/// <summary>Why a runtime closed an inbound bulk data channel (<see cref="BulkDataChannels.Inbound"/>).</summary>
internal enum InboundRefusal
{
    None = 0,

    /// <summary>The first frame is not a DATA_CHANNEL of a known sender at its known IP address.</summary>
    NotAdmitted,

    /// <summary>With a peering secret: no PEER_AUTH after the DATA_CHANNEL (the sender has no secret).</summary>
    Unauthenticated,

    /// <summary>With a peering secret: a PEER_AUTH of another endpoint or a reflection, or a first sealed frame that
    /// is not the DATA_CHANNEL repeated.</summary>
    HandshakeFailed,

    /// <summary>A frame after the opening that is not DATA.</summary>
    NotData,
}
