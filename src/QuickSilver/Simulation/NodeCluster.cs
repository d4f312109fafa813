using QuickSilver.Aer;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Simulation;

/// <summary>
/// The whole QSM stack in the simulated network (tests and the figures runner): a GMS on its own node and N nodes, each running the same
/// stack the real node runs (<see cref="QsmStack.BuildNode"/>: reliable unicast, GMS client, region and AER layers, group layer), on virtual time.
/// Application calls are posted to the node as they would be downcalls.
/// </summary>
internal sealed class NodeCluster
{
    public const ushort Port = 47010;

    private readonly QuickSilverNodeOptions _options;
    private readonly Action<SimNode>? _configureNode;

    /// <param name="configureNode">Applied to each node's simulated host (receive CPU cost, queue limit) as it is added.</param>
    /// <param name="maxDatagramSize">The nodes' endpoint datagram limit: 16 KiB (loopback-sized) by default; 1,472 for an
    /// Ethernet-MTU testbed.</param>
    /// <param name="gms">GMS timing; by default fast (50 ms batches, 1 s failure timeout) for tests.</param>
    /// <param name="security">Datagram authentication of the GMS and every node (null: off); <see cref="AddNodes"/>
    /// can give a node other options.</param>
    /// <param name="gmsReplicas">1: the single GMS. More: that many GMS replicas, each on its own simulated host, on
    /// <see cref="SimulatedConsensus"/> (the stand-in for the Raft engine); the first leads until
    /// <see cref="CrashGmsLeader"/> and <see cref="ElectGms"/> say otherwise, and every node lists them all.</param>
    /// <param name="gmsLogger">Where the GMS (or every replica) logs (registrations, removals); null: nowhere.</param>
    public NodeCluster(int seed, LinkOptions link, RegionOptions? region = null, bool multicast = true, Action<SimNode>? configureNode = null,
        RateControlOptions? rate = null, int maxDatagramSize = 16 * 1024, GmsOptions? gms = null, DatagramSecurityOptions? security = null,
        int gmsReplicas = 1, Microsoft.Extensions.Logging.ILogger? gmsLogger = null, AerOptions? aer = null)
    {
        _configureNode = configureNode;
        Network = new SimNetwork(seed, link);
        GmsOptions = gms is not null ? gms with { UseMulticast = multicast } : new GmsOptions { UseMulticast = multicast, BatchInterval = TimeSpan.FromMilliseconds(50), HeartbeatInterval = TimeSpan.FromMilliseconds(200), FailureTimeout = TimeSpan.FromSeconds(1) };
        _options = new QuickSilverNodeOptions
        {
            Region = region ?? new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100) },
            RateControl = rate ?? new RateControlOptions { MinRate = 2_000 },
            GmsServer = GmsOptions,
            MaxDatagramSize = maxDatagramSize,
            Security = security ?? new DatagramSecurityOptions(),
            Aer = aer ?? new AerOptions(),
        };
        if (gmsReplicas > 1)
        {
            StartReplicas(gmsReplicas, gmsLogger);
            return;
        }

        _gmsNode = Network.AddNode();
        _gmsLogger = gmsLogger;
        StartGms();
    }

    private GmsServer? _gms;
    private SimNode? _gmsNode;
    private Microsoft.Extensions.Logging.ILogger? _gmsLogger;
    private uint _gmsIncarnation;

    /// <summary>Builds the single GMS on its host, with a new epoch each time (a restarted process starts with no state).</summary>
    private void StartGms()
    {
        var host = _gmsNode!;
        var endpoint = host.Open(47001, _options.DatagramSize);
        GmsEndpoint = endpoint.LocalAddress;
        uint epoch = 7 + _gmsIncarnation++;
        host.TryPost(_ =>
        {
            GmsStack = QsmStack.BuildGms(endpoint, host, epoch, epoch, GmsOptions, logger: _gmsLogger, security: _options.Security);
            _gms = GmsStack.Get<GmsServerLayer>().Server;
        }, null);
        Network.RunFor(TimeSpan.FromMilliseconds(1));
    }

    /// <summary>The single GMS's host crashes: its state (registrations, views) is gone; nodes keep their last views.</summary>
    public void CrashGms()
    {
        var host = _gmsNode ?? throw new InvalidOperationException("This cluster runs replicated GMSs: use CrashGmsLeader.");
        host.Crash();
        _gms = null;
        GmsStack = null;
    }

    /// <summary>The single GMS starts again at the same address, empty and with a new epoch (docs/membership.md: every
    /// node registers again under a new id and re-joins its groups).</summary>
    public void RestartGms()
    {
        var host = _gmsNode ?? throw new InvalidOperationException("This cluster runs replicated GMSs.");
        host.Restart();
        StartGms();
    }

    /// <summary>The replicated GMS's stand-in engine (null with a single GMS).</summary>
    public SimulatedConsensus? Consensus { get; private set; }

    /// <summary>The simulated hosts of the GMS replicas, in <see cref="SimulatedConsensus.Members"/> order.</summary>
    public List<SimNode> GmsHosts { get; } = new();

    private void StartReplicas(int count, Microsoft.Extensions.Logging.ILogger? logger)
    {
        var clock = Network.AddNode(); // the stand-in engine's clock: a host that never crashes and has no socket
        Consensus = new SimulatedConsensus(clock);
        for (int i = 0; i < count; i++)
        {
            var host = Network.AddNode();
            var endpoint = host.Open(47001, _options.DatagramSize);
            var member = Consensus.Add(endpoint.LocalAddress);
            GmsHosts.Add(host);
            host.TryPost(_ => QsmStack.BuildGms(endpoint, host, (uint)(7 + i), 7, GmsOptions with { Log = member }, logger: logger, security: _options.Security), null);
        }

        GmsEndpoint = Consensus[0].Address;
        Network.RunFor(TimeSpan.FromMilliseconds(1));
        ElectGms(0);
    }

    /// <summary>The GMS replica at <paramref name="index"/> becomes leader (an election won).</summary>
    public void ElectGms(int index)
    {
        var consensus = Consensus ?? throw new InvalidOperationException("This cluster runs a single GMS.");
        GmsHosts[index].TryPost(_ => consensus.Elect(consensus[index]), null);
        Network.RunFor(TimeSpan.FromMilliseconds(1));
    }

    /// <summary>The leading GMS replica's host crashes; returns its index. No replica leads until <see cref="ElectGms"/>.</summary>
    public int CrashGmsLeader()
    {
        var consensus = Consensus ?? throw new InvalidOperationException("This cluster runs a single GMS.");
        var leader = consensus.Leader ?? throw new InvalidOperationException("No GMS replica leads.");
        int index = consensus.Members.ToList().IndexOf(leader);
        GmsHosts[index].Crash();
        consensus.Crash(leader);
        return index;
    }

    public SimNetwork Network { get; }

    public GmsOptions GmsOptions { get; }

    /// <summary>The single GMS's address, or the first replica's.</summary>
    public NetAddress GmsEndpoint { get; private set; }

    /// <summary>The single GMS, or the replica that leads now.</summary>
    public GmsServer? Gms => Consensus is { } consensus ? consensus.Leader?.Server : _gms;

    /// <summary>The GMS's stack (transport → reliable unicast → GMS server), once built.</summary>
    public ProtocolStack? GmsStack { get; private set; }

    public List<Node> Nodes { get; } = new();

    /// <summary>Adds <paramref name="count"/> nodes and runs until the GMS has registered them all.</summary>
    public List<Node> AddNodes(int count)
    {
        var added = AddNodesUnregistered(count);
        Require(() => added.All(n => n.Gms?.Node is not null), TimeSpan.FromSeconds(30), "registration");
        return added;
    }

    /// <summary>Adds <paramref name="count"/> nodes without waiting for them to register; <paramref name="security"/>
    /// overrides the cluster's datagram security for these nodes (a node with another secret).</summary>
    public List<Node> AddNodesUnregistered(int count, DatagramSecurityOptions? security = null)
    {
        var added = new List<Node>();
        for (int i = 0; i < count; i++)
        {
            var sim = Network.AddNode();
            _configureNode?.Invoke(sim);
            var node = new Node(this, sim, security ?? _options.Security);
            Nodes.Add(node);
            added.Add(node);
        }

        return added;
    }

    /// <summary>Joins each node to each group and runs until every node has a view of every group that includes it.</summary>
    public void Join(IEnumerable<Node> nodes, params string[] groups) => Join(nodes, keepPayloads: true, groups);

    /// <summary>Virtual time allowed for joins and view changes to settle (each join is one GMS request).</summary>
    public TimeSpan SettleLimit { get; set; } = TimeSpan.FromSeconds(30);

    public void Join(IEnumerable<Node> nodes, bool keepPayloads, params string[] groups)
    {
        var list = nodes.ToList();
        foreach (var node in list)
        {
            foreach (var group in groups)
            {
                node.Join(group, keepPayloads);
            }
        }

        Require(() => list.All(n => groups.All(g => n.Groups[g].View is not null)), SettleLimit, "group views");
    }

    /// <summary>Runs until every node's view of <paramref name="group"/> covers exactly <paramref name="members"/>.</summary>
    public void SettleViews(string group, IReadOnlyCollection<Node> members)
    {
        bool Covered(Node n)
        {
            if (n.Gms is not { } gms || !n.Groups.TryGetValue(group, out var g) || g.View is not { } view)
            {
                return false;
            }

            var nodes = view.Regions.SelectMany(r => gms.FindRegion(r.Region)?.Members.Select(m => m.Node.Value) ?? []).ToHashSet();
            return nodes.SetEquals(members.Select(m => m.Id));
        }

        // A member whose GMS client is between registrations (the GMS dropped it and it is registering again) has no id
        // yet: the views are not settled until it has one.
        Require(() => members.All(m => m.Registered) && members.All(Covered), SettleLimit, $"views of {group}");

    }

    public void Require(Func<bool> condition, TimeSpan limit, string what)
    {
        if (!Network.RunUntil(condition, limit))
        {
            throw new InvalidOperationException($"seed {Network.Seed}: {what} did not happen within {limit} of virtual time");
        }
    }

    internal sealed class Node
    {
        private readonly NodeCluster _cluster;
        private readonly List<uint> _ids = new();

        public Node(NodeCluster cluster, SimNode sim, DatagramSecurityOptions security)
        {
            _cluster = cluster;
            Sim = sim;
            Endpoint = sim.Open(Port, cluster._options.DatagramSize);
            var options = cluster._options;
            sim.TryPost(_ =>
            {
                Stack = QsmStack.BuildNode(Endpoint, sim, new QsmStackOptions
                {
                    Epoch = (uint)(sim.Index + 1),
                    Gms = cluster.GmsEndpoint,
                    GmsClient = cluster.Consensus is { } consensus ? new GmsClientOptions { Replicas = [.. consensus.Members.Select(m => m.Address)] } : null,
                    Region = options.Region,
                    RateControl = options.RateControl,
                    Security = security,
                    WideArea = new AerLayer(options.Aer, sim.Random),
                });
                AerGroups = new AerGroups(Stack);
                Gms = Stack.Get<MembershipLayer>().Client;
                Gms.ViewsChanged += _ => NoteId();
                Region = Stack.Get<RegionLayer>();
                GroupLayer = Stack.Get<GroupLayer>();
            }, null);
        }

        public SimNode Sim { get; }

        public IDatagramTransport Endpoint { get; }

        /// <summary>The node's stack (transport → reliable unicast → membership → region → group), once built.</summary>
        public ProtocolStack? Stack { get; private set; }

        public GmsClient? Gms { get; private set; }

        public RegionLayer? Region { get; private set; }

        public GroupLayer? GroupLayer { get; private set; }

        /// <summary>The node's AER groups and repair servers, once built.</summary>
        public AerGroups? AerGroups { get; private set; }

        /// <summary>The node's address on the simulated network (what AER options name it by).</summary>
        public NetAddress Address => Endpoint.LocalAddress;

        /// <summary>The node's id from the GMS; throws while the node has none (see <see cref="Registered"/>).</summary>
        public uint Id => Gms?.Node is { } id ? id.Value : throw new InvalidOperationException($"node {Sim.Index} is not registered with the GMS (yet, or again)");

        /// <summary>Every id the node has had views under, oldest first: more than one if the GMS dropped it (as silent)
        /// and it registered again.</summary>
        public IReadOnlyList<uint> Ids => _ids;

        /// <summary>Adds the node's current GMS id to <see cref="Ids"/> now: a node that registered but lost every view
        /// of that registration (heavy loss), then was dropped and registered again, would otherwise list only its
        /// second id, and look like a node that never registered again.</summary>
        public void NoteId()
        {
            if (Gms?.Node is { } id && !_ids.Contains(id.Value))
            {
                _ids.Add(id.Value);
            }
        }

        /// <summary>A label for messages: the current id, or "unregistered (sim N)".</summary>
        public string Label => Gms?.Node is { } id ? $"node {id.Value}" : $"unregistered node (sim {Sim.Index})";

        /// <summary>Whether the node's GMS client holds a registration (it has none before Welcome and while it re-registers).</summary>
        public bool Registered => Gms?.Node is not null;

        public Dictionary<string, RecordingGroup> Groups { get; } = new(StringComparer.Ordinal);

        /// <param name="keepPayloads">False for long runs: count deliveries without keeping every message number.</param>
        public void Join(string group, bool keepPayloads = true)
        {
            var owner = new RecordingGroup(group) { KeepPayloads = keepPayloads };
            Groups[group] = owner;
            Sim.TryPost(_ => owner.State = GroupLayer!.Join(group, owner), null);
        }

        public void Leave(string group) => Sim.TryPost(_ => GroupLayer!.Leave(group), null);

        /// <summary>Joins AER group <paramref name="group"/> (source or receiver, as <paramref name="options"/> say), the
        /// way <see cref="QuickSilverNode.JoinGroupAsync(string, GroupOptions, CancellationToken)"/> does.</summary>
        public void JoinAer(string group, AerGroupOptions options, bool keepPayloads = true)
        {
            var owner = new RecordingGroup(group) { KeepPayloads = keepPayloads };
            Groups[group] = owner;
            Sim.TryPost(_ => owner.Aer = AerGroups!.Join(group, options, owner), null);
        }

        /// <summary>Runs a repair server in this node, as <see cref="QuickSilverNodeOptions.RepairServers"/> does.</summary>
        public void AddRepairServer(AerRepairServerOptions options) => Sim.TryPost(_ => AerGroups!.AddRepairServers([options]), null);

        /// <summary>Publishes <paramref name="count"/> numbered messages (1..count, 4-byte little-endian plus padding to
        /// <paramref name="size"/>) in <paramref name="group"/> through the group's pull feed: as fast as the stack takes
        /// them, or at most <paramref name="perSecond"/> a second (an application producing at that rate).</summary>
        public void PublishNumbered(string group, int count, int size = 100, int perSecond = 0)
        {
            var owner = Groups[group];
            var feed = new NumberedFeed(count, size);
            owner.Published = feed;
            Sim.TryPost(_ =>
            {
                if (owner.Aer is { } aer)
                {
                    aer.Feed = feed; // an AER source pulls as fast as NCA's window allows
                    aer.Signal();
                    return;
                }

                var state = owner.State!;
                state.Feed = feed;
                if (perSecond > 0)
                {
                    // Every millisecond the application makes perSecond/1000 more messages available and signals the feed.
                    feed.Allowance = 0;
                    var tick = new Alarm(self =>
                    {
                        feed.Allowance += Math.Max(1, perSecond / 1000);
                        GroupLayer!.Signal(state);
                        if (feed.Next <= feed.Count)
                        {
                            Sim.ScheduleAfter(self, TimeSpan.FromMilliseconds(1));
                        }
                    });
                    Sim.ScheduleAfter(tick, TimeSpan.FromMilliseconds(1));
                }
                else
                {
                    GroupLayer!.Signal(state);
                }
            }, null);
        }
    }
}

/// <summary>A pull feed of numbered messages 1..count.</summary>
internal sealed class NumberedFeed(int count, int size) : Core.Feeds.IFeed<ReadOnlyMemory<byte>>
{
    public int Next { get; private set; } = 1;

    public int Count => count;

    /// <summary>How many more messages the application has produced (unbounded by default).</summary>
    public int Allowance { get; set; } = int.MaxValue;

    public bool TryPull(out ReadOnlyMemory<byte> item)
    {
        if (Next > count || Allowance <= 0)
        {
            item = default;
            return false;
        }

        var bytes = new byte[size];
        BitConverter.TryWriteBytes(bytes, Next++);
        Allowance--;
        item = bytes;
        return true;
    }
}

/// <summary>A group owner that records what is delivered, per sender. With a <see cref="ReceiveBuffer"/> it is also a
/// slow reader: delivered messages wait in a bounded queue until <see cref="Drain"/> takes them (only then are they
/// recorded), and a full queue pauses delivery the way <see cref="QuickSilverGroup"/>'s does.</summary>
internal sealed class RecordingGroup(string name) : IGroupOwner
{
    private readonly Queue<(uint Sender, int Number)> _queue = new();

    public string Name { get; } = name;

    public NodeGroup? State { get; set; }

    /// <summary>The AER session, when the group is an AER group.</summary>
    public AerGroupSession? Aer { get; set; }

    public GroupView? View { get; private set; }

    public NumberedFeed? Published { get; set; }

    public bool Left { get; private set; }

    public Dictionary<uint, List<int>> Received { get; } = new();

    /// <summary>Whether <see cref="Received"/> keeps every message number (tests) or only <see cref="Count"/> grows.</summary>
    public bool KeepPayloads { get; init; } = true;

    /// <summary>0 (the default): every message is recorded on delivery. Otherwise the queue's bound: at it,
    /// <see cref="Deliver"/> says "full" and the group layer pauses the group until <see cref="Drain"/> resumes it.</summary>
    public int ReceiveBuffer { get; set; }

    /// <summary>Messages delivered and not yet drained.</summary>
    public int Queued => _queue.Count;

    /// <summary>The longest the queue has been.</summary>
    public int MaxQueued { get; private set; }

    /// <summary>Times the queue reached <see cref="ReceiveBuffer"/>.</summary>
    public int Pauses { get; private set; }

    /// <summary>Whether the group layer was told the queue is full and not yet told to resume.</summary>
    public bool Paused { get; private set; }

    /// <summary>Messages delivered in this group, from every sender.</summary>
    public long Count { get; private set; }

    public int CountFrom(uint sender) => Received.TryGetValue(sender, out var list) ? list.Count : 0;

    public void OnViewInstalled(GroupView view) => View = view;

    public bool Deliver(uint sender, ulong sequence, ReadOnlySpan<byte> payload)
    {
        Count++;
        int number = KeepPayloads ? BitConverter.ToInt32(payload) : 0;
        if (ReceiveBuffer == 0)
        {
            Record(sender, number);
            return true;
        }

        _queue.Enqueue((sender, number));
        MaxQueued = Math.Max(MaxQueued, _queue.Count);
        if (_queue.Count < ReceiveBuffer)
        {
            return true;
        }

        if (!Paused)
        {
            Paused = true;
            Pauses++;
        }

        return false;
    }

    /// <summary>The reader takes up to <paramref name="max"/> queued messages (on the node's core thread, e.g. from an
    /// alarm); once the queue is at or below half its bound, a paused group is resumed through
    /// <paramref name="groups"/>.</summary>
    public int Drain(int max, GroupLayer groups)
    {
        ArgumentNullException.ThrowIfNull(groups);
        int taken = 0;
        while (taken < max && _queue.TryDequeue(out var message))
        {
            Record(message.Sender, message.Number);
            taken++;
        }

        if (Paused && _queue.Count <= ReceiveBuffer / 2)
        {
            Paused = false;
            if (Aer is { } aer)
            {
                aer.Resume();
            }
            else
            {
                groups.ResumeDelivery(State!);
            }
        }

        return taken;
    }

    private void Record(uint sender, int number)
    {
        if (!KeepPayloads)
        {
            return;
        }

        if (!Received.TryGetValue(sender, out var list))
        {
            Received[sender] = list = new List<int>();
        }

        list.Add(number);
    }

    public bool TryTakePublished(out ReadOnlyMemory<byte> message)
    {
        message = default;
        return false; // the simulation publishes on the core thread (GroupLayer.Enqueue) or through a feed
    }

    /// <summary>Published messages handed back once written into packets (<see cref="IGroupOwner.OnSent"/>), by their
    /// first four bytes (the number <see cref="NumberedFeed"/> and the tests write), with how many times each came.</summary>
    public Dictionary<int, int> SentBack { get; } = new();

    public void OnSent(ReadOnlyMemory<byte> message)
    {
        if (message.Length >= sizeof(int))
        {
            int number = BitConverter.ToInt32(message.Span);
            SentBack[number] = SentBack.GetValueOrDefault(number) + 1;
        }
    }

    public void OnLeft(int discarded) => Left = true;

    /// <summary>Messages the node skipped in this group (a sender told it to skip ahead), from every sender.</summary>
    public long Skipped { get; private set; }

    public void OnSkipped(uint sender, ulong sequence) => Skipped++;
}
