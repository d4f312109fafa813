using QuickSilver.Core.Alarms;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Aer.Simulation;

/// <summary>One link of a <see cref="TreeNetwork"/> (each direction is served separately): propagation latency, random
/// loss per datagram, a serialization rate and a drop-tail queue in datagrams.</summary>
public sealed record TreeLink
{
    public TimeSpan Latency { get; init; } = TimeSpan.FromMilliseconds(1);
    public double LossRate { get; init; }
    public long BandwidthBitsPerSecond { get; init; } = 1_000_000_000;
    public int QueueLimitPackets { get; init; } = 1000;

    /// <summary>Whether this link's bytes count in <see cref="TreeNetwork.LinkBytes"/> (off for a link that stands for
    /// the inside of a router, e.g. a repair server co-located with the router, as in the seed).</summary>
    public bool CountBytes { get; init; } = true;
}

/// <summary>
/// A wide-area tree on the simulated network's virtual time, for AER (docs/aer.md "Simulation"): routers form a tree
/// (router 0 is the root), hosts hang off routers, and every link has its own latency, loss, bandwidth and queue. A
/// datagram follows the tree path from its sender up to the lowest common router and down to each receiver; a
/// multicast crosses each link once, so a loss on a link is a loss for the whole subtree below it (correlated loss, as
/// in the seed's topologies), and a queue on a shared link is shared. Hosts are <see cref="SimNode"/>s (their clock,
/// random source, crash and restart); their endpoints are <see cref="TreeTransport"/>s, which carry datagrams through
/// the tree instead of the simulated switch. Single-threaded, like <see cref="SimNetwork"/>.
/// </summary>
public sealed class TreeNetwork
{
    private readonly List<Vertex> _vertices = new();
    private readonly Dictionary<NetAddress, TreeTransport> _hosts = new();
    private readonly Dictionary<NetAddress, List<TreeTransport>> _groups = new();
    private readonly Dictionary<int, (bool Lost, TimeSpan Exit)> _memo = new();
    private readonly Stack<Alarm> _pool = new();
    private readonly Action<Alarm> _onArrival;

    public TreeNetwork(SimNetwork network, int seed)
    {
        Network = network ?? throw new ArgumentNullException(nameof(network));
        Random = new Random(seed);
        _onArrival = OnArrival;
        _vertices.Add(new Vertex(-1, new TreeLink(), 0)); // router 0, the root
    }

    public SimNetwork Network { get; }

    internal Random Random { get; }

    /// <summary>Datagrams lost on tree links.</summary>
    public long Lost { get; private set; }

    /// <summary>Datagrams dropped by a full link queue.</summary>
    public long QueueDrops { get; private set; }

    public long Delivered { get; private set; }

    /// <summary>Bytes carried over all links, summed per link crossed (the seed's "network bandwidth usage", §5).</summary>
    public long LinkBytes { get; private set; }

    /// <summary>Datagrams that reached each host address (by packet type byte), for counting NAKs at the source.</summary>
    public Dictionary<(NetAddress To, byte Type), long> Arrivals { get; } = new();

    /// <summary>Sees every datagram delivered (time, from, to, bytes), when set: debugging a run.</summary>
    public Action<TimeSpan, NetAddress, NetAddress, ReadOnlyMemory<byte>>? Trace { get; set; }

    /// <summary>Adds a router below <paramref name="parent"/> joined to it by <paramref name="link"/>; returns its id.</summary>
    public int AddRouter(int parent, TreeLink link)
    {
        CheckVertex(parent);
        _vertices.Add(new Vertex(parent, link, _vertices[parent].Depth + 1));
        return _vertices.Count - 1;
    }

    /// <summary>Opens an endpoint on <paramref name="node"/> (a host attached to <paramref name="router"/> by
    /// <paramref name="access"/>) at <paramref name="port"/>.</summary>
    public TreeTransport Attach(SimNode node, int router, TreeLink access, ushort port = 7000, int maxDatagramSize = 1472)
    {
        ArgumentNullException.ThrowIfNull(node);
        CheckVertex(router);
        var address = new NetAddress(node.Address.Ip, port);
        if (_hosts.TryGetValue(address, out var existing) && !existing.IsClosed)
        {
            throw new InvalidOperationException($"{address} is already attached.");
        }

        _vertices.Add(new Vertex(router, access, _vertices[router].Depth + 1));
        var transport = new TreeTransport(this, node, address, _vertices.Count - 1, maxDatagramSize);
        _hosts[address] = transport;
        return transport;
    }

    private void CheckVertex(int id)
    {
        if (id < 0 || id >= _vertices.Count)
        {
            throw new ArgumentOutOfRangeException(nameof(id), id, $"No router or host {id} in this tree.");
        }
    }

    internal void JoinGroup(NetAddress group, TreeTransport member)
    {
        if (!_groups.TryGetValue(group, out var members))
        {
            _groups[group] = members = new List<TreeTransport>();
        }

        if (!members.Contains(member))
        {
            members.Add(member);
        }
    }

    internal void LeaveGroup(NetAddress group, TreeTransport member)
    {
        if (_groups.TryGetValue(group, out var members))
        {
            members.Remove(member);
        }
    }

    /// <summary>When the sender's access link is free again (the pump paces pulls by it).</summary>
    internal TimeSpan UplinkFreeAt(TreeTransport from) => _vertices[from.Vertex].Up.BusyUntil;

    internal void Send(TreeTransport from, NetAddress to, ReadOnlySpan<byte> datagram)
    {
        _memo.Clear();
        if (to.IsMulticast)
        {
            if (_groups.TryGetValue(to, out var members))
            {
                foreach (var member in members)
                {
                    if (member != from && !member.IsClosed)
                    {
                        Route(from, member, datagram);
                    }
                }
            }
        }
        else if (_hosts.TryGetValue(to, out var target) && !target.IsClosed)
        {
            Route(from, target, datagram);
        }
    }

    /// <summary>Walks the tree path, each link once per transmission (memoized), and schedules the arrival.</summary>
    private void Route(TreeTransport from, TreeTransport to, ReadOnlySpan<byte> datagram)
    {
        int a = from.Vertex;
        int b = to.Vertex;
        // Up from a to the lowest common ancestor, then down to b: collect b's side first.
        Span<int> down = stackalloc int[64];
        int downCount = 0;
        int x = a;
        int y = b;
        while (_vertices[x].Depth > _vertices[y].Depth)
        {
            x = _vertices[x].Parent;
        }

        while (_vertices[y].Depth > _vertices[x].Depth)
        {
            down[downCount++] = y;
            y = _vertices[y].Parent;
        }

        while (x != y)
        {
            x = _vertices[x].Parent;
            down[downCount++] = y;
            y = _vertices[y].Parent;
        }

        int lca = x;
        var now = Network.Now;
        var t = now;
        for (int v = a; v != lca; v = _vertices[v].Parent)
        {
            if (!Cross(v * 2, _vertices[v].Up, _vertices[v].Link, datagram.Length, ref t))
            {
                return;
            }
        }

        for (int i = downCount - 1; i >= 0; i--)
        {
            int v = down[i];
            if (!Cross(v * 2 + 1, _vertices[v].Down, _vertices[v].Link, datagram.Length, ref t))
            {
                return;
            }
        }

        var alarm = _pool.Count > 0 ? _pool.Pop() : new Alarm(_onArrival, new InFlight());
        var flight = (InFlight)alarm.State!;
        if (flight.Buffer.Length < datagram.Length)
        {
            flight.Buffer = new byte[datagram.Length];
        }

        datagram.CopyTo(flight.Buffer);
        flight.Length = datagram.Length;
        flight.From = from.LocalAddress;
        flight.To = to;
        flight.Incarnation = to.Node.Incarnation;
        to.Node.Schedule(alarm, t);
    }

    private bool Cross(int key, Direction direction, TreeLink link, int bytes, ref TimeSpan t)
    {
        if (_memo.TryGetValue(key, out var seen))
        {
            t = seen.Exit;
            return !seen.Lost;
        }

        bool lost = false;
        // A datagram is routed end to end when it is sent, so a link sees reservations out of arrival order (a multicast
        // still 40 ms up the tree has booked the access link already). One that arrives before the latest booked arrival
        // does not queue behind it: it is serialized at once (an approximation, documented in docs/aer.md).
        bool inOrder = t >= direction.LastArrival;
        var start = inOrder && direction.BusyUntil > t ? direction.BusyUntil : t;
        while (direction.Finishes.Count > 0 && direction.Finishes.Peek() <= t)
        {
            direction.Finishes.Dequeue();
        }

        if (direction.Finishes.Count >= link.QueueLimitPackets)
        {
            QueueDrops++;
            lost = true;
        }
        else
        {
            var done = start + TimeSpan.FromTicks(Math.Max(1, (long)bytes * 8 * TimeSpan.TicksPerSecond / link.BandwidthBitsPerSecond));
            if (inOrder)
            {
                direction.BusyUntil = done;
                direction.LastArrival = t;
                direction.Finishes.Enqueue(done);
            }

            t = done + link.Latency;
            if (link.CountBytes)
            {
                LinkBytes += bytes;
            }

            if (link.LossRate > 0 && Random.NextDouble() < link.LossRate)
            {
                Lost++;
                lost = true;
            }
        }

        _memo[key] = (lost, t);
        return !lost;
    }

    private void OnArrival(Alarm alarm)
    {
        var flight = (InFlight)alarm.State!;
        var to = flight.To!;
        flight.To = null;
        _pool.Push(alarm);
        if (to.IsClosed || to.Node.Incarnation != flight.Incarnation)
        {
            return;
        }

        Delivered++;
        if (flight.Length > 3)
        {
            var key = (to.LocalAddress, flight.Buffer[3]);
            Arrivals[key] = Arrivals.GetValueOrDefault(key) + 1;
        }

        Trace?.Invoke(Network.Now, flight.From, to.LocalAddress, flight.Buffer.AsMemory(0, flight.Length));
        to.Deliver(flight.From, flight.Buffer.AsSpan(0, flight.Length));
    }

    private sealed class Vertex(int parent, TreeLink link, int depth)
    {
        public int Parent { get; } = parent;
        public TreeLink Link { get; } = link;
        public int Depth { get; } = depth;
        public Direction Up { get; } = new();
        public Direction Down { get; } = new();
    }

    private sealed class Direction
    {
        public TimeSpan BusyUntil;
        public TimeSpan LastArrival;
        public Queue<TimeSpan> Finishes { get; } = new();
    }

    private sealed class InFlight
    {
        public byte[] Buffer = new byte[2048];
        public int Length;
        public NetAddress From;
        public TreeTransport? To;
        public int Incarnation;
    }
}

/// <summary>
/// A host's endpoint in a <see cref="TreeNetwork"/>: the <see cref="IDatagramTransport"/> an AER stack runs on. Sends
/// go through the tree; pull feeds are served round robin, paced by the host's access link; it is closed when its node
/// crashes (or restarts: the test attaches a new one).
/// </summary>
public sealed class TreeTransport : IDatagramTransport
{
    private readonly TreeNetwork _tree;
    private readonly byte[] _slot;
    private readonly List<Channel> _feeds = new();
    private readonly HashSet<NetAddress> _groups = new();
    private readonly Alarm _pump;
    private readonly int _incarnation;
    private IDatagramHandler? _handler;
    private int _cursor;

    internal TreeTransport(TreeNetwork tree, SimNode node, NetAddress address, int vertex, int maxDatagramSize)
    {
        _tree = tree;
        Node = node;
        LocalAddress = address;
        Vertex = vertex;
        MaxDatagramSize = maxDatagramSize;
        _slot = new byte[maxDatagramSize];
        _incarnation = node.Incarnation;
        _pump = new Alarm(_ => Pump());
    }

    public SimNode Node { get; }

    internal int Vertex { get; }

    public NetAddress LocalAddress { get; }

    public int MaxDatagramSize { get; }

    public bool IsClosed => !Node.IsUp || Node.Incarnation != _incarnation;

    public Span<byte> ClaimedSlot => _slot;

    public void SetHandler(IDatagramHandler handler) => _handler = handler ?? throw new ArgumentNullException(nameof(handler));

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (IsClosed)
        {
            return false;
        }

        if (datagram.Length > MaxDatagramSize)
        {
            throw new ArgumentException($"Datagram of {datagram.Length} bytes exceeds MaxDatagramSize ({MaxDatagramSize}).", nameof(datagram));
        }

        _tree.Send(this, to, datagram);
        return true;
    }

    public bool TryClaim(out Span<byte> slot)
    {
        slot = _slot;
        return !IsClosed;
    }

    public void Commit(NetAddress to, int length) => _tree.Send(this, to, _slot.AsSpan(0, length));

    public IFeedChannel RegisterFeed(IDatagramFeed feed)
    {
        var channel = new Channel(this, feed);
        _feeds.Add(channel);
        channel.Signal();
        return channel;
    }

    public void JoinGroup(NetAddress group)
    {
        if (!group.IsMulticast)
        {
            throw new ArgumentException($"{group} is not an IPv4 multicast address (224.0.0.0/4).", nameof(group));
        }

        if (_groups.Add(group))
        {
            _tree.JoinGroup(group, this);
        }
    }

    public void LeaveGroup(NetAddress group)
    {
        if (_groups.Remove(group))
        {
            _tree.LeaveGroup(group, this);
        }
    }

    internal void Deliver(NetAddress from, ReadOnlySpan<byte> datagram) => _handler?.OnDatagram(from, datagram);

    private void WantPump()
    {
        if (!_pump.IsScheduled && !IsClosed)
        {
            Node.Schedule(_pump, Node.Now);
        }
    }

    /// <summary>Pulls the active feeds round robin while the access link has less than two datagrams queued.</summary>
    private void Pump()
    {
        if (IsClosed)
        {
            return;
        }

        while (true)
        {
            var free = _tree.UplinkFreeAt(this);
            var slack = TimeSpan.FromMilliseconds(0.2);
            if (free - Node.Now > slack)
            {
                Node.Schedule(_pump, free - slack);
                return;
            }

            Channel? next = null;
            for (int i = 0; i < _feeds.Count; i++)
            {
                var candidate = _feeds[(_cursor + i) % _feeds.Count];
                if (candidate.IsActive)
                {
                    next = candidate;
                    _cursor = (_cursor + i + 1) % _feeds.Count;
                    break;
                }
            }

            if (next is null)
            {
                return;
            }

            int n = next.Feed.Pull(_slot, out var to);
            if (n <= 0)
            {
                next.IsActive = false;
                continue;
            }

            _tree.Send(this, to, _slot.AsSpan(0, Math.Min(n, MaxDatagramSize)));
            if (IsClosed)
            {
                return;
            }
        }
    }

    private sealed class Channel(TreeTransport owner, IDatagramFeed feed) : IFeedChannel
    {
        public IDatagramFeed Feed { get; } = feed;

        public bool IsActive { get; set; }

        public void Signal()
        {
            if (!owner._feeds.Contains(this))
            {
                return;
            }

            IsActive = true;
            owner.WantPump();
        }

        public void Dispose()
        {
            IsActive = false;
            owner._feeds.Remove(this);
        }
    }
}
