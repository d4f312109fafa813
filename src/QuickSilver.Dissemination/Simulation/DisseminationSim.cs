using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Dissemination.Simulation;

/// <summary>
/// A dissemination server and its clients on the simulated network (virtual time, seeded loss): the same
/// <see cref="DisseminationServer"/> and <see cref="DisseminationClient"/> objects the real path runs. Multicast
/// goes through <see cref="SimNetwork"/> (each client's access link may lose); the request channel, TCP in the real
/// path, is modelled as an in-order, lossless pipe with a fixed one-way latency (TCP hides loss from the protocol
/// and only delays), carried by alarms on the receiving node. Single-threaded.
/// </summary>
public sealed class DisseminationSim
{
    private readonly Dictionary<int, SimClient> _byConnection = new();
    private readonly ServerLinks _links;
    private int _nextConnection = 1;

    /// <param name="serverCostPerDatagram">When set, the server runs on a <see cref="BusyCore"/>: each datagram it sends
    /// costs that much virtual time, so a rate above what that core can send is not kept (a CPU-bound server).</param>
    public DisseminationSim(int seed, ServerOptions serverOptions, MemoryPageSource files, LinkOptions? serverLink = null, TimeSpan? requestLatency = null, TimeSpan? serverCostPerDatagram = null)
    {
        ArgumentNullException.ThrowIfNull(files);
        Network = new SimNetwork(seed);
        ServerNode = Network.AddNode();
        if (serverLink is not null)
        {
            Network.SetLink(ServerNode, serverLink);
        }

        RequestLatency = requestLatency ?? TimeSpan.FromMilliseconds(1);
        Files = files;
        _links = new ServerLinks(this);
        var transport = ServerNode.Open(7000);
        IAlarmScheduler clock = ServerNode;
        if (serverCostPerDatagram is { } cost)
        {
            ServerCore = new BusyCore(ServerNode, cost);
            clock = ServerCore;
            transport = ServerCore.Wrap(transport);
        }

        Server = new DisseminationServer(serverOptions, files.Catalog, files, clock, transport, _links);
    }

    public SimNetwork Network { get; }

    public SimNode ServerNode { get; }

    /// <summary>The server's costed core, when the run gave one.</summary>
    public BusyCore? ServerCore { get; }

    public DisseminationServer Server { get; }

    public MemoryPageSource Files { get; }

    public TimeSpan RequestLatency { get; }

    public List<SimClient> Clients { get; } = new();

    /// <summary>Bytes carried by request channels, both directions (frames; the TCP/IP headers are not modelled).</summary>
    public long RequestChannelBytes { get; private set; }

    /// <summary>Adds a client node with its link and a fresh store; call <see cref="SimClient.Start"/> to connect.</summary>
    /// <param name="costPerDatagram">When set, the client runs on a <see cref="BusyCore"/> (each datagram it sends costs
    /// that much; <see cref="SimClient.Core"/> can be stalled, so its alarms fire late as on a loaded machine).</param>
    public SimClient AddClient(IReadOnlyList<string> names, ClientOptions? options = null, LinkOptions? link = null, IPageStore? store = null, TimeSpan? costPerDatagram = null)
    {
        var node = Network.AddNode();
        if (link is not null)
        {
            Network.SetLink(node, link);
        }

        var client = new SimClient(this, node, names, options ?? new ClientOptions(), store ?? new MemoryPageStore(), costPerDatagram);
        Clients.Add(client);
        return client;
    }

    internal int Connect(SimClient client)
    {
        int id = _nextConnection++;
        _byConnection[id] = client;
        Post(ServerNode, () => Server.OnConnected(id));
        return id;
    }

    internal void ToServer(SimClient client, int connection, ReadOnlySpan<byte> frame)
    {
        RequestChannelBytes += frame.Length;
        var copy = frame.ToArray();
        Post(ServerNode, () =>
        {
            if (_byConnection.ContainsKey(connection))
            {
                Server.OnFrame(connection, copy);
            }
        });
    }

    internal void Disconnect(int connection)
    {
        if (_byConnection.Remove(connection))
        {
            Post(ServerNode, () => Server.OnDisconnected(connection));
        }
    }

    private void ToClient(int connection, ReadOnlySpan<byte> frame)
    {
        if (!_byConnection.TryGetValue(connection, out var client))
        {
            return;
        }

        RequestChannelBytes += frame.Length;
        var copy = frame.ToArray();
        Post(client.Node, () =>
        {
            if (client.Connection == connection)
            {
                client.Client?.OnFrame(copy);
            }
        });
    }

    /// <summary>Runs <paramref name="action"/> on <paramref name="node"/> after the request channel's latency
    /// (in order: equal deadlines fire in insertion order); dropped if the node crashes meanwhile.</summary>
    private void Post(SimNode node, Action action)
    {
        var alarm = new Alarm(a =>
        {
            ((Action)a.State!)();
        }, action);
        node.Schedule(alarm, Network.Now + RequestLatency);
    }

    /// <summary>Runs until every started client completed, or <paramref name="limit"/> of virtual time.</summary>
    public bool RunUntilComplete(TimeSpan limit, Func<SimClient, bool>? which = null)
    {
        which ??= _ => true;
        return Network.RunUntil(() => Clients.Where(which).All(c => c.Client?.IsComplete == true), limit);
    }

    private sealed class ServerLinks(DisseminationSim sim) : IClientLinks
    {
        public void Send(int client, ReadOnlySpan<byte> frame) => sim.ToClient(client, frame);

        public void Close(int client)
        {
            if (sim._byConnection.Remove(client, out var c) && c.Connection == client)
            {
                c.Connection = 0;
            }
        }
    }
}

/// <summary>One simulated client: its node, its store (which survives restarts), and the client object.</summary>
public sealed class SimClient : IRequestLink
{
    private readonly DisseminationSim _sim;
    private readonly IReadOnlyList<string> _names;
    private readonly ClientOptions _options;

    private readonly TimeSpan? _cost;

    internal SimClient(DisseminationSim sim, SimNode node, IReadOnlyList<string> names, ClientOptions options, IPageStore store, TimeSpan? cost)
    {
        _cost = cost;
        Store = store;
        _sim = sim;
        Node = node;
        _names = names;
        _options = options;
    }

    public SimNode Node { get; }

    /// <summary>The client's "disk" (a <see cref="MemoryPageStore"/> unless another was given).</summary>
    public IPageStore Store { get; }

    public DisseminationClient? Client { get; private set; }

    /// <summary>The client's costed core (a fresh one per <see cref="Start"/>), when <c>AddClient</c> gave a cost.</summary>
    public BusyCore? Core { get; private set; }

    public int Connection { get; internal set; }

    /// <summary>Virtual time of the last <see cref="Start"/>.</summary>
    public TimeSpan StartedAt { get; private set; }

    /// <summary>Opens the request channel and starts a client (a new one after a restart, same store).</summary>
    public void Start()
    {
        if (!Node.IsUp)
        {
            Node.Restart();
        }

        var transport = Node.Open(7001);
        IAlarmScheduler clock = Node;
        if (_cost is { } cost)
        {
            Core = new BusyCore(Node, cost);
            clock = Core;
            transport = Core.Wrap(transport);
        }

        Client = new DisseminationClient(_options, _names, clock, transport, this, Store, Node.Random);
        Connection = _sim.Connect(this);
        StartedAt = _sim.Network.Now;
        var client = Client;
        var alarm = new Alarm(_ => client.Start());
        Node.Schedule(alarm, _sim.Network.Now + _sim.RequestLatency); // after the connection is open at the server
    }

    /// <summary>Crashes the client's node: its connection drops (the server sees it close), the store stays.</summary>
    public void Crash()
    {
        Node.Crash();
        _sim.Disconnect(Connection);
        Connection = 0;
        Client = null;
    }

    public void Send(ReadOnlySpan<byte> frame)
    {
        if (Connection != 0)
        {
            _sim.ToServer(this, Connection, frame);
        }
    }

    /// <summary>Sends raw bytes as a frame on this client's request channel (tests of hostile clients).</summary>
    public void SendRaw(ReadOnlySpan<byte> frame) => Send(frame);
}
