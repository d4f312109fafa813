using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;

namespace QuickSilver.Core.Io;

/// <summary>
/// A UDP endpoint owned by one core: a unicast socket (send and unicast receive) plus one receive-only socket per
/// joined multicast group, all delivering to one handler. Outgoing datagrams wait in a bounded send ring in native
/// memory; feeds write straight into ring slots. The backend decides how the ring reaches the wire
/// (sendmmsg, or Socket.SendTo) and how datagrams are received. Core thread only.
/// </summary>
public abstract unsafe class UdpEndpoint : IDatagramTransport, IDisposable
{
    private readonly byte* _slots;
    private readonly int[] _slotLength;
    private readonly NetAddress[] _slotDestination;
    private readonly FeedSet<IDatagramFeed> _feeds = new();
    private readonly Dictionary<NetAddress, Socket> _groups = new();
    private readonly Random? _lossRandom;
    private IDatagramHandler? _handler;
    private int _head;
    private int _count;
    private bool _claimed;
    private bool _pulling;
    private bool _closed;

    private protected UdpEndpoint(QuickSilverCore core, UdpEndpointOptions options)
    {
        Core = core;
        Options = options;
        Counters = core.Counters;
        MainSocket = CreateSocket(options);
        try
        {
            MainSocket.Bind(options.Bind.ToIPEndPoint());
            MainSocket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface,
                options.MulticastInterface.ToIPAddress().GetAddressBytes());
            MainSocket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastTimeToLive, options.MulticastTtl);
            MainSocket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, options.MulticastLoopback);
            LocalAddress = NetAddress.FromIPEndPoint((IPEndPoint)MainSocket.LocalEndPoint!);
        }
        catch
        {
            MainSocket.Dispose();
            throw;
        }

        Capacity = options.SendQueueCapacity;
        SlotSize = options.MaxDatagramSize;
        _slots = (byte*)NativeMemory.AlignedAlloc((nuint)((long)Capacity * SlotSize), 64);
        _slotLength = new int[Capacity];
        _slotDestination = new NetAddress[Capacity];
        _feeds.BecameActive += () => core.MarkDirty(this);
        if (options.InjectedLossRate > 0)
        {
            _lossRandom = new Random(options.InjectedLossSeed);
        }
    }

    public NetAddress LocalAddress { get; }

    /// <summary>Group sockets that drop, in the kernel, the datagrams this endpoint multicast itself
    /// (<see cref="UdpEndpointOptions.ReceiveOwnMulticast"/> off, on Linux).</summary>
    public int OwnMulticastFiltered { get; private set; }

    public int MaxDatagramSize => Options.MaxDatagramSize;

    public UdpEndpointOptions Options { get; }

    /// <summary>Datagrams waiting in the send ring.</summary>
    public int PendingSends => _count;

    internal QuickSilverCore Core { get; }

    internal CoreCounters Counters { get; }

    internal Socket MainSocket { get; }

    /// <summary>On Linux, the kernel's drop count of this endpoint's sockets (<c>SO_MEMINFO</c>'s <c>SK_MEMINFO_DROPS</c>:
    /// datagrams dropped for a full receive buffer); −1 elsewhere. One getsockopt per socket: read it at a status
    /// interval, not per datagram.</summary>
    public long ReceiveOverflows
    {
        get
        {
            if (!OperatingSystem.IsLinux())
            {
                return -1;
            }

            long drops = SocketDrops(MainSocket);
            foreach (var socket in _groups.Values)
            {
                drops += Math.Max(0, SocketDrops(socket));
            }

            return drops;
        }
    }

    private static long SocketDrops(Socket socket)
    {
        const int SolSocket = 1, SoMemInfo = 55, SkMemInfoDrops = 8;
        Span<uint> info = stackalloc uint[SkMemInfoDrops + 1];
        try
        {
            int length = socket.GetRawSocketOption(SolSocket, SoMemInfo, System.Runtime.InteropServices.MemoryMarshal.AsBytes(info));
            return length >= (SkMemInfoDrops + 1) * sizeof(uint) ? info[SkMemInfoDrops] : 0;
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException or PlatformNotSupportedException)
        {
            return 0;
        }
    }

    internal bool InDirtyList { get; set; }

    internal bool IsClosed => _closed;

    private protected int Capacity { get; }

    private protected int SlotSize { get; }

    private protected int Head => _head;

    private protected int Count => _count;

    public void SetHandler(IDatagramHandler handler)
    {
        ArgumentNullException.ThrowIfNull(handler);
        Core.ThrowIfNotCoreThread();
        _handler = handler;
    }

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > SlotSize)
        {
            throw new ArgumentException(
                $"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({SlotSize}).", nameof(datagram));
        }

        if (!TryClaim(out var slot))
        {
            return false;
        }

        datagram.CopyTo(slot);
        Commit(to, datagram.Length);
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        Core.ThrowIfNotCoreThread();
        ObjectDisposedException.ThrowIf(_closed, this);
        if (_claimed)
        {
            throw new InvalidOperationException("A send slot is claimed already; Commit it first.");
        }

        if (_pulling)
        {
            // The feed being pulled is writing into the next slot: a send from inside it would take the same slot.
            throw new InvalidOperationException("A datagram feed must not send on its own transport while it is pulled; return the datagram from Pull instead.");
        }

        if (_count == Capacity)
        {
            FlushRing(); // make room now if the socket takes it
            if (_count == Capacity)
            {
                Counters.Drops.Increment(DropReason.SendQueueFull);
                slot = default;
                return false;
            }
        }

        _claimed = true;
        slot = Slot((_head + _count) % Capacity);
        return true;
    }

    public Span<byte> ClaimedSlot => _claimed
        ? Slot((_head + _count) % Capacity)
        : throw new InvalidOperationException("No send slot is claimed (TryClaim).");

    public void Commit(NetAddress to, int length)
    {
        if (!_claimed)
        {
            throw new InvalidOperationException("Commit without a claimed send slot (TryClaim).");
        }

        ArgumentOutOfRangeException.ThrowIfNegative(length);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(length, SlotSize);
        _claimed = false;
        int slot = (_head + _count) % Capacity;
        _slotLength[slot] = length;
        _slotDestination[slot] = to;
        _count++;
        Core.MarkDirty(this);
    }

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        Core.ThrowIfNotCoreThread();
        ObjectDisposedException.ThrowIf(_closed, this);
        return _feeds.Register(feed);
    }

    public void JoinGroup(NetAddress group)
    {
        Core.ThrowIfNotCoreThread();
        ObjectDisposedException.ThrowIf(_closed, this);
        if (!group.IsMulticast)
        {
            throw new ArgumentException($"{group} is not an IPv4 multicast address (224.0.0.0/4).", nameof(group));
        }

        if (_groups.ContainsKey(group))
        {
            return;
        }

        // GroupAddress: bound to the group address itself, so this socket receives only that group's datagrams.
        // Wildcard (Windows refuses to bind a multicast address): bound to 0.0.0.0 and the group's port, so the socket
        // also sees other traffic to that port; the backend drops what is not addressed to the group. Either way
        // several processes on one host share the port through SO_REUSEADDR.
        bool wildcard = Options.EffectiveGroupBind == GroupBindStrategy.Wildcard;
        if (wildcard && !SupportsGroupFilter)
        {
            throw new NotSupportedException(
                $"Joining {group}: group sockets here bind to the wildcard address (UdpEndpointOptions.GroupBind = Wildcard, the only way Windows allows), which needs CoreOptions.Backend = Completion (or Auto).");
        }

        var socket = CreateSocket(Options);
        try
        {
            socket.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
            socket.Bind(wildcard ? new IPEndPoint(IPAddress.Any, group.Port) : group.ToIPEndPoint());
            socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership,
                new MulticastOption(group.ToIPAddress(), Options.MulticastInterface.ToIPAddress()));
            if (wildcard)
            {
                socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.PacketInformation, true);
            }

            if (!Options.ReceiveOwnMulticast && OperatingSystem.IsLinux())
            {
                // What this endpoint multicasts leaves from its main socket, from the multicast interface's address
                // when that socket is bound to the wildcard one.
                var source = LocalAddress.Ip != 0 ? LocalAddress : new NetAddress(Options.MulticastInterface.Ip, LocalAddress.Port);
                if (Linux.OwnDatagramFilter.TryAttach(socket, source))
                {
                    OwnMulticastFiltered++;
                }
            }

            OnSocketOpened(socket, wildcard ? group : null);
        }
        catch
        {
            socket.Dispose();
            throw;
        }

        _groups.Add(group, socket);
    }

    public void LeaveGroup(NetAddress group)
    {
        Core.ThrowIfNotCoreThread();
        if (_groups.Remove(group, out var socket))
        {
            OnSocketClosing(socket);
            socket.Dispose();
        }
    }

    /// <summary>Sends what the ring holds and what active feeds give, within a budget so one busy endpoint cannot starve
    /// the core. Returns true when there is more to do right away (budget used up), false when idle or blocked.</summary>
    internal bool Flush()
    {
        if (_closed)
        {
            return false;
        }

        int budget = Math.Max(1024, Capacity * 4);
        while (budget > 0)
        {
            budget -= FillFromFeeds();
            if (_count == 0)
            {
                return false;
            }

            int before = _count;
            if (!FlushRing())
            {
                return false; // the socket is full; the backend re-marks us dirty when it drains
            }

            if (_count == before)
            {
                return false;
            }
        }

        return true;
    }

    private int FillFromFeeds()
    {
        int pulled = 0;
        while (_count < Capacity && _feeds.TryNext(out var channel, out var feed))
        {
            int slot = (_head + _count) % Capacity;
            int length;
            NetAddress to;
            _pulling = true;
            try
            {
                length = feed.Pull(Slot(slot), out to);
            }
            finally
            {
                _pulling = false;
            }

            if (length <= 0)
            {
                _feeds.Deactivate(channel);
                continue;
            }

            _slotLength[slot] = Math.Min(length, SlotSize);
            _slotDestination[slot] = to;
            _count++;
            pulled++;
        }

        return pulled;
    }

    /// <summary>Hands queued datagrams to the socket. Returns false when the socket would block.</summary>
    private protected abstract bool FlushRing();

    /// <summary>Called for every socket of this endpoint (main and group sockets) once it is ready to receive.
    /// <paramref name="filterGroup"/> is set for a wildcard-bound group socket: deliver only datagrams addressed to it.</summary>
    private protected abstract void OnSocketOpened(Socket socket, NetAddress? filterGroup);

    /// <summary>Whether this backend can drop datagrams by destination address (needed by <see cref="GroupBindStrategy.Wildcard"/>).</summary>
    private protected virtual bool SupportsGroupFilter => false;

    /// <summary>Called before a socket of this endpoint is closed.</summary>
    private protected abstract void OnSocketClosing(Socket socket);

    /// <summary>Completes registration of the main socket; called by the backend right after construction.</summary>
    internal void Start() => OnSocketOpened(MainSocket, null);

    private protected Span<byte> Slot(int index) => new(_slots + ((long)index * SlotSize), SlotSize);

    private protected byte* SlotPointer(int index) => _slots + ((long)index * SlotSize);

    private protected int SlotLength(int index) => _slotLength[index];

    private protected NetAddress SlotDestination(int index) => _slotDestination[index];

    /// <summary>Removes <paramref name="sent"/> datagrams from the head of the ring after the socket took them.</summary>
    private protected void Consume(int sent, long bytes)
    {
        _head = (_head + sent) % Capacity;
        _count -= sent;
        Counters.PacketsOut += sent;
        Counters.BytesOut += bytes;
    }

    /// <summary>Drops the head datagram after a send error the socket reported for it (not "would block").</summary>
    private protected void DropHead()
    {
        _head = (_head + 1) % Capacity;
        _count--;
        Counters.SendErrors++;
    }

    /// <summary>Hands one received datagram to the handler. The span is valid only during the call.</summary>
    private protected void Deliver(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        Counters.PacketsIn++;
        Counters.BytesIn += datagram.Length;
        if (_lossRandom is not null && _lossRandom.NextDouble() < Options.InjectedLossRate)
        {
            Counters.Drops.Increment(DropReason.InjectedLoss);
            return;
        }

        if (_handler is null)
        {
            Counters.Drops.Increment(DropReason.NoHandler);
            return;
        }

        _handler.OnDatagram(from, datagram);
    }

    /// <summary>Counts a received datagram larger than <see cref="MaxDatagramSize"/>.</summary>
    private protected void DropOversized() => Counters.Drops.Increment(DropReason.Oversized);

    private static Socket CreateSocket(UdpEndpointOptions options)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        try
        {
            socket.ReceiveBufferSize = options.SocketReceiveBufferBytes;
            socket.SendBufferSize = options.SocketSendBufferBytes;
            if (OperatingSystem.IsWindows())
            {
                // Windows reports an ICMP "port unreachable" for an earlier send as a failed receive; a datagram
                // endpoint talking to many peers must not see that (SIO_UDP_CONNRESET off).
                const int SioUdpConnReset = unchecked((int)0x9800000C);
                socket.IOControl(SioUdpConnReset, [0, 0, 0, 0], null);
            }
        }
        catch
        {
            socket.Dispose();
            throw;
        }

        return socket;
    }

    /// <summary>Closes the endpoint: sends what the socket still takes, reports what it could not, releases sockets and memory.</summary>
    public void Dispose()
    {
        if (_closed)
        {
            return;
        }

        Core.ThrowIfNotCoreThread();
        FlushRing();
        if (_count > 0)
        {
            CoreLog.ClosedWithUnsent(Core.Log, LocalAddress, _count);
        }

        _closed = true;
        foreach (var socket in _groups.Values)
        {
            OnSocketClosing(socket);
            socket.Dispose();
        }

        _groups.Clear();
        OnSocketClosing(MainSocket);
        MainSocket.Dispose();
        NativeMemory.AlignedFree(_slots);
        Core.Forget(this);
        GC.SuppressFinalize(this);
    }
}
