using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Text;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Plugins;

/// <summary>
/// The NativeNet plug-in for an island without multicast: the gateway runs a TCP fan-out hub and the island's members
/// connect to it. The hub is the island's broadcast medium (a message published on an address goes to every member
/// subscribed to it) and its mediator (JOIN and LEAVE travel on the same connection). Frames are the shared
/// <see cref="FramedConnection"/> framing (u32 length + body); a body is
/// <code>[u8 op][u16 address length][address UTF-8][rest]</code>
/// with op 1 SUB, 2 UNSUB, 3 PUB (rest = payload; also hub → member data), 4 JOIN and 5 LEAVE (address = the bfed://
/// name), 6 REPLY (hub → member; address = the mediator's text answer: TRANSLATION addr…, NO_ROUTE …, REDIRECT …).
/// Addresses: Up channels are <c>native-name/flow</c>; Down channels <c>fanout/k</c> from a pool. A member sending a
/// malformed body, too many subscriptions or too many frames for its queue is disconnected and counted.
/// All hub state lives on the gateway's thread: the connection readers post every frame there. Sending allocates
/// nothing per packet: a PUB's header (<c>op | length | address</c>) is encoded once per address and each member's
/// connection gathers it and the payload straight into its send queue, whose write loop then hands everything queued
/// since its last write to the socket in one write per 64 KiB (<see cref="FramedConnection"/>): the packets of a loop
/// turn leave in a few system calls per member, not one each.
/// </summary>
public sealed class TcpFanoutNativeNet : IHostedNativeNet, IReceiverNativeNet, IAsyncDisposable
{
    public const byte Sub = 1, Unsub = 2, Pub = 3, Join = 4, Leave = 5, Reply = 6;

    public const int MaxMembers = 256;

    public const int MaxSubscriptionsPerMember = 64;

    private readonly Socket _listener;
    private readonly CancellationTokenSource _stop = new();
    private readonly bool[] _pool;
    private readonly Dictionary<string, HashSet<Member>> _subscribers = new(StringComparer.Ordinal); // gateway thread
    private readonly Dictionary<string, byte[]> _pubHeads = new(StringComparer.Ordinal); // gateway thread; bounded below
    private readonly Dictionary<string, NativeChannel> _gatewaySubscriptions = new(StringComparer.Ordinal); // gateway thread
    private INativeNetUpcalls? _upcalls;
    private INativeNetLoop? _loop;
    private readonly Dictionary<uint, Member> _byReceiver = []; // gateway thread
    private int _members;
    private int _nextReceiver;
    private long _badFrames;

    public TcpFanoutNativeNet(IPEndPoint listen, int poolSize = 64)
    {
        ArgumentNullException.ThrowIfNull(listen);
        ArgumentOutOfRangeException.ThrowIfLessThan(poolSize, 1);
        _pool = new bool[poolSize];
        _listener = new Socket(listen.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        _listener.Bind(listen);
        _listener.Listen(64);
        Endpoint = (IPEndPoint)_listener.LocalEndPoint!;
    }

    public IPEndPoint Endpoint { get; }

    public long BadFrames => Interlocked.Read(ref _badFrames);

    public int Members => Volatile.Read(ref _members);

    /// <summary>Connects the upcalls and starts accepting members; <paramref name="loop"/> runs actions on the gateway's thread.</summary>
    public void Bind(INativeNetUpcalls upcalls, INativeNetLoop loop)
    {
        _upcalls = upcalls;
        _loop = loop;
        _ = Task.Run(AcceptLoopAsync);
    }

    public NativeChannel? AllocateChannel(SessionName session, int flow, ChannelDirection direction)
    {
        if (direction == ChannelDirection.Up)
        {
            return new NativeChannel(session, flow, direction, $"{session.NativeName}/{session.Flows[flow]}");
        }

        int k = Array.IndexOf(_pool, false);
        if (k < 0)
        {
            return null;
        }

        _pool[k] = true;
        return new NativeChannel(session, flow, direction, $"fanout/{k}") { Handle = k };
    }

    public void Subscribe(NativeChannel channel) => _gatewaySubscriptions[channel.Address] = channel;

    public void Refresh(NativeChannel channel)
    {
    }

    public void Unsubscribe(NativeChannel channel) => _gatewaySubscriptions.Remove(channel.Address);

    public void ReclaimChannel(NativeChannel channel)
    {
        if (channel.Handle is int k)
        {
            _pool[k] = false;
        }
    }

    public bool SendData(NativeChannel channel, ReadOnlySpan<byte> data)
    {
        Fan(channel.Address, data, except: null);
        return true;
    }

    /// <summary>Per-receiver delivery (<c>delivery=unicast|corecast</c>): a member's receiver number is its connection's
    /// number at this hub (it sends JOIN on that connection); the packet goes to that member alone, as a PUB on the
    /// channel's address.</summary>
    public bool SendToReceiver(NativeChannel channel, uint receiver, ReadOnlySpan<byte> data)
    {
        if (!_byReceiver.TryGetValue(receiver, out var member))
        {
            return false;
        }

        if (!member.Connection.TrySend(PubHead(channel.Address), data, dropWhenFull: true))
        {
            member.Dropped++;
            return false;
        }

        member.Sent++;
        return true;
    }

    public IReadOnlyList<SrouteCost>? GetSroutes(SessionName session, IReadOnlyList<GatewayId> gateways) => null;

    /// <summary>Encodes a member frame body (for clients of the hub).</summary>
    public static byte[] Encode(byte op, string address, ReadOnlySpan<byte> rest = default)
    {
        int n = Encoding.UTF8.GetByteCount(address);
        var body = new byte[3 + n + rest.Length];
        body[0] = op;
        BinaryPrimitives.WriteUInt16LittleEndian(body.AsSpan(1), checked((ushort)n));
        Encoding.UTF8.GetBytes(address, body.AsSpan(3));
        rest.CopyTo(body.AsSpan(3 + n));
        return body;
    }

    /// <summary>Decodes a frame body; false when malformed.</summary>
    public static bool TryDecode(byte[] body, out byte op, out string address, out ReadOnlyMemory<byte> rest)
    {
        op = 0;
        address = "";
        rest = default;
        if (body.Length < 3 || body[0] is < Sub or > Reply)
        {
            return false;
        }

        int n = BinaryPrimitives.ReadUInt16LittleEndian(body.AsSpan(1));
        if (n == 0 || 3 + n > body.Length || n > 2048)
        {
            return false;
        }

        try
        {
            address = new UTF8Encoding(false, true).GetString(body, 3, n);
        }
        catch (DecoderFallbackException)
        {
            return false;
        }

        op = body[0];
        rest = body.AsMemory(3 + n);
        return op == Pub || rest.Length == 0;
    }

    private void Fan(string address, ReadOnlySpan<byte> data, Member? except)
    {
        if (!_subscribers.TryGetValue(address, out var members) || members.Count == 0)
        {
            return;
        }

        var head = PubHead(address);
        foreach (var m in members)
        {
            if (m == except)
            {
                continue;
            }

            if (m.Connection.TrySend(head, data, dropWhenFull: true))
            {
                m.Sent++;
            }
            else
            {
                m.Dropped++;
            }
        }
    }

    /// <summary>Packets queued to the connected members, dropped at their full queues, and the socket writes their
    /// connections made: packets / writes is the batching. The gateway's thread.</summary>
    public (long Sent, long Dropped, long Writes) MemberSends()
    {
        long sent = 0, dropped = 0, writes = 0;
        foreach (var member in _byReceiver.Values)
        {
            sent += member.Sent;
            dropped += member.Dropped;
            writes += member.Connection.Writes;
        }

        return (sent, dropped, writes);
    }

    /// <summary>Addresses whose PUB header is kept: the pool's Down channels and the Up channels in use fit many
    /// times; past it the cache starts again (a header is 3 bytes and the address).</summary>
    public const int MaxPubHeads = 4096;

    // The header of a PUB on address (everything but the payload), encoded once. Gateway thread.
    private byte[] PubHead(string address)
    {
        if (!_pubHeads.TryGetValue(address, out var head))
        {
            if (_pubHeads.Count >= MaxPubHeads)
            {
                _pubHeads.Clear();
            }

            _pubHeads[address] = head = Encode(Pub, address);
        }

        return head;
    }

    private Task AcceptLoopAsync() => TcpAcceptor.RunAsync(_listener, socket =>
    {
        if (Interlocked.Increment(ref _members) > MaxMembers)
        {
            Interlocked.Decrement(ref _members);
            socket.Dispose();
            return;
        }

        _ = Task.Run(() => ServeAsync(socket));
    }, _stop.Token);

    private async Task ServeAsync(Socket socket)
    {
        var member = new Member(new FramedConnection(socket, PeerCodec.MaxFrameBytes), (uint)Interlocked.Increment(ref _nextReceiver));
        _loop?.TryPost(() => _byReceiver[member.Receiver] = member);
        await using (member.Connection.ConfigureAwait(false))
        {
            await member.Connection.RunAsync(body =>
            {
                if (!TryDecode(body, out byte op, out string address, out var rest) || op == Reply)
                {
                    Interlocked.Increment(ref _badFrames);
                    member.Connection.Close();
                    return;
                }

                _loop?.TryPost(() => OnMemberFrame(member, op, address, rest));
            }, _stop.Token).ConfigureAwait(false);
            _loop?.TryPost(() =>
            {
                foreach (var address in member.Subscriptions)
                {
                    _subscribers[address].Remove(member);
                }

                member.Subscriptions.Clear();
                _byReceiver.Remove(member.Receiver);
            });
            Interlocked.Decrement(ref _members);
        }
    }

    // On the gateway's thread.
    private void OnMemberFrame(Member member, byte op, string address, ReadOnlyMemory<byte> rest)
    {
        switch (op)
        {
            case Sub:
                if (member.Subscriptions.Count >= MaxSubscriptionsPerMember)
                {
                    Interlocked.Increment(ref _badFrames);
                    member.Connection.Close();
                    return;
                }

                if (member.Subscriptions.Add(address))
                {
                    if (!_subscribers.TryGetValue(address, out var set))
                    {
                        _subscribers[address] = set = [];
                    }

                    set.Add(member);
                }

                break;
            case Unsub:
                if (member.Subscriptions.Remove(address))
                {
                    _subscribers[address].Remove(member);
                }

                break;
            case Pub:
                Fan(address, rest.Span, except: member);
                if (_gatewaySubscriptions.TryGetValue(address, out var channel))
                {
                    _upcalls!.RecvdData(channel, rest.Span);
                }

                break;
            case Join or Leave:
                if (!SessionName.TryParse(address, out var session, out string error))
                {
                    member.Connection.TrySend(Encode(Reply, "NO_ROUTE bad session name: " + error));
                    return;
                }

                if (op == Leave)
                {
                    _upcalls!.RecvdLeaveRequest(session);
                }
                else
                {
                    _upcalls!.RecvdJoinRequest(new JoinRequest(session, r => member.Connection.TrySend(Encode(Reply, MulticastNativeNet.Format(r))), Receiver: member.Receiver));
                }

                break;
        }
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync().ConfigureAwait(false);
        _listener.Dispose();
        _stop.Dispose();
    }

    private sealed class Member(FramedConnection connection, uint receiver)
    {
        public FramedConnection Connection { get; } = connection;

        public uint Receiver { get; } = receiver;

        public HashSet<string> Subscriptions { get; } = new(StringComparer.Ordinal);

        public long Dropped { get; set; }

        public long Sent { get; set; }
    }
}
