using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text;
using QuickSilver.Federation.Io;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Plugins;

/// <summary>Options of the IP-multicast plug-in (docs/federation.md, "Options").</summary>
public sealed record MulticastNativeNetOptions
{
    /// <summary>The interface multicast is sent and joined on (loopback here).</summary>
    public IPAddress Interface { get; init; } = IPAddress.Loopback;

    /// <summary>First group of the pool Down channels are allocated from; channel k is group base+k, port PortBase+k.</summary>
    public IPAddress PoolBase { get; init; } = IPAddress.Parse("239.255.10.0");

    public int PoolSize { get; init; } = 64;

    public int PortBase { get; init; } = 41_000;

    /// <summary>The island's well-known mediator group (seed §5.4): clients send JOIN / LEAVE datagrams here.</summary>
    public IPEndPoint? Mediator { get; init; }

    /// <summary>Numbered receivers (clients that joined with <c>RECEIVER n port</c>, for per-receiver sessions) this
    /// plug-in keeps an address for. Beyond it, a new number takes the place of the one not heard from the longest if
    /// that one has not joined for <see cref="ReceiverHold"/>; otherwise its JOIN is refused and counted.</summary>
    public int MaxReceivers { get; init; } = 1024;

    /// <summary>How long a numbered receiver's address is kept without a JOIN refreshing it, at the least.</summary>
    public TimeSpan ReceiverHold { get; init; } = TimeSpan.FromSeconds(60);

    public void Validate()
    {
        if (!IsMulticast(PoolBase))
        {
            throw new ArgumentOutOfRangeException(nameof(PoolBase), $"pool base {PoolBase} is not an IPv4 multicast address");
        }

        if (PoolSize < 1 || PoolSize > 4096)
        {
            throw new ArgumentOutOfRangeException(nameof(PoolSize), $"pool size must be 1..4096; got {PoolSize}");
        }

        if (PortBase < 1024 || PortBase + PoolSize > 65_535)
        {
            throw new ArgumentOutOfRangeException(nameof(PortBase), $"port base must leave room for the pool within 1024..65535; got {PortBase}");
        }

        if (Mediator is { } m && !IsMulticast(m.Address))
        {
            throw new ArgumentOutOfRangeException(nameof(Mediator), $"mediator {m} is not an IPv4 multicast group");
        }

        if (MaxReceivers < 1 || MaxReceivers > 65_536)
        {
            throw new ArgumentOutOfRangeException(nameof(MaxReceivers), $"MaxReceivers must be 1..65536; got {MaxReceivers}");
        }

        if (ReceiverHold <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(nameof(ReceiverHold), $"ReceiverHold must be positive; got {ReceiverHold}");
        }
    }

    internal static bool IsMulticast(IPAddress a) => a.AddressFamily == AddressFamily.InterNetwork && (a.GetAddressBytes()[0] & 0xF0) == 0xE0;
}

/// <summary>
/// The NativeNet plug-in for an island whose medium is plain IP multicast (seed §5.4's example). A session's native
/// name in the owner island is its group and each flow is a port: <c>bfed://1/239.1.2.3/5000</c> is group 239.1.2.3,
/// port 5000. Down channels come from a pool of groups (one group and port per channel). subscribe opens a socket bound
/// to the group's port and joins the group; refresh does nothing (IGMP keeps the join); unsubscribe closes it;
/// reclaim_channel returns the group to the pool; send_data sends from one shared socket; get_sroutes returns null
/// (the island exposes nothing). Datagrams the plug-in sent itself are not handed back (own-echo filter by source
/// address). The mediator is the island's well-known group: a client sends <c>JOIN &lt;url&gt;</c> or
/// <c>LEAVE &lt;url&gt;</c> (ASCII) and gets back, unicast, <c>TRANSLATION addr…</c>, <c>NO_ROUTE reason</c> or
/// <c>REDIRECT gateway owner-gateway</c>. A client that wants its own copy of a per-receiver session's packets
/// (<c>delivery=unicast|corecast</c>) joins as a numbered receiver, <c>JOIN &lt;url&gt; RECEIVER n port</c>: the
/// gateway then sends it each packet by unicast, to the JOIN's source address and that port
/// (<see cref="IReceiverNativeNet.SendToReceiver"/>).
/// Receive loops run on the thread pool and post to the gateway's loop through <see cref="Bind"/>'s poster.
/// </summary>
public sealed class MulticastNativeNet : IHostedNativeNet, IReceiverNativeNet, IDisposable
{
    /// <summary>Numbered receivers' addresses (loop thread only).</summary>
    private readonly Dictionary<uint, (Destination To, IPEndPoint Address, long LastJoin)> _receivers = new();
    private long _receiversRefused;
    private readonly MulticastNativeNetOptions _options;
    private readonly Socket _send;
    private readonly DatagramSendBatch _sendBatch;
    private readonly bool[] _used;
    private readonly CancellationTokenSource _stop = new();
    private INativeNetUpcalls? _upcalls;
    private INativeNetLoop? _loop;
    private Socket? _mediator;
    private long _received;
    private long _dropped;
    private long _badMediatorRequests;

    public MulticastNativeNet(MulticastNativeNetOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        _options = options;
        _used = new bool[options.PoolSize];
        _send = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        _send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, options.Interface.GetAddressBytes());
        _send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
        _send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastTimeToLive, 1);
        _send.SendBufferSize = 4 << 20;
        _send.Bind(new IPEndPoint(options.Interface, 0));
        _sendBatch = new DatagramSendBatch(_send);
    }

    public long Received => Interlocked.Read(ref _received);

    public long Dropped => Interlocked.Read(ref _dropped);

    /// <summary>Datagrams sent into the island, the send system calls they took, and those the kernel refused (loop
    /// thread).</summary>
    public (long Sent, long Calls, long Failed) Sends => (_sendBatch.Sent, _sendBatch.Calls, _sendBatch.Failed);

    /// <summary>Datagrams received from subscribed channels and the receive system calls they took.</summary>
    public (long Datagrams, long Calls) Receives => (Interlocked.Read(ref _received), Interlocked.Read(ref _receiveCalls));

    private long _receiveCalls;

    public long BadMediatorRequests => Interlocked.Read(ref _badMediatorRequests);

    /// <summary>Connects the upcalls: <paramref name="loop"/> takes events to the gateway's thread (false: queue full).</summary>
    public void Bind(INativeNetUpcalls upcalls, INativeNetLoop loop)
    {
        _upcalls = upcalls;
        _loop = loop;
        if (_options.Mediator is { } group)
        {
            _mediator = Listen(group);
            _ = Task.Run(() => MediatorLoopAsync(_mediator));
        }
    }

    public NativeChannel? AllocateChannel(SessionName session, int flow, ChannelDirection direction)
    {
        if (direction == ChannelDirection.Up)
        {
            if (!IPAddress.TryParse(session.NativeName, out var group) || !MulticastNativeNetOptions.IsMulticast(group)
                || !ushort.TryParse(session.Flows[flow], NumberStyles.None, CultureInfo.InvariantCulture, out ushort port) || port == 0)
            {
                return null; // not a native name of this medium
            }

            return new NativeChannel(session, flow, direction, $"{group}:{port}");
        }

        int k = Array.IndexOf(_used, false);
        if (k < 0)
        {
            return null;
        }

        _used[k] = true;
        var bytes = _options.PoolBase.GetAddressBytes();
        uint address = (uint)(bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]) + (uint)k;
        var g = new IPAddress([(byte)(address >> 24), (byte)(address >> 16), (byte)(address >> 8), (byte)address]);
        return new NativeChannel(session, flow, direction, $"{g}:{_options.PortBase + k}") { Handle = new ChannelState(IPEndPoint.Parse($"{g}:{_options.PortBase + k}"), k) };
    }

    public NativeChannel? AdoptChannel(SessionName session, int flow, string address)
    {
        if (!IPEndPoint.TryParse(address, out var endpoint) || endpoint.AddressFamily != System.Net.Sockets.AddressFamily.InterNetwork)
        {
            return null;
        }

        var bytes = _options.PoolBase.GetAddressBytes();
        var a = endpoint.Address.GetAddressBytes();
        long k = (long)(uint)(a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]) - (uint)(bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]);
        if (k < 0 || k >= _used.Length || _used[k] || endpoint.Port != _options.PortBase + k)
        {
            return null; // not this pool's address for that slot, or taken
        }

        _used[k] = true;
        return new NativeChannel(session, flow, ChannelDirection.Down, address) { Handle = new ChannelState(endpoint, (int)k) };
    }

    public void Subscribe(NativeChannel channel)
    {
        var state = State(channel);
        state.Socket ??= Listen(state.Group);
        var socket = state.Socket;
        _ = Task.Run(() => ReceiveLoopAsync(channel, socket));
    }

    public void Refresh(NativeChannel channel)
    {
    }

    public void Unsubscribe(NativeChannel channel)
    {
        if (channel.Handle is ChannelState { Socket: { } s } state)
        {
            state.Socket = null;
            s.Dispose();
        }
    }

    public void ReclaimChannel(NativeChannel channel)
    {
        if (channel.Handle is ChannelState { PoolIndex: >= 0 } state)
        {
            _used[state.PoolIndex] = false;
        }
    }

    /// <summary>Gathers the packet for <see cref="FlushSends"/> (the runtime calls it after each batch of events), which
    /// sends everything gathered with one <c>sendmmsg</c> per 64 datagrams.</summary>
    public bool SendData(NativeChannel channel, ReadOnlySpan<byte> data) => _sendBatch.Add(data, State(channel).Destination);

    /// <summary>Per-receiver delivery: the packet goes by unicast to the address the numbered receiver joined with.</summary>
    public bool SendToReceiver(NativeChannel channel, uint receiver, ReadOnlySpan<byte> data)
        => _receivers.TryGetValue(receiver, out var known) && _sendBatch.Add(data, known.To);

    /// <summary>Numbered receivers whose JOIN was refused because <see cref="MulticastNativeNetOptions.MaxReceivers"/>
    /// were held and none was stale.</summary>
    public long ReceiversRefused => Interlocked.Read(ref _receiversRefused);

    /// <summary>Numbered receivers held now (loop thread).</summary>
    public int ReceiverCount => _receivers.Count;

    /// <summary>Keeps (or refreshes) a numbered receiver's address; at the bound, takes the place of the one not heard from
    /// the longest if it is older than the hold. Loop thread.</summary>
    private bool Remember(uint receiver, IPEndPoint address)
    {
        long now = Environment.TickCount64;
        if (_receivers.TryGetValue(receiver, out var known))
        {
            _receivers[receiver] = (known.Address.Equals(address) ? known.To : DatagramSendBatch.To(address), address, now);
            return true;
        }

        if (_receivers.Count >= _options.MaxReceivers)
        {
            var (oldest, entry) = _receivers.MinBy(r => r.Value.LastJoin);
            if (now - entry.LastJoin < (long)_options.ReceiverHold.TotalMilliseconds)
            {
                return false;
            }

            _receivers.Remove(oldest);
        }

        _receivers[receiver] = (DatagramSendBatch.To(address), address, now);
        return true;
    }

    public void FlushSends() => _sendBatch.Flush();

    public IReadOnlyList<SrouteCost>? GetSroutes(SessionName session, IReadOnlyList<GatewayId> gateways) => null;

    private static ChannelState State(NativeChannel channel)
    {
        if (channel.Handle is not ChannelState state)
        {
            state = new ChannelState(IPEndPoint.Parse(channel.Address), -1);
            channel.Handle = state;
        }

        return state;
    }

    private Socket Listen(IPEndPoint group)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        socket.ReceiveBufferSize = 4 << 20;
        socket.Bind(new IPEndPoint(OperatingSystem.IsLinux() ? group.Address : IPAddress.Any, group.Port));
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group.Address, _options.Interface));
        return socket;
    }

    // Every datagram ready on the socket per wake-up (recvmmsg on Linux), each copied once, into the loop's inbox.
    private async Task ReceiveLoopAsync(NativeChannel channel, Socket socket)
    {
        var self = DatagramReceiveBatch.Source.Of((IPEndPoint)_send.LocalEndPoint!);
        using var batch = new DatagramReceiveBatch();
        DatagramReceiveBatch.Handler onDatagram = (from, datagram) =>
        {
            if (from == self)
            {
                return; // our own send, looped back
            }

            Interlocked.Increment(ref _received);
            if (_loop is null || !_loop.TryPostData(channel, datagram))
            {
                Interlocked.Increment(ref _dropped);
            }
        };
        while (!_stop.IsCancellationRequested)
        {
            try
            {
                long calls = batch.Calls;
                await batch.DrainAsync(socket, onDatagram, _stop.Token).ConfigureAwait(false);
                Interlocked.Add(ref _receiveCalls, batch.Calls - calls);
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException or OperationCanceledException)
            {
                return;
            }
        }
    }

    private async Task MediatorLoopAsync(Socket socket)
    {
        var buffer = new byte[2048];
        EndPoint any = new IPEndPoint(IPAddress.Any, 0);
        while (!_stop.IsCancellationRequested)
        {
            SocketReceiveFromResult result;
            try
            {
                result = await socket.ReceiveFromAsync(buffer, SocketFlags.None, any, _stop.Token).ConfigureAwait(false);
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException or OperationCanceledException)
            {
                return;
            }

            var client = (IPEndPoint)result.RemoteEndPoint;
            string text;
            try
            {
                text = new UTF8Encoding(false, true).GetString(buffer, 0, result.ReceivedBytes);
            }
            catch (DecoderFallbackException)
            {
                Interlocked.Increment(ref _badMediatorRequests);
                continue;
            }

            var parts = text.Split(' ', StringSplitOptions.RemoveEmptyEntries);
            if (parts.Length is not (2 or 5) || parts[0] is not ("JOIN" or "LEAVE"))
            {
                Interlocked.Increment(ref _badMediatorRequests);
                Reply(client, "NO_ROUTE expected 'JOIN <bfed url> [RECEIVER <n> <port>]' or 'LEAVE <bfed url>'");
                continue;
            }

            if (!SessionName.TryParse(parts[1], out var session, out string error))
            {
                Interlocked.Increment(ref _badMediatorRequests);
                Reply(client, "NO_ROUTE bad session name: " + error);
                continue;
            }

            uint receiver = 0;
            ushort port = 0;
            if (parts.Length == 5 && (parts[2] != "RECEIVER" || !uint.TryParse(parts[3], NumberStyles.None, CultureInfo.InvariantCulture, out receiver)
                || receiver == 0 || !ushort.TryParse(parts[4], NumberStyles.None, CultureInfo.InvariantCulture, out port) || port == 0))
            {
                Interlocked.Increment(ref _badMediatorRequests);
                Reply(client, "NO_ROUTE expected 'RECEIVER <n> <port>' with n and port above 0");
                continue;
            }

            if (parts[0] == "LEAVE")
            {
                _loop?.TryPost(() => _upcalls!.RecvdLeaveRequest(session));
                continue;
            }

            var address = new IPEndPoint(client.Address, port);
            _loop?.TryPost(() =>
            {
                if (receiver != 0 && !Remember(receiver, address))
                {
                    Interlocked.Increment(ref _receiversRefused);
                    Reply(client, $"NO_ROUTE too many receivers (at most {_options.MaxReceivers})");
                    return;
                }

                _upcalls!.RecvdJoinRequest(new JoinRequest(session, reply => Reply(client, Format(reply)), Receiver: receiver));
            });
        }
    }

    /// <summary>The mediator's text answer.</summary>
    public static string Format(MediatorReply reply) => reply.Kind switch
    {
        MediatorReplyKind.Translation => "TRANSLATION " + string.Join(' ', reply.Addresses),
        MediatorReplyKind.Redirect => $"REDIRECT {reply.RedirectTo.Value} {reply.TargetOwner.Value}",
        _ => "NO_ROUTE " + reply.Reason,
    };

    private void Reply(IPEndPoint client, string text)
    {
        try
        {
            _mediator?.SendTo(Encoding.UTF8.GetBytes(text), client);
        }
        catch (SocketException)
        {
        }
    }

    public void Dispose()
    {
        if (_disposed)
        {
            return; // idempotent, as .NET's guidance asks
        }

        _disposed = true;
        _stop.Cancel();
        _send.Dispose();
        _sendBatch.Dispose();
        _mediator?.Dispose();
        _stop.Dispose();
    }

    private bool _disposed;

    private sealed class ChannelState(IPEndPoint group, int poolIndex)
    {
        public IPEndPoint Group { get; } = group;

        public Destination Destination { get; } = DatagramSendBatch.To(group);

        public int PoolIndex { get; } = poolIndex;

        public Socket? Socket { get; set; }
    }
}

/// <summary>A client of a multicast island's mediator: sends <c>JOIN url</c> to the mediator group and waits for the answer.</summary>
public static class MediatorClient
{
    /// <summary>Sends JOIN (or LEAVE, which has no answer) and returns the answer's text, or null after <paramref name="timeout"/>.
    /// With <paramref name="receiver"/>, joins as numbered receiver n whose packets of a per-receiver session come by
    /// unicast to this host at the given port.</summary>
    public static async Task<string?> RequestAsync(IPEndPoint mediator, string verb, SessionName session, TimeSpan timeout, IPAddress? networkInterface = null,
        (uint Number, int Port)? receiver = null)
    {
        ArgumentNullException.ThrowIfNull(mediator);
        ArgumentNullException.ThrowIfNull(session);
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, (networkInterface ?? IPAddress.Loopback).GetAddressBytes());
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
        socket.Bind(new IPEndPoint(networkInterface ?? IPAddress.Loopback, 0));
        string text = receiver is { } r ? $"{verb} {session.Text} RECEIVER {r.Number} {r.Port}" : $"{verb} {session.Text}";
        await socket.SendToAsync(Encoding.UTF8.GetBytes(text), mediator).ConfigureAwait(false);
        if (verb != "JOIN")
        {
            return null;
        }

        var buffer = new byte[4096];
        using var cts = new CancellationTokenSource(timeout);
        try
        {
            var result = await socket.ReceiveFromAsync(buffer, SocketFlags.None, new IPEndPoint(IPAddress.Any, 0), cts.Token).ConfigureAwait(false);
            return Encoding.UTF8.GetString(buffer, 0, result.ReceivedBytes);
        }
        catch (OperationCanceledException)
        {
            return null;
        }
    }
}
