using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Mediation;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Simulation;

/// <summary>
/// A federation in one process on virtual time: gateways (the real <see cref="BroadcastGateway"/> state machines),
/// peering links with a latency, and islands whose native medium is an in-memory broadcast. Seeded and
/// single-threaded: every frame, native packet and tick is an event in one queue ordered by (time, insertion), so a run
/// replays exactly. Links can be cut (both ends see the close) or made silent (only keep-alives reveal it), and a
/// gateway can crash (all its links fall silent). Every data frame sent on every directed link is recorded, so a test
/// can assert no packet crossed a link twice.
/// </summary>
public sealed class FederationSim
{
    private readonly PriorityQueue<Action, (TimeSpan, long)> _events = new();
    private readonly Dictionary<GatewayId, SimGateway> _gateways = [];
    private readonly Dictionary<(GatewayId, GatewayId), SimLinkState> _links = [];
    private readonly Dictionary<uint, SimDataNode> _dataNodes = [];
    private long _order;

    public FederationSim(int seed, TimeSpan? tick = null)
    {
        Random = new Random(seed);
        TickInterval = tick ?? TimeSpan.FromMilliseconds(100);
    }

    public Random Random { get; }

    public TimeSpan Now { get; private set; }

    public TimeSpan TickInterval { get; }

    /// <summary>Every data frame put on a directed link: (from, to, origin, sequence).</summary>
    public List<(GatewayId From, GatewayId To, GatewayId Origin, uint Sequence)> DataSent { get; } = [];

    public long ControlFramesSent { get; private set; }

    public long ControlBytesSent { get; private set; }

    /// <summary>Bytes of every data-path frame put on a link (DATA, and the per-receiver frames: CoreCast payload and
    /// header, receiver data).</summary>
    public long DataBytesSent { get; private set; }

    /// <summary>Bytes of the per-receiver frame types put on links.</summary>
    public Dictionary<FrameType, long> DataBytesByType { get; } = [];

    /// <summary>Latency between a clustered gateway's control node and its data nodes (one machine room).</summary>
    public TimeSpan ClusterLatency { get; set; } = TimeSpan.FromMilliseconds(0.2);

    /// <summary>DATA frames put on inter-gateway links, per sender: a data node's number, or 0 for a gateway itself
    /// (an unclustered gateway, or, if it ever happened, a clustered control node).</summary>
    public Dictionary<uint, long> DataSentByNode { get; } = [];

    /// <summary>Probability that a DATA frame sent as a UDP datagram (a real-time session's, between gateways or to and
    /// from data nodes) is lost. Bulk DATA travels on TCP (a peering link or a bulk data channel) and is never lost
    /// here. 0 by default (and then no random number is drawn, so seeded runs replay as before).</summary>
    public double DatagramLoss { get; set; }

    /// <summary>DATA datagrams lost to <see cref="DatagramLoss"/>.</summary>
    public long DatagramsLost { get; private set; }

    /// <summary>DATA frames put on reliable paths (peering links, bulk data channels) and on datagram paths.</summary>
    public long ReliableDataFrames { get; private set; }

    public long DatagramDataFrames { get; private set; }

    /// <summary>Control↔data-node frames and bytes (both ways).</summary>
    public long ClusterFramesSent { get; private set; }

    public long ClusterBytesSent { get; private set; }

    public IEnumerable<BroadcastGateway> Gateways => _gateways.Values.Select(g => g.Gateway);

    public BroadcastGateway this[uint id] => _gateways[new GatewayId(id)].Gateway;

    public SimIsland AddIsland(uint island) => new(this, new IslandId(island));

    public BroadcastGateway AddGateway(uint id, SimIsland island, Func<GatewayOptions, GatewayOptions>? configure = null)
    {
        var options = new GatewayOptions { Gateway = new GatewayId(id), Island = island.Id };
        options = configure?.Invoke(options) ?? options;
        var sim = new SimGateway(this, options.Gateway);
        var native = new SimNativeNet(island, options.Gateway);
        sim.Gateway = new BroadcastGateway(options, sim, native);
        native.Upcalls = sim.Gateway;
        island.Mediator.AddGateway(options.Gateway, sim.Gateway);
        _gateways[options.Gateway] = sim;
        ScheduleTick(sim);
        return sim.Gateway;
    }

    /// <summary>A clustered gateway (seed §4): a control node numbered <paramref name="id"/> with data nodes numbered
    /// <paramref name="dataNodes"/>, all in <paramref name="island"/>. Data nodes have their own plug-in on the island's
    /// medium, their own ticks, and can crash on their own (<see cref="CrashDataNode"/>).</summary>
    public BroadcastGateway AddClusteredGateway(uint id, SimIsland island, uint[] dataNodes, Func<GatewayOptions, GatewayOptions>? configure = null, Func<ClusterOptions, ClusterOptions>? cluster = null)
    {
        var options = new GatewayOptions { Gateway = new GatewayId(id), Island = island.Id };
        options = configure?.Invoke(options) ?? options;
        var clusterOptions = new ClusterOptions { DataNodes = dataNodes };
        clusterOptions = cluster?.Invoke(clusterOptions) ?? clusterOptions;
        var sim = new SimGateway(this, options.Gateway);
        var native = new SimNativeNet(island, options.Gateway);
        sim.Gateway = new BroadcastGateway(options, sim, native, clusterOptions, sim);
        native.Upcalls = sim.Gateway;
        island.Mediator.AddGateway(options.Gateway, sim.Gateway);
        _gateways[options.Gateway] = sim;
        ScheduleTick(sim);
        foreach (var n in dataNodes)
        {
            var nodeNative = new SimNativeNet(island, new GatewayId(n));
            var node = new SimDataNode(this, n, options.Gateway);
            node.Node = new DataNode(n, options.Gateway, clusterOptions, node, nodeNative, options.MaxOrigins, options.MaxPayloadBytes);
            nodeNative.Upcalls = node.Node;
            nodeNative.IsAlive = () => node.Alive;
            _dataNodes[n] = node;
            ScheduleNodeTick(node);
        }

        return sim.Gateway;
    }

    public DataNode DataNode(uint id) => _dataNodes[id].Node;

    /// <summary>The data node stops: no ticks, no heartbeats, no frames in or out, its native subscriptions deaf.</summary>
    public void CrashDataNode(uint id) => _dataNodes[id].Alive = false;

    /// <summary>Every control↔data frame as sent (to data nodes and to control nodes), recorded when
    /// <see cref="RecordClusterFrames"/> is set: for replay tests.</summary>
    public List<(uint Node, bool ToControl, byte[] Frame)> ClusterFrames { get; } = [];

    public bool RecordClusterFrames { get; set; }

    /// <summary>Injects raw bytes as a frame from a data node to the control node <paramref name="gateway"/>.</summary>
    public void InjectToControl(uint gateway, byte[] frame) => _gateways[new GatewayId(gateway)].Gateway.OnDataNodeFrame(frame, Now);

    /// <summary>Injects raw bytes as a control frame to data node <paramref name="node"/> (hostile-input tests).</summary>
    public void InjectToDataNode(uint node, byte[] frame) => _dataNodes[node].Node.OnControlFrame(frame, Now);

    /// <summary>Peers <paramref name="a"/> and <paramref name="b"/> (HELLO both ways after one latency).</summary>
    public void Connect(uint a, uint b, TimeSpan latency, LinkCosts? costs = null)
    {
        var ga = _gateways[new GatewayId(a)];
        var gb = _gateways[new GatewayId(b)];
        var c = costs ?? LinkCosts.Default;
        _links[(ga.Id, gb.Id)] = new SimLinkState(latency);
        _links[(gb.Id, ga.Id)] = new SimLinkState(latency);
        At(Now + latency, () =>
        {
            if (ga.Alive && gb.Alive && Up(ga.Id, gb.Id))
            {
                ga.Gateway.PeerConnected(gb.Id, gb.Gateway.Island, c, Now);
                gb.Gateway.PeerConnected(ga.Id, ga.Gateway.Island, c, Now);
            }
        });
    }

    /// <summary>Closes the link: both ends learn at once (a TCP reset).</summary>
    public void Cut(uint a, uint b)
    {
        var ia = new GatewayId(a);
        var ib = new GatewayId(b);
        _links.Remove((ia, ib));
        _links.Remove((ib, ia));
        _gateways[ia].Gateway.PeerDisconnected(ib, Now);
        _gateways[ib].Gateway.PeerDisconnected(ia, Now);
    }

    /// <summary>The gateway stops: no ticks, no frames in or out. Its peers notice only when keep-alives stop.</summary>
    public void Crash(uint id) => _gateways[new GatewayId(id)].Alive = false;

    /// <summary>Injects raw bytes as a frame from <paramref name="from"/> to <paramref name="to"/> (hostile-peer tests).</summary>
    public void Inject(uint from, uint to, byte[] frame) => _gateways[new GatewayId(to)].Gateway.OnFrame(new GatewayId(from), frame, Now);

    public void RunFor(TimeSpan duration)
    {
        var end = Now + duration;
        while (_events.TryPeek(out _, out var key) && key.Item1 <= end)
        {
            var action = _events.Dequeue();
            Now = key.Item1;
            action();
        }

        Now = end;
    }

    public bool RunUntil(Func<bool> condition, TimeSpan limit)
    {
        var end = Now + limit;
        while (Now < end)
        {
            if (condition())
            {
                return true;
            }

            RunFor(TimeSpan.FromMilliseconds(10));
        }

        return condition();
    }

    internal void At(TimeSpan when, Action action) => _events.Enqueue(action, (when, _order++));

    private bool Up(GatewayId a, GatewayId b) => _links.ContainsKey((a, b));

    private void ScheduleTick(SimGateway g)
    {
        // Ticks are jittered so gateways do not run in lock step.
        At(Now + TickInterval + TimeSpan.FromMilliseconds(Random.Next(0, 10)), () =>
        {
            if (!g.Alive)
            {
                return;
            }

            g.Gateway.Tick(Now);
            ScheduleTick(g);
        });
    }

    private void ScheduleNodeTick(SimDataNode n)
    {
        At(Now + TickInterval + TimeSpan.FromMilliseconds(Random.Next(0, 10)), () =>
        {
            if (!n.Alive)
            {
                return;
            }

            n.Node.Tick(Now);
            ScheduleNodeTick(n);
        });
    }

    private void ToDataNode(GatewayId gateway, uint node, ReadOnlySpan<byte> frame)
    {
        ClusterFramesSent++;
        ClusterBytesSent += frame.Length;
        var copy = frame.ToArray();
        if (RecordClusterFrames)
        {
            ClusterFrames.Add((node, false, copy));
        }

        At(Now + ClusterLatency, () =>
        {
            if (_dataNodes.TryGetValue(node, out var n) && n.Alive && n.Gateway == gateway && _gateways[gateway].Alive)
            {
                n.Node.OnControlFrame(copy, Now);
            }
        });
    }

    private void ToControl(SimDataNode node, ReadOnlySpan<byte> frame)
    {
        ClusterFramesSent++;
        ClusterBytesSent += frame.Length;
        var copy = frame.ToArray();
        if (RecordClusterFrames)
        {
            ClusterFrames.Add((node.Id, true, copy));
        }

        At(Now + ClusterLatency, () =>
        {
            if (node.Alive && _gateways[node.Gateway].Alive)
            {
                _gateways[node.Gateway].Gateway.OnDataNodeFrame(copy, Now);
            }
        });
    }

    private bool Send(GatewayId from, GatewayId to, ReadOnlySpan<byte> frame, uint fromNode = 0, uint toNode = 0, bool datagram = false)
    {
        if (!_links.TryGetValue((from, to), out var link) || (fromNode == 0 ? !_gateways[from].Alive : !_dataNodes[fromNode].Alive))
        {
            return false;
        }

        if (frame.Length >= 2 && frame[1] == (byte)FrameType.Data && DataHeader.TryRead(frame, out var h))
        {
            DataSent.Add((from, to, h.Origin, h.Sequence));
            DataBytesSent += frame.Length;
            DataSentByNode[fromNode] = DataSentByNode.GetValueOrDefault(fromNode) + 1;
            if (!datagram)
            {
                ReliableDataFrames++;
            }
            else
            {
                DatagramDataFrames++;
                if (DatagramLoss > 0 && Random.NextDouble() < DatagramLoss)
                {
                    DatagramsLost++;
                    return true; // UDP: the sender never learns
                }
            }
        }
        else if (frame.Length >= 2 && (FrameType)frame[1] is FrameType.CoreCastPayload or FrameType.CoreCastHeader or FrameType.ReceiverData)
        {
            DataBytesSent += frame.Length;
            DataBytesByType[(FrameType)frame[1]] = DataBytesByType.GetValueOrDefault((FrameType)frame[1]) + frame.Length;
        }
        else
        {
            ControlFramesSent++;
            ControlBytesSent += frame.Length;
        }

        var copy = frame.ToArray();
        // TCP keeps order on a link: a frame never overtakes the previous one.
        var when = Now + link.Latency;
        if (when < link.LastArrival)
        {
            when = link.LastArrival;
        }

        link.LastArrival = when;
        At(when, () =>
        {
            if (!_links.ContainsKey((from, to)))
            {
                return;
            }

            if (toNode != 0 && _dataNodes.TryGetValue(toNode, out var target) && target.Gateway == to)
            {
                // A data node's socket: the frame reaches it whether or not its control node is up.
                if (target.Alive)
                {
                    target.Node.OnData(from, copy, Now);
                }

                return;
            }

            if (_gateways[to].Alive && (fromNode != 0 || _gateways[from].Alive))
            {
                _gateways[to].Gateway.OnFrame(from, copy, Now);
            }
        });
        return true;
    }

    private sealed class SimLinkState(TimeSpan latency)
    {
        public TimeSpan Latency { get; } = latency;

        public TimeSpan LastArrival { get; set; }
    }

    private sealed class SimDataNode(FederationSim sim, uint id, GatewayId gateway) : IDataNodeHost
    {
        public uint Id { get; } = id;

        public GatewayId Gateway { get; } = gateway;

        public DataNode Node { get; set; } = null!;

        public bool Alive { get; set; } = true;

        public bool SendToControl(ReadOnlySpan<byte> frame)
        {
            sim.ToControl(this, frame);
            return true;
        }

        // Real-time: a UDP datagram; bulk: a TCP bulk data channel (GatewayRuntime / DataNodeRuntime do the same).
        public bool SendData(GatewayId peer, uint endpoint, ReadOnlySpan<byte> frame, bool realTime) => sim.Send(Gateway, peer, frame, Id, endpoint, datagram: realTime);
    }

    private sealed class SimGateway(FederationSim sim, GatewayId id) : IGatewayHost, IControlHost
    {
        public GatewayId Id { get; } = id;

        public BroadcastGateway Gateway { get; set; } = null!;

        public bool Alive { get; set; } = true;

        public bool Send(GatewayId peer, ReadOnlySpan<byte> frame) => sim.Send(Id, peer, frame);

        // The simulated links carry datagrams like frames (in order), lost with probability DatagramLoss.
        public bool SendDatagram(GatewayId peer, ReadOnlySpan<byte> frame) => sim.Send(Id, peer, frame, datagram: true);

        public bool SendToDataNode(GatewayId peer, uint node, ReadOnlySpan<byte> frame, bool realTime) => sim.Send(Id, peer, frame, toNode: node, datagram: realTime);

        public bool SendToDataNode(uint node, ReadOnlySpan<byte> frame)
        {
            sim.ToDataNode(Id, node, frame);
            return true;
        }

        public void Disconnect(GatewayId peer)
        {
            sim._links.Remove((Id, peer));
            sim._links.Remove((peer, Id));
            if (sim._gateways.TryGetValue(peer, out var other) && other.Alive)
            {
                other.Gateway.PeerDisconnected(Id, sim.Now);
            }
        }
    }

    /// <summary>An island: an in-memory broadcast medium (address → subscribers), a mediator, clients and sources.</summary>
    public sealed class SimIsland
    {
        private readonly FederationSim _sim;
        private readonly Dictionary<string, List<Action<byte[]>>> _medium = new(StringComparer.Ordinal);
        private readonly Dictionary<uint, Action<byte[]>> _receivers = [];
        private int _nextChannel;

        internal SimIsland(FederationSim sim, IslandId id)
        {
            _sim = sim;
            Id = id;
            Mediator = new Mediator(id);
        }

        public IslandId Id { get; }

        public Mediator Mediator { get; }

        /// <summary>SROUTE costs this island reports, per gateway (none: the null response).</summary>
        public Dictionary<GatewayId, uint> SrouteCosts { get; } = [];

        public int FreeChannels { get; set; } = 64;

        /// <summary>Native packets put on the medium.</summary>
        public long Packets { get; private set; }

        /// <summary>A source in this island sends to a native address (a flow of a native session: "native/flow").</summary>
        public void Publish(string address, byte[] data) => Broadcast(address, data, except: null);

        /// <summary>A client joins through the mediator and, on TRANSLATION, listens on the flow's address; with a
        /// <paramref name="receiver"/> number and a per-receiver session it is reached individually instead.</summary>
        public SimClient Join(SessionName session, int flow = 0, uint receiver = 0)
        {
            var client = new SimClient(session);
            Mediator.Join(session, reply =>
            {
                client.Reply = reply;
                if (reply.Kind == MediatorReplyKind.Translation)
                {
                    client.Address = reply.Addresses[flow];
                    if (receiver != 0 && session.Delivery != SessionDelivery.Tree)
                    {
                        _receivers[receiver] = data => client.Received.Add(data);
                    }
                    else
                    {
                        Listen(reply.Addresses[flow], data => client.Received.Add(data));
                    }
                }
            }, receiver);
            return client;
        }

        /// <summary>A numbered receiver's refresh JOIN.</summary>
        public void Refresh(SessionName session, uint receiver) => Mediator.Join(session, _ => { }, receiver);

        internal void DeliverToReceiver(uint receiver, byte[] data)
        {
            Packets++;
            if (_receivers.TryGetValue(receiver, out var handler))
            {
                _sim.At(_sim.Now, () => handler(data));
            }
        }

        /// <summary>A client's periodic refresh JOIN (soft state); no new subscription.</summary>
        public void Refresh(SessionName session) => Mediator.Join(session, _ => { });

        public void Listen(string address, Action<byte[]> handler)
        {
            if (!_medium.TryGetValue(address, out var list))
            {
                _medium[address] = list = [];
            }

            list.Add(handler);
        }

        internal void Unlisten(string address, Action<byte[]> handler)
        {
            if (_medium.TryGetValue(address, out var list))
            {
                list.Remove(handler);
            }
        }

        internal string? NewChannel()
        {
            if (FreeChannels <= 0)
            {
                return null;
            }

            FreeChannels--;
            return $"island{Id}/ch{++_nextChannel}";
        }

        internal void ReturnChannel() => FreeChannels++;

        internal void Broadcast(string address, byte[] data, Action<byte[]>? except)
        {
            Packets++;
            if (!_medium.TryGetValue(address, out var list))
            {
                return;
            }

            foreach (var handler in list.ToList())
            {
                if (handler != except)
                {
                    _sim.At(_sim.Now, () => handler(data));
                }
            }
        }
    }

    /// <summary>A client of an island: the mediator's answer and what it received.</summary>
    public sealed class SimClient(SessionName session)
    {
        public SessionName Session { get; } = session;

        public MediatorReply? Reply { get; set; }

        public string? Address { get; set; }

        public List<byte[]> Received { get; } = [];
    }

    private sealed class SimNativeNet(SimIsland island, GatewayId gateway) : IReceiverNativeNet
    {
        public bool SendToReceiver(NativeChannel channel, uint receiver, ReadOnlySpan<byte> data)
        {
            island.DeliverToReceiver(receiver, data.ToArray());
            return true;
        }

        public INativeNetUpcalls Upcalls { get; set; } = null!;

        /// <summary>False once the owner (a crashed data node) stopped: its subscriptions hear nothing.</summary>
        public Func<bool> IsAlive { get; set; } = () => true;

        public NativeChannel? AllocateChannel(SessionName session, int flow, ChannelDirection direction)
        {
            string? address = direction == ChannelDirection.Up ? $"{session.NativeName}/{session.Flows[flow]}" : island.NewChannel();
            return address is null ? null : new NativeChannel(session, flow, direction, address);
        }

        public void Subscribe(NativeChannel channel)
        {
            Action<byte[]> handler = data =>
            {
                if (IsAlive())
                {
                    Upcalls.RecvdData(channel, data);
                }
            };
            channel.Handle = handler;
            island.Listen(channel.Address, handler);
        }

        public void Refresh(NativeChannel channel)
        {
        }

        public void Unsubscribe(NativeChannel channel)
        {
            if (channel.Handle is Action<byte[]> handler)
            {
                island.Unlisten(channel.Address, handler);
                channel.Handle = null;
            }
        }

        public void ReclaimChannel(NativeChannel channel)
        {
            if (channel.Direction == ChannelDirection.Down)
            {
                island.ReturnChannel();
            }
        }

        public bool SendData(NativeChannel channel, ReadOnlySpan<byte> data)
        {
            // The medium does not echo a packet to the gateway's own subscription on the channel it sent on.
            island.Broadcast(channel.Address, data.ToArray(), channel.Handle as Action<byte[]>);
            return true;
        }

        public IReadOnlyList<SrouteCost>? GetSroutes(SessionName session, IReadOnlyList<GatewayId> gateways)
            => island.SrouteCosts.Count == 0 ? null : [.. gateways.Where(island.SrouteCosts.ContainsKey).Select(g => new SrouteCost(g, island.SrouteCosts[g]))];

        public override string ToString() => $"sim native net {gateway}";
    }
}
