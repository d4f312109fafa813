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
/// can assert no packet crossed a link twice. A clustered gateway may have a standby control node
/// (<see cref="AddClusteredGateway"/> with <c>standby</c>): the same gateway number served by two instances, a peering
/// link bound to whichever accepted it, and peers redialling the gateway's other control node when a link to it drops
/// (as a runtime configured with both addresses does).
/// </summary>
public sealed class FederationSim
{
    private readonly PriorityQueue<Action, (TimeSpan, long)> _events = new();
    private readonly Dictionary<GatewayId, SimGateway> _gateways = [];
    private readonly Dictionary<(GatewayId, GatewayId), SimLinkState> _links = [];
    private readonly Dictionary<uint, SimDataNode> _dataNodes = [];
    private readonly Dictionary<GatewayId, SimGateway> _standbys = [];
    private readonly Dictionary<(GatewayId, GatewayId), (TimeSpan Latency, LinkCosts Costs)> _peerings = [];
    private readonly Dictionary<(uint, GatewayId), SimLinkState> _nodePaths = [];
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

    /// <summary>The standby control node of gateway <paramref name="id"/>.</summary>
    public BroadcastGateway Standby(uint id) => _standbys[new GatewayId(id)].Gateway;

    /// <summary>How long a peer waits before redialling a gateway with a standby after its link dropped (and between
    /// attempts while neither control node accepts).</summary>
    public TimeSpan RedialInterval { get; set; } = TimeSpan.FromSeconds(1);

    /// <summary>Peering links established (HELLO both ways), counting redials.</summary>
    public long LinksEstablished { get; private set; }

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
    /// <param name="standby">Adds a standby control node for the same gateway number (<see cref="ClusterOptions.ControlNodes"/>
    /// = 2); <see cref="Crash"/> and <see cref="Revive"/> act on the primary, <see cref="CrashStandby"/> on the standby.</param>
    public BroadcastGateway AddClusteredGateway(uint id, SimIsland island, uint[] dataNodes, Func<GatewayOptions, GatewayOptions>? configure = null, Func<ClusterOptions, ClusterOptions>? cluster = null, bool standby = false)
    {
        var options = new GatewayOptions { Gateway = new GatewayId(id), Island = island.Id };
        options = configure?.Invoke(options) ?? options;
        var clusterOptions = new ClusterOptions { DataNodes = dataNodes, ControlNodes = standby ? 2 : 1 };
        clusterOptions = cluster?.Invoke(clusterOptions) ?? clusterOptions;
        var sim = new SimGateway(this, options.Gateway);
        var native = new SimNativeNet(island, options.Gateway);
        sim.Gateway = new BroadcastGateway(options, sim, native, clusterOptions, sim);
        native.Upcalls = sim.Gateway;
        _gateways[options.Gateway] = sim;
        ScheduleTick(sim);
        if (standby)
        {
            var second = new SimGateway(this, options.Gateway);
            var secondNative = new SimNativeNet(island, options.Gateway);
            second.Gateway = new BroadcastGateway(options, second, secondNative, clusterOptions with { Standby = true }, second);
            secondNative.Upcalls = second.Gateway;
            _standbys[options.Gateway] = second;
            ScheduleTick(second);
            island.Mediator.AddGateway(options.Gateway, new ActiveControl(this, options.Gateway));
        }
        else
        {
            island.Mediator.AddGateway(options.Gateway, sim.Gateway);
        }

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

    /// <summary>Injects raw bytes as a frame to the standby control node of <paramref name="gateway"/>.</summary>
    public void InjectToStandby(uint gateway, byte[] frame) => _standbys[new GatewayId(gateway)].Gateway.OnDataNodeFrame(frame, Now);

    /// <summary>Injects raw bytes as a control frame to data node <paramref name="node"/> (hostile-input tests).</summary>
    public void InjectToDataNode(uint node, byte[] frame) => _dataNodes[node].Node.OnControlFrame(frame, Now);

    /// <summary>Peers <paramref name="a"/> and <paramref name="b"/> (HELLO both ways after one latency).</summary>
    public void Connect(uint a, uint b, TimeSpan latency, LinkCosts? costs = null)
    {
        var ia = new GatewayId(a);
        var ib = new GatewayId(b);
        var c = costs ?? LinkCosts.Default;
        _peerings[(ia, ib)] = (latency, c);
        Dial(ia, ib, latency, c);
    }

    private void Dial(GatewayId ia, GatewayId ib, TimeSpan latency, LinkCosts c)
    {
        var ab = new SimLinkState(latency);
        var ba = new SimLinkState(latency);
        _links[(ia, ib)] = ab;
        _links[(ib, ia)] = ba;
        At(Now + latency, () =>
        {
            if (!_links.TryGetValue((ia, ib), out var now) || now != ab)
            {
                return; // cut (or redialled) meanwhile
            }

            var ga = Accepting(ia);
            var gb = Accepting(ib);
            if (ga is null || gb is null)
            {
                _links.Remove((ia, ib));
                _links.Remove((ib, ia));
                Redial(ia, ib);
                return;
            }

            ab.From = ba.To = ga;
            ab.To = ba.From = gb;
            bool okA = ga.Gateway.PeerConnected(gb.Id, gb.Gateway.Island, c, Now);
            bool okB = gb.Gateway.PeerConnected(ga.Id, ga.Gateway.Island, c, Now);
            if (okA && okB)
            {
                LinksEstablished++;
            }
            else if (HasStandby(ia) || HasStandby(ib))
            {
                // Refused (a control node stepped down between the check and the HELLO): close and try again later.
                _links.Remove((ia, ib));
                _links.Remove((ib, ia));
                if (okA)
                {
                    ga.Gateway.PeerDisconnected(ib, Now);
                }

                if (okB)
                {
                    gb.Gateway.PeerDisconnected(ia, Now);
                }

                Redial(ia, ib);
            }
        });
    }

    private bool HasStandby(GatewayId id) => _standbys.ContainsKey(id);

    /// <summary>A configured peering that dropped is dialled again after <see cref="RedialInterval"/> when one side has a
    /// standby control node (its peers know both addresses); other links stay down, as before.</summary>
    private void Redial(GatewayId a, GatewayId b)
    {
        var key = _peerings.ContainsKey((a, b)) ? (a, b) : (b, a);
        if (!_peerings.TryGetValue(key, out var p) || !(HasStandby(a) || HasStandby(b)))
        {
            return;
        }

        At(Now + RedialInterval, () =>
        {
            if (_peerings.ContainsKey(key) && !_links.ContainsKey(key))
            {
                Dial(key.Item1, key.Item2, p.Latency, p.Costs);
            }
        });
    }

    private IEnumerable<SimGateway> Instances(GatewayId id)
    {
        if (_gateways.TryGetValue(id, out var g))
        {
            yield return g;
        }

        if (_standbys.TryGetValue(id, out var s))
        {
            yield return s;
        }
    }

    /// <summary>The instance of <paramref name="id"/> that takes a peering link now: alive and active (the leader with the
    /// highest term when, for a moment, two think they lead).</summary>
    private SimGateway? Accepting(GatewayId id)
        => Instances(id).Where(g => g.Alive && g.Gateway.IsActive).OrderByDescending(g => g.Gateway.Cluster?.Term ?? 0).FirstOrDefault();

    /// <summary>Closes the link: both ends learn at once (a TCP reset).</summary>
    public void Cut(uint a, uint b)
    {
        var ia = new GatewayId(a);
        var ib = new GatewayId(b);
        _peerings.Remove((ia, ib));
        _peerings.Remove((ib, ia));
        _links.Remove((ia, ib), out var ab);
        _links.Remove((ib, ia));
        (ab?.From ?? _gateways[ia]).Gateway.PeerDisconnected(ib, Now);
        (ab?.To ?? _gateways[ib]).Gateway.PeerDisconnected(ia, Now);
    }

    /// <summary>The gateway stops: no ticks, no frames in or out. Its peers notice only when keep-alives stop.</summary>
    public void Crash(uint id) => _gateways[new GatewayId(id)].Alive = false;

    /// <summary>The (primary) gateway process dies and its host resets its connections: peers learn at once (a TCP reset)
    /// and, where the gateway has a standby, redial.</summary>
    public void CrashClosingLinks(uint id)
    {
        var g = _gateways[new GatewayId(id)];
        g.Alive = false;
        foreach (var ((from, to), link) in _links.Where(l => l.Value.From == g).ToList())
        {
            _links.Remove((from, to));
            _links.Remove((to, from));
            if (link.To is { Alive: true } other)
            {
                other.Gateway.PeerDisconnected(from, Now);
            }

            Redial(from, to);
        }
    }

    /// <summary>The standby control node of <paramref name="id"/> stops.</summary>
    public void CrashStandby(uint id) => _standbys[new GatewayId(id)].Alive = false;

    /// <summary>A crashed (primary) gateway instance runs again with the state it had (a process that was paused or cut
    /// off, not restarted): its ticks resume and it believes what it believed.</summary>
    public void Revive(uint id)
    {
        var g = _gateways[new GatewayId(id)];
        if (!g.Alive)
        {
            g.Alive = true;
            ScheduleTick(g);
        }
    }

    /// <summary>Injects raw bytes as a frame from <paramref name="from"/> to <paramref name="to"/> (hostile-peer tests).</summary>
    public void Inject(uint from, uint to, byte[] frame) => _gateways[new GatewayId(to)].Gateway.OnFrame(new GatewayId(from), frame, Now);

    /// <summary>The instance of gateway <paramref name="id"/> its peering link to <paramref name="peer"/> is bound to
    /// (null: no link up).</summary>
    public BroadcastGateway? LinkedInstance(uint id, uint peer)
        => _links.TryGetValue((new GatewayId(id), new GatewayId(peer)), out var l) ? l.From?.Gateway : null;

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

    private void ToDataNode(SimGateway sender, uint node, ReadOnlySpan<byte> frame)
    {
        var gateway = sender.Id;
        ClusterFramesSent++;
        ClusterBytesSent += frame.Length;
        var copy = frame.ToArray();
        if (RecordClusterFrames)
        {
            ClusterFrames.Add((node, false, copy));
        }

        At(Now + ClusterLatency, () =>
        {
            if (_dataNodes.TryGetValue(node, out var n) && n.Alive && n.Gateway == gateway && sender.Alive)
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
            if (!node.Alive)
            {
                return;
            }

            foreach (var control in Instances(node.Gateway).Where(c => c.Alive))
            {
                control.Gateway.OnDataNodeFrame(copy, Now); // both control nodes, when there is a standby
            }
        });
    }

    private void ToOtherControl(SimGateway sender, ReadOnlySpan<byte> frame)
    {
        ClusterFramesSent++;
        ClusterBytesSent += frame.Length;
        var copy = frame.ToArray();
        var other = Instances(sender.Id).FirstOrDefault(g => g != sender);
        if (other is null)
        {
            return;
        }

        At(Now + ClusterLatency, () =>
        {
            if (sender.Alive && other.Alive)
            {
                other.Gateway.OnDataNodeFrame(copy, Now);
            }
        });
    }

    private bool Send(SimGateway? sender, GatewayId from, GatewayId to, ReadOnlySpan<byte> frame, uint fromNode = 0, uint toNode = 0, bool datagram = false)
    {
        SimLinkState? link;
        if (fromNode != 0 && HasStandby(from) && _peerings.Keys.FirstOrDefault(k => k == (from, to) || k == (to, from)) is { Item1.Value: not 0 } key)
        {
            // A data node of a gateway with a standby sends on its own sockets, whichever control node holds the link.
            if (!_nodePaths.TryGetValue((fromNode, to), out link))
            {
                _nodePaths[(fromNode, to)] = link = new SimLinkState(_peerings[key].Latency);
            }
        }
        else if (!_links.TryGetValue((from, to), out link) || (fromNode == 0 && link.From is not null && link.From != sender))
        {
            return false;
        }

        if (fromNode == 0 ? !(sender?.Alive ?? false) : !_dataNodes[fromNode].Alive)
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
        var bound = link;
        At(when, () =>
        {
            if (fromNode == 0 ? !_links.TryGetValue((from, to), out var still) || still != bound : !_links.ContainsKey((from, to)) && !_nodePaths.ContainsKey((fromNode, to)))
            {
                return; // the link closed (or was redialled to another control node) while the frame was on it
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

            var receiver = _links.TryGetValue((to, from), out var back) ? back.From ?? _gateways[to] : null;
            if (receiver is { Alive: true } && (fromNode != 0 || sender!.Alive))
            {
                receiver.Gateway.OnFrame(from, copy, Now, fromPeerDataNode: fromNode != 0);
            }
        });
        return true;
    }

    private sealed class SimLinkState(TimeSpan latency)
    {
        public TimeSpan Latency { get; } = latency;

        /// <summary>The gateway instances at each end, once the HELLOs were exchanged.</summary>
        public SimGateway? From { get; set; }

        public SimGateway? To { get; set; }

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
        public bool SendData(GatewayId peer, uint endpoint, ReadOnlySpan<byte> frame, bool realTime) => sim.Send(null, Gateway, peer, frame, Id, endpoint, datagram: realTime);
    }

    private sealed class SimGateway(FederationSim sim, GatewayId id) : IGatewayHost, IControlHost
    {
        public GatewayId Id { get; } = id;

        public BroadcastGateway Gateway { get; set; } = null!;

        public bool Alive { get; set; } = true;

        public bool Send(GatewayId peer, ReadOnlySpan<byte> frame) => sim.Send(this, Id, peer, frame);

        // The simulated links carry datagrams like frames (in order), lost with probability DatagramLoss.
        public bool SendDatagram(GatewayId peer, ReadOnlySpan<byte> frame) => sim.Send(this, Id, peer, frame, datagram: true);

        public bool SendToDataNode(GatewayId peer, uint node, ReadOnlySpan<byte> frame, bool realTime) => sim.Send(this, Id, peer, frame, toNode: node, datagram: realTime);

        public bool SendToDataNode(uint node, ReadOnlySpan<byte> frame)
        {
            sim.ToDataNode(this, node, frame);
            return true;
        }

        public bool SendToOtherControl(ReadOnlySpan<byte> frame)
        {
            sim.ToOtherControl(this, frame);
            return true;
        }

        public void Disconnect(GatewayId peer)
        {
            if (!sim._links.TryGetValue((Id, peer), out var link) || (link.From is not null && link.From != this))
            {
                return; // not our link (it was redialled to the other control node)
            }

            sim._links.Remove((Id, peer));
            sim._links.Remove((peer, Id));
            var other = link.To ?? (sim._gateways.TryGetValue(peer, out var g) ? g : null);
            if (other is { Alive: true })
            {
                other.Gateway.PeerDisconnected(Id, sim.Now);
            }

            sim.Redial(Id, peer);
        }
    }

    /// <summary>The island mediator's handle on a gateway with a standby: client JOINs and LEAVEs go to the control node
    /// that is alive and active (a NO_ROUTE when, during a takeover, none is).</summary>
    private sealed class ActiveControl(FederationSim sim, GatewayId id) : INativeNetUpcalls
    {
        private BroadcastGateway? Leader => sim.Instances(id).Where(g => g.Alive && g.Gateway.IsActive)
            .OrderByDescending(g => g.Gateway.Cluster?.Term ?? 0).FirstOrDefault()?.Gateway;

        public void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data)
        {
        }

        public void RecvdJoinRequest(JoinRequest request)
        {
            if (Leader is { } leader)
            {
                leader.RecvdJoinRequest(request);
            }
            else
            {
                request.Reply(MediatorReply.NoRoute("no active control node"));
            }
        }

        public void RecvdLeaveRequest(SessionName session) => Leader?.RecvdLeaveRequest(session);
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

        public NativeChannel? AdoptChannel(SessionName session, int flow, string address)
        {
            if (island.FreeChannels <= 0)
            {
                return null;
            }

            island.FreeChannels--;
            return new NativeChannel(session, flow, ChannelDirection.Down, address);
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
