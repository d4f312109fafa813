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
    private readonly Action<Action> _post;
    private readonly Func<TimeSpan> _clock;
    private readonly Dictionary<IPEndPoint, Channel> _channels = [];
    private readonly List<Task> _tasks = [];
    private readonly CancellationTokenSource _stop = new();

    /// <param name="gateway">The sender's gateway.</param>
    /// <param name="node">The sending data node; 0 when the gateway itself sends.</param>
    /// <param name="post">Runs an action on the owner's loop thread (may wait for room, never drops).</param>
    /// <param name="clock">The owner's monotonic clock.</param>
    public BulkDataChannels(GatewayId gateway, uint node, Action<Action> post, Func<TimeSpan> clock)
    {
        _hello = PeerCodec.DataChannel(gateway, node);
        _post = post;
        _clock = clock;
    }

    /// <summary>Channels connected (dials that succeeded).</summary>
    public long Opened { get; private set; }

    /// <summary>Dials that failed, and channels that closed.</summary>
    public long Failed { get; private set; }

    /// <summary>DATA frames queued on a connected channel or waiting for one.</summary>
    public long FramesSent { get; private set; }

    /// <summary>DATA frames dropped: queue full, the dial failed, or sent during the back-off.</summary>
    public long FramesDropped { get; private set; }

    /// <summary>Queues <paramref name="frame"/> (copied) for the channel to <paramref name="target"/>, dialling it if
    /// needed; false when the frame was dropped.</summary>
    public bool Send(IPEndPoint target, ReadOnlySpan<byte> frame)
    {
        if (!_channels.TryGetValue(target, out var channel))
        {
            channel = new Channel();
            _channels[target] = channel;
            Dial(target, channel);
        }
        else if (channel.Link is null && channel.Pending is null && _clock() >= channel.RetryAt)
        {
            Dial(target, channel);
        }

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

    private static bool Add(List<byte[]> pending, ReadOnlySpan<byte> frame)
    {
        pending.Add(frame.ToArray());
        return true;
    }

    private void Dial(IPEndPoint target, Channel channel)
    {
        channel.Pending = [];
        _tasks.RemoveAll(t => t.IsCompleted);
        _tasks.Add(Task.Run(() => RunAsync(target, channel)));
    }

    private async Task RunAsync(IPEndPoint target, Channel channel)
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
        await using (link.ConfigureAwait(false))
        {
            link.TrySend(_hello);
            _post(() => Up(target, channel, link));
            try
            {
                // Nothing the receiver sends means anything here (a gateway's listener greets every connection with its
                // HELLO before it knows what the connection is for): read and ignored, until the channel closes.
                await link.RunAsync(new FrameSpanHandler(static _ => { }), _stop.Token).ConfigureAwait(false);
            }
            catch (Exception e) when (e is SocketException or IOException or OperationCanceledException or ObjectDisposedException)
            {
            }

            _post(() => Down(channel, link));
        }
    }

    private void Up(IPEndPoint target, Channel channel, FramedConnection link)
    {
        if (_stop.IsCancellationRequested || !_channels.TryGetValue(target, out var current) || current != channel)
        {
            link.Close();
            return;
        }

        Opened++;
        channel.Link = link;
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

    // The dial failed (link null) or the channel closed: what waits is lost; sends drop until the back-off ends.
    private void Down(Channel channel, FramedConnection? link)
    {
        if (channel.Link != link)
        {
            return;
        }

        Failed++;
        int lost = channel.Pending?.Count ?? 0;
        FramesSent -= lost;
        FramesDropped += lost;
        channel.Pending = null;
        channel.Link = null;
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

    // One channel's state: dialling (Pending set), up (Link set), or backing off (neither; RetryAt).
    private sealed class Channel
    {
        public FramedConnection? Link { get; set; }

        public List<byte[]>? Pending { get; set; }

        public TimeSpan RetryAt { get; set; }
    }

    /// <summary>The receiving side of a channel, for a runtime that accepted a connection: <see cref="OnFrame"/> takes
    /// every frame. The first must be DATA_CHANNEL from a sender <c>admit</c> accepts from the connection's remote
    /// address (it returns the gateway the DATA counts as coming from, or null); every later frame must be DATA. A
    /// refused first frame or a later non-DATA frame closes the connection (the caller counts it).</summary>
    internal sealed class Inbound(Func<DataChannelMessage, GatewayId?> admit)
    {
        /// <summary>The gateway this channel's DATA comes from, once admitted.</summary>
        public GatewayId? From { get; private set; }

        /// <summary>True when the frame is DATA to hand on (from <see cref="From"/>); false when the first frame was
        /// admitted (nothing to hand on) or, with <paramref name="refused"/>, when the connection must close.</summary>
        public bool OnFrame(ReadOnlySpan<byte> frame, out bool refused)
        {
            refused = false;
            if (From is not null)
            {
                refused = PeerCodec.PeekType(frame, out var type) != FrameError.None || type != FrameType.Data;
                return !refused;
            }

            if (PeerCodec.Decode(frame, out var message) != FrameError.None || message is not DataChannelMessage hello || admit(hello) is not { } from)
            {
                refused = true;
                return false;
            }

            From = from;
            return false;
        }
    }
}
