using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Cluster;

/// <summary>
/// One data node of a clustered gateway (seed §4, §5.3: the "data layer"), a state machine without I/O. It knows no
/// routes and builds no trees: the control node's ASSIGN frames give it, per session, the gateway's flow labels, the
/// upstream peer and its labels, the downstream peers (and the data node that receives at each) and the native
/// addresses; it forwards that session's data exactly as an unclustered gateway would (the reverse-path check, the
/// duplicate filter, the ttl, every tree neighbour but the sender, delivery into the island) and heartbeats the control
/// node. Packets it takes from its island leave stamped with its own number as the origin and a sequence that starts
/// at the control node's base, so a replacement node never collides with the crashed one in downstream duplicate
/// filters. Events: <see cref="OnControlFrame"/>, <see cref="OnData"/>, <see cref="RecvdData"/>, <see cref="Tick"/>.
/// </summary>
public sealed class DataNode : INativeNetUpcalls
{
    private readonly GatewayId _id;
    private readonly GatewayId _gateway;
    private readonly ClusterOptions _options;
    private readonly IDataNodeHost _host;
    private readonly INativeNet _native;
    private readonly int _maxPayload;
    private readonly Dictionary<SessionName, NodeSession> _sessions = [];
    private readonly Dictionary<FlowLabel, (NodeSession Session, int Flow)> _myLabels = [];
    private readonly Dictionary<(GatewayId, FlowLabel), (NodeSession Session, int Flow)> _upstreamLabels = [];
    private readonly DuplicateFilter _duplicates;
    private readonly byte[] _scratch;
    private readonly ClusterAuthenticator? _auth;
    private uint _nextSequence;
    private bool _seeded;
    private TimeSpan _now;
    private TimeSpan _lastHeartbeat = TimeSpan.MinValue;
    private uint _term;
    private TimeSpan _lastLeader = TimeSpan.MinValue;

    /// <param name="firstAuthCounter">With <see cref="ClusterOptions.ClusterSecret"/>: the counter of the first frame
    /// this node seals (the runtime passes <see cref="ClusterAuthenticator.WallClockCounter"/>).</param>
    public DataNode(uint id, GatewayId gateway, ClusterOptions options, IDataNodeHost host, INativeNet native, int maxOrigins = 1024, int maxPayloadBytes = 65_000, ulong firstAuthCounter = 1)
    {
        if (id == 0)
        {
            throw new ArgumentOutOfRangeException(nameof(id), "data node number must be 1 or more");
        }

        if (gateway.Value == 0 || gateway.Value == id)
        {
            throw new ArgumentOutOfRangeException(nameof(gateway), "the gateway number must be 1 or more and differ from the data node's");
        }

        if (maxPayloadBytes < 1 || maxPayloadBytes > PeerCodec.MaxFrameBytes - DataHeader.Size)
        {
            throw new ArgumentOutOfRangeException(nameof(maxPayloadBytes), $"maxPayloadBytes must be between 1 and {PeerCodec.MaxFrameBytes - DataHeader.Size}");
        }

        _id = new GatewayId(id);
        _gateway = gateway;
        _options = options;
        _host = host;
        _native = native;
        _maxPayload = maxPayloadBytes;
        _duplicates = new DuplicateFilter(maxOrigins);
        _scratch = new byte[DataHeader.Size + maxPayloadBytes];
        _auth = options.ClusterSecret is { } secret ? new ClusterAuthenticator(secret, firstAuthCounter) : null;
    }

    public uint Id => _id.Value;

    public DataNodeCounters Counters { get; } = new();

    public int SessionCount => _sessions.Count;

    public IEnumerable<SessionName> Sessions => _sessions.Keys;

    /// <summary>The highest control term this node has heard and follows (0: none yet). Frames of a lower term are
    /// dropped and counted (<see cref="DataNodeCounters.StaleTerm"/>): a returning old primary moves nothing.</summary>
    public uint Term => _term;

    /// <summary>A frame from the control node. Never throws on bad input: counted and dropped.</summary>
    public void OnControlFrame(ReadOnlySpan<byte> frame, TimeSpan now)
    {
        _now = now;
        ulong counter = 0;
        if (_auth is not null && _auth.Open(frame, out frame, out counter) != ClusterAuthError.None)
        {
            Counters.Unauthenticated++;
            return;
        }

        var error = ClusterCodec.Decode(frame, out var message);
        if (error != FrameError.None)
        {
            Counters.Malformed[(int)error]++;
            return;
        }

        // Two control nodes seal with counters of their own; a term's parity names its control node (odd: the one
        // configured primary, even: the standby), so each gets its own replay window.
        if (_auth is not null && !_auth.Fresh(message!.Term & 1, counter))
        {
            Counters.Replayed++;
            return;
        }

        if (message!.Node != _id.Value)
        {
            Counters.AssignsForOtherNode++;
            return;
        }

        if (_options.ControlNodes == 1)
        {
            // One control node: terms mean nothing (it always leads term 1); a frame is not judged by one.
        }
        else if (message.Term < _term)
        {
            Counters.StaleTerm++; // an old primary that has not yet stepped down
            return;
        }

        _lastLeader = now;
        if (_options.ControlNodes == 2 && message.Term > _term)
        {
            _term = message.Term;
            Counters.TermsFollowed++;
            if (_sessions.Count > 0)
            {
                // A control node took over: tell it what we hold, so the sessions stay here with their labels.
                var held = _sessions.Values.Select(x => new ReportedSession(x.Name, x.Labels, [.. x.Local.Select(c => c.Address)])).ToList();
                foreach (var report in ClusterCodec.Reports(_id.Value, _term, _nextSequence + 1, held, ClusterAuthenticator.Overhead))
                {
                    Counters.ReportsSent++;
                    _host.SendToControl(_auth is null ? report : _auth.Seal(report));
                }
            }
        }

        Counters.ControlFrames++;
        switch (message)
        {
            case LeadMessage:
                Counters.Leads++;
                break;
            case AssignMessage m:
                Assign(m);
                break;
            case ReleaseMessage m:
                Counters.Releases++;
                if (_sessions.TryGetValue(m.Session, out var s))
                {
                    Remove(s);
                }

                break;
            case ResetMessage:
                Counters.Resets++;
                foreach (var x in _sessions.Values.ToList())
                {
                    Remove(x);
                }

                break;
            default:
                Counters.Malformed[(int)FrameError.UnknownType]++; // a HEARTBEAT sent to a data node
                break;
        }
    }

    /// <summary>Heartbeats and soft-state expiry of sessions the control node stopped refreshing.</summary>
    public void Tick(TimeSpan now)
    {
        _now = now;
        if (_lastHeartbeat == TimeSpan.MinValue || now - _lastHeartbeat >= _options.HeartbeatInterval)
        {
            _lastHeartbeat = now;
            Counters.HeartbeatsSent++;
            bool heard = _term != 0 && _lastLeader != TimeSpan.MinValue && now - _lastLeader <= 2 * _options.HeartbeatInterval;
            var heartbeat = ClusterCodec.Heartbeat(new HeartbeatMessage(_id.Value, (uint)_sessions.Count, (uint)Counters.DataForwarded) { Term = _term, LeaderHeard = heard });
            _host.SendToControl(_auth is null ? heartbeat : _auth.Seal(heartbeat));
        }

        foreach (var s in _sessions.Values.ToList())
        {
            if (now - s.LastAssign > _options.SessionHold)
            {
                Counters.ExpiredSessions++;
                Remove(s);
            }
        }
    }

    /// <summary>A DATA frame from the peer gateway <paramref name="peer"/> (from its control node or one of its data nodes).</summary>
    public void OnData(GatewayId peer, ReadOnlySpan<byte> frame, TimeSpan now)
    {
        _now = now;
        Counters.DataReceived++;
        if (PeerCodec.PeekType(frame, out var type) != FrameError.None || type != FrameType.Data || !DataHeader.TryRead(frame, out var header))
        {
            Counters.Malformed[(int)FrameError.BadValue]++;
            return;
        }

        int payload = frame.Length - DataHeader.Size;
        if (payload > _maxPayload)
        {
            Counters.OversizedPayload++;
            return;
        }

        NodeSession session;
        int flow;
        if (_upstreamLabels.TryGetValue((peer, header.Label), out var up))
        {
            (session, flow) = up;
        }
        else if (_myLabels.TryGetValue(header.Label, out var mine))
        {
            (session, flow) = mine;
            if (!session.Name.MultiSource || !session.Downstream.Any(d => d.Gateway == peer))
            {
                Counters.RpfDropped++;
                return;
            }
        }
        else
        {
            Counters.UnknownLabel++;
            return;
        }

        if (!_duplicates.FirstTime(header.Origin, header.Sequence))
        {
            Counters.DuplicatesDropped++;
            return;
        }

        if (header.Ttl <= 1)
        {
            Counters.TtlExpired++;
            return;
        }

        frame[DataHeader.Size..].CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(session, flow, header with { Ttl = (byte)(header.Ttl - 1) }, payload, from: peer, deliverLocally: true);
    }

    /// <summary>A packet from a native channel: a root's Up channel, or a local source of a multi-source session.</summary>
    public void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data)
    {
        if (!_sessions.TryGetValue(channel.Session, out var session))
        {
            Counters.UnknownLabel++;
            return;
        }

        if (data.Length > _maxPayload)
        {
            Counters.OversizedPayload++;
            return;
        }

        bool fromRoot = session.Root && channel.Direction == ChannelDirection.Up;
        if (!fromRoot && !session.Name.MultiSource)
        {
            return;
        }

        Counters.DataFromIsland++;
        var header = new DataHeader(0, DataHeader.DefaultTtl, default, _id, ++_nextSequence);
        _duplicates.FirstTime(_id, header.Sequence);
        data.CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(session, channel.Flow, header, data.Length, from: null, deliverLocally: false);
    }

    void INativeNetUpcalls.RecvdJoinRequest(JoinRequest request)
    {
        // Mediator traffic belongs to the control node; a data node's plug-in should not deliver it.
    }

    void INativeNetUpcalls.RecvdLeaveRequest(SessionName session)
    {
    }

    private void Assign(AssignMessage m)
    {
        Counters.Assigns++;
        if (!_seeded)
        {
            _seeded = true;
            _nextSequence = m.SequenceBase;
        }

        if (!_sessions.TryGetValue(m.Session, out var s))
        {
            if (_sessions.Count >= _options.MaxSessionsPerNode || m.Labels.Any(_myLabels.ContainsKey))
            {
                Counters.AssignsRefused++;
                return;
            }

            s = new NodeSession(m.Session);
            _sessions[m.Session] = s;
        }
        else if (!s.Labels.SequenceEqual(m.Labels))
        {
            // The control node re-labelled the session (a new tree): start over.
            Remove(s);
            if (m.Labels.Any(_myLabels.ContainsKey))
            {
                Counters.AssignsRefused++;
                return;
            }

            s = new NodeSession(m.Session);
            _sessions[m.Session] = s;
        }

        s.LastAssign = _now;
        s.Root = m.Root;
        if (s.Labels.Length == 0)
        {
            s.Labels = m.Labels;
            for (int i = 0; i < m.Labels.Length; i++)
            {
                _myLabels[m.Labels[i]] = (s, i);
            }
        }

        foreach (var l in s.UpstreamLabels)
        {
            _upstreamLabels.Remove((s.Upstream, l));
        }

        s.Upstream = m.Upstream;
        s.UpstreamEndpoint = m.UpstreamEndpoint;
        s.UpstreamLabels = m.UpstreamLabels;
        for (int i = 0; i < m.UpstreamLabels.Length; i++)
        {
            _upstreamLabels[(m.Upstream, m.UpstreamLabels[i])] = (s, i);
        }

        s.Downstream = m.Downstream;
        foreach (var p in m.PeerNodes)
        {
            _host.LearnPeerNode(p.Gateway, p.Node, p.Address);
        }
        s.Local = Channels(s, s.Local, m.LocalAddresses, ChannelDirection.Down, subscribe: m.Session.MultiSource);
        s.RootChannels = Channels(s, s.RootChannels, m.RootAddresses, ChannelDirection.Up, subscribe: true);
    }

    // Keeps the channels when the addresses did not change; otherwise unsubscribes the old and opens the new.
    private NativeChannel[] Channels(NodeSession s, NativeChannel[] old, string[] addresses, ChannelDirection direction, bool subscribe)
    {
        if (old.Select(c => c.Address).SequenceEqual(addresses, StringComparer.Ordinal))
        {
            return old;
        }

        Close(old, subscribe);
        var channels = new NativeChannel[addresses.Length];
        for (int i = 0; i < addresses.Length; i++)
        {
            channels[i] = new NativeChannel(s.Name, i, direction, addresses[i]);
            if (subscribe)
            {
                _native.Subscribe(channels[i]);
            }
        }

        return channels;
    }

    private void Close(NativeChannel[] channels, bool subscribed)
    {
        if (subscribed)
        {
            foreach (var c in channels)
            {
                _native.Unsubscribe(c);
            }
        }
    }

    private void Remove(NodeSession s)
    {
        _sessions.Remove(s.Name);
        foreach (var l in s.Labels)
        {
            _myLabels.Remove(l);
        }

        foreach (var l in s.UpstreamLabels)
        {
            _upstreamLabels.Remove((s.Upstream, l));
        }

        Close(s.Local, s.Name.MultiSource);
        Close(s.RootChannels, subscribed: true);
        s.Local = [];
        s.RootChannels = [];
    }

    private void Forward(NodeSession s, int flow, DataHeader header, int payload, GatewayId? from, bool deliverLocally)
    {
        var frame = _scratch.AsSpan(0, DataHeader.Size + payload);
        bool realTime = s.Name.RealTime;
        foreach (var d in s.Downstream)
        {
            if (d.Gateway == from)
            {
                continue;
            }

            (header with { Label = s.Labels[flow] }).Write(frame);
            Send(d.Gateway, d.Endpoint, frame, realTime);
        }

        if (s.Name.MultiSource && s.Upstream.Value != 0 && s.Upstream != from && s.UpstreamLabels.Length > flow)
        {
            (header with { Label = s.UpstreamLabels[flow] }).Write(frame);
            Send(s.Upstream, s.UpstreamEndpoint, frame, realTime);
        }

        if (deliverLocally && s.Local.Length > flow)
        {
            Deliver(s.Local[flow], frame[DataHeader.Size..]);
        }

        if (deliverLocally && s.Root && s.Name.MultiSource && s.RootChannels.Length > flow)
        {
            Deliver(s.RootChannels[flow], frame[DataHeader.Size..]);
        }
    }

    private void Deliver(NativeChannel channel, ReadOnlySpan<byte> payload)
    {
        if (_native.SendData(channel, payload))
        {
            Counters.DataDelivered++;
        }
        else
        {
            Counters.NativeSendFailed++;
        }
    }

    private void Send(GatewayId peer, uint endpoint, ReadOnlySpan<byte> frame, bool realTime)
    {
        if (_host.SendData(peer, endpoint, frame, realTime))
        {
            Counters.DataForwarded++;
        }
        else
        {
            Counters.SendFailed++;
        }
    }

    private sealed class NodeSession(SessionName name)
    {
        public SessionName Name { get; } = name;

        public bool Root { get; set; }

        public FlowLabel[] Labels { get; set; } = [];

        public GatewayId Upstream { get; set; }

        public uint UpstreamEndpoint { get; set; }

        public FlowLabel[] UpstreamLabels { get; set; } = [];

        public DownstreamPeer[] Downstream { get; set; } = [];

        public NativeChannel[] Local { get; set; } = [];

        public NativeChannel[] RootChannels { get; set; } = [];

        public TimeSpan LastAssign { get; set; }
    }
}
