using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace QuickSilver.Membership.Service;

/// <summary>
/// The GMS server (QSM §2.1), an I/O-free state machine: it registers nodes, collects joins, leaves and failures,
/// applies them in batches at most once per <see cref="GmsOptions.BatchInterval"/>, and sends every affected node its
/// incremental update over the reliable control channel. Failure detection: a node silent (no heartbeat or other
/// message) for <see cref="GmsOptions.FailureTimeout"/>, or whose channel reports it failed, is declared dead and
/// removed from every view. Runs embedded in a node's core or standalone. Core thread only.
/// <para>What a client can make it do is bounded (<see cref="GmsOptions"/>, docs/security.md): registered nodes in total
/// and per IP address, groups per node, group-name length, and joins and Hellos per second per node; a request beyond a
/// limit is refused with a <see cref="GmsMessageKind.Refused"/> naming the limit, which the client raises as a
/// <see cref="GmsRefusedException"/>. A Hello with a new incarnation from a member's address replaces the member only
/// when it arrives on a conversation the reliable channel opened with a valid handshake cookie, i.e. from a host that
/// receives at that address; a spoofed one never reaches this class.</para>
/// </summary>
internal sealed class GmsServer
{
    private readonly IAlarmScheduler _scheduler;
    private readonly IControlChannel _channel;
    private readonly GmsOptions _options;
    private readonly ILogger _log;
    private readonly Dictionary<NetAddress, Session> _sessions = new();
    private readonly List<MembershipRequest> _pending = new();
    private readonly Alarm _batchAlarm;
    private readonly Alarm _failureAlarm;
    private readonly Dictionary<uint, int> _nodesPerIp = new();
    private readonly long[] _refusals = new long[Enum.GetValues<GmsRefusal>().Max(r => (int)r) + 1];
    private readonly TimeSpan?[] _refusalLogged = new TimeSpan?[Enum.GetValues<GmsRefusal>().Max(r => (int)r) + 1];

    /// <param name="epoch">This GMS incarnation's number (random in production, seeded in simulation); a client that
    /// sees a new epoch drops the views it kept from the previous one.</param>
    public GmsServer(IAlarmScheduler scheduler, IControlChannel channel, ulong epoch, GmsOptions? options = null, ILogger? logger = null)
    {
        Epoch = epoch;
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _channel = channel ?? throw new ArgumentNullException(nameof(channel));
        _options = options ?? new GmsOptions();
        _options.Validate();
        _log = logger ?? NullLogger.Instance;
        State = new MembershipState(new MulticastAddressPool(_options.MulticastPoolStart, _options.MulticastPoolSize), _options.PinRegion, _options.UseMulticast);
        _batchAlarm = new Alarm(_ => ApplyBatch());
        _failureAlarm = new Alarm(_ => DetectFailures());
        _channel.SetReceiver(OnMessage, OnPeerFailed);
        _scheduler.ScheduleAfter(_failureAlarm, _options.HeartbeatInterval);
    }

    public MembershipState State { get; }

    public ulong Epoch { get; }

    public DropCounters Drops { get; } = new();

    /// <summary>Batches applied so far.</summary>
    public long BatchesApplied { get; private set; }

    /// <summary>The largest message this GMS has sent (a view update, or a part of one).</summary>
    public int LargestMessageBytes { get; private set; }

    /// <summary>Nodes declared dead by the failure detector (timeouts and channel failures).</summary>
    public long FailuresDetected { get; private set; }

    /// <summary>Requests refused because of <paramref name="reason"/>'s limit.</summary>
    public long Refusals(GmsRefusal reason) => Volatile.Read(ref _refusals[(int)reason]);

    /// <summary>Hellos of registered nodes dropped by the request rate limit (a node that keeps saying Hello).</summary>
    public long HellosRateLimited { get; private set; }

    private void OnMessage(NetAddress from, ReadOnlySpan<byte> bytes)
    {
        var message = GmsCodec.TryDecode(bytes, _options.MaxMessageBytes);
        if (message is null)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (message.Kind == GmsMessageKind.Hello)
        {
            OnHello(from, message.Number);
            return;
        }

        if (!_sessions.TryGetValue(from, out var session))
        {
            // A node we declared dead (or never knew) is still talking: tell it to register again (QSM §2.3.2).
            Send(from, new GmsMessage { Kind = GmsMessageKind.Bye });
            return;
        }

        session.LastHeard = _scheduler.Now;
        switch (message.Kind)
        {
            case GmsMessageKind.Join when !string.IsNullOrEmpty(message.GroupName):
                OnJoin(from, session, message.GroupName);
                break;
            case GmsMessageKind.Leave when !string.IsNullOrEmpty(message.GroupName):
                if (session.Groups.Remove(message.GroupName))
                {
                    Enqueue(new LeaveRequest(session.Node, message.GroupName));
                }

                break;
            case GmsMessageKind.Heartbeat:
                break;
            case GmsMessageKind.Bye:
                Remove(from, session, "left");
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    /// <summary>A join within the node's limits goes into the next batch; one it already asked for is not repeated.</summary>
    private void OnJoin(NetAddress from, Session session, string group)
    {
        if (session.Groups.Contains(group))
        {
            return;
        }

        if (System.Text.Encoding.UTF8.GetByteCount(group) > _options.MaxGroupNameBytes)
        {
            Refuse(from, session.Node, GmsRefusal.GroupNameTooLong, group, _options.MaxGroupNameBytes);
            return;
        }

        if (session.Groups.Count >= _options.MaxGroupsPerNode)
        {
            Refuse(from, session.Node, GmsRefusal.TooManyGroups, group, _options.MaxGroupsPerNode);
            return;
        }

        if (!session.TakeRequest(_scheduler.Now, _options))
        {
            Refuse(from, session.Node, GmsRefusal.RateLimited, group, _options.MaxRequestsPerSecond);
            return;
        }

        session.Groups.Add(group);
        Enqueue(new JoinRequest(session.Node, group));
    }

    private void OnHello(NetAddress from, ulong incarnation)
    {
        if (_sessions.TryGetValue(from, out var existing))
        {
            existing.LastHeard = _scheduler.Now;
            if (!existing.TakeRequest(_scheduler.Now, _options))
            {
                HellosRateLimited++;
                Drops.Increment(DropReason.ReceiveBufferFull);
                return;
            }

            if (existing.Incarnation == incarnation)
            {
                SendWelcome(from, existing); // a retransmitted Hello: answer the same
                return;
            }

            // Same address, new process: the old one is gone. The Hello came over a conversation whose handshake proved
            // the sender receives at this address (a spoofed datagram opens none), and it is that process's conversation
            // now: keep it.
            Remove(from, existing, "restarted", forgetChannel: false);
        }

        if (_sessions.Count >= _options.MaxNodes)
        {
            Refuse(from, null, GmsRefusal.TooManyNodes, null, _options.MaxNodes);
            return;
        }

        if (_nodesPerIp.GetValueOrDefault(from.Ip) >= _options.MaxNodesPerIp)
        {
            Refuse(from, null, GmsRefusal.TooManyNodesFromAddress, null, _options.MaxNodesPerIp);
            return;
        }

        var node = State.RegisterNode(from);
        var session = new Session(node, incarnation, _options.RequestBurst) { LastHeard = _scheduler.Now };
        _sessions[from] = session;
        _nodesPerIp[from.Ip] = _nodesPerIp.GetValueOrDefault(from.Ip) + 1;
        GmsLog.Registered(_log, node, from);
        SendWelcome(from, session);
    }

    /// <summary>Tells a node its request was refused (nothing of it applied), counted, and logged at most once per limit
    /// every 10 seconds.</summary>
    private void Refuse(NetAddress to, NodeId? node, GmsRefusal reason, string? group, long limit)
    {
        _refusals[(int)reason]++;
        var now = _scheduler.Now;
        if (_refusalLogged[(int)reason] is not { } logged || now - logged >= TimeSpan.FromSeconds(10))
        {
            _refusalLogged[(int)reason] = now;
            GmsLog.Refused(_log, to, node, reason, limit, _refusals[(int)reason]);
        }

        Send(to, new GmsMessage { Kind = GmsMessageKind.Refused, Number = (ulong)reason, GroupName = group, Limit = limit });
    }

    private void SendWelcome(NetAddress to, Session session)
        => Send(to, new GmsMessage
        {
            Kind = GmsMessageKind.Welcome,
            Number = session.Node.Value,
            HeartbeatMs = (int)_options.HeartbeatInterval.TotalMilliseconds,
            Epoch = Epoch,
        });

    private void OnPeerFailed(NetAddress peer)
    {
        if (_sessions.TryGetValue(peer, out var session))
        {
            FailuresDetected++;
            Remove(peer, session, "unreachable");
        }
    }

    private void DetectFailures()
    {
        var now = _scheduler.Now;
        List<(NetAddress, Session)>? dead = null;
        foreach (var (address, session) in _sessions)
        {
            if (now - session.LastHeard > _options.FailureTimeout)
            {
                (dead ??= new()).Add((address, session));
            }
        }

        if (dead is not null)
        {
            foreach (var (address, session) in dead)
            {
                FailuresDetected++;
                Remove(address, session, "silent");
            }
        }

        _scheduler.ScheduleAfter(_failureAlarm, _options.HeartbeatInterval);
    }

    private void Remove(NetAddress address, Session session, string why, bool forgetChannel = true)
    {
        _sessions.Remove(address);
        int left = _nodesPerIp.GetValueOrDefault(address.Ip) - 1;
        if (left <= 0)
        {
            _nodesPerIp.Remove(address.Ip);
        }
        else
        {
            _nodesPerIp[address.Ip] = left;
        }

        if (forgetChannel)
        {
            _channel.Forget(address);
        }

        GmsLog.Removed(_log, session.Node, address, why);
        Enqueue(new NodeDownRequest(session.Node));
    }

    private void Enqueue(MembershipRequest request)
    {
        _pending.Add(request);
        if (!_batchAlarm.IsScheduled)
        {
            _scheduler.ScheduleAfter(_batchAlarm, _options.BatchInterval);
        }
    }

    private void ApplyBatch()
    {
        if (_pending.Count == 0)
        {
            return;
        }

        var change = State.Apply(_pending);
        _pending.Clear();
        BatchesApplied++;
        foreach (var update in change.Updates.Values)
        {
            SendUpdate(State.AddressOf(update.Node), update);
        }
    }

    /// <summary>
    /// Sends an update in as many messages as the control channel needs: an update larger than one message is halved,
    /// region views before group views (a group view refers to region views, so those must arrive first), and the
    /// groups left travel with the first part. The client applies each part as it comes.
    /// </summary>
    private void SendUpdate(NetAddress to, NodeUpdate update)
    {
        var bytes = GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Update, Update = GmsCodec.ToWire(update) });
        int items = update.RegionViews.Length + update.GroupViews.Length;
        if (bytes.Length <= _channel.MaxMessageBytes || items <= 1)
        {
            if (bytes.Length > _channel.MaxMessageBytes)
            {
                GmsLog.ViewTooLarge(_log, update.Node, bytes.Length, _channel.MaxMessageBytes);
                Drops.Increment(DropReason.Oversized);
                return;
            }

            Send(to, bytes);
            return;
        }

        int half = items / 2;
        int regionsFirst = Math.Min(half, update.RegionViews.Length);
        var first = update with
        {
            RegionViews = update.RegionViews[..regionsFirst],
            GroupViews = update.GroupViews[..(half - regionsFirst)],
        };
        var second = update with
        {
            RegionViews = update.RegionViews[regionsFirst..],
            GroupViews = update.GroupViews[(half - regionsFirst)..],
            LeftGroups = [],
        };
        SendUpdate(to, first);
        SendUpdate(to, second);
    }

    private void Send(NetAddress to, GmsMessage message) => Send(to, GmsCodec.Encode(message));

    private void Send(NetAddress to, byte[] message)
    {
        LargestMessageBytes = Math.Max(LargestMessageBytes, message.Length);
        if (!_channel.Send(to, message))
        {
            // The node cannot keep up with its control channel: it would miss views, so it is treated as failed.
            Drops.Increment(DropReason.SendQueueFull);
            if (_sessions.TryGetValue(to, out var session))
            {
                FailuresDetected++;
                Remove(to, session, "control channel full");
            }
        }
    }

    private sealed class Session(NodeId node, ulong incarnation, double burst)
    {
        private double _tokens = burst;
        private TimeSpan _tokensAt;

        public NodeId Node { get; } = node;
        public ulong Incarnation { get; } = incarnation;
        public TimeSpan LastHeard { get; set; }

        /// <summary>The groups the node is in or has asked to join (at most MaxGroupsPerNode names).</summary>
        public HashSet<string> Groups { get; } = new(StringComparer.Ordinal);

        /// <summary>Takes one request from the node's token bucket (MaxRequestsPerSecond, RequestBurst deep).</summary>
        public bool TakeRequest(TimeSpan now, GmsOptions options)
        {
            _tokens = Math.Min(options.RequestBurst, _tokens + ((now - _tokensAt).TotalSeconds * options.MaxRequestsPerSecond));
            _tokensAt = now;
            if (_tokens < 1)
            {
                return false;
            }

            _tokens--;
            return true;
        }
    }
}
