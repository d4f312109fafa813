using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
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
/// <para>Replication (docs/membership.md, "Replicated GMS"): the server changes its state only through an
/// <see cref="IGmsLog"/>. It proposes each batch (registrations, joins, leaves, failures) as one <see cref="GmsCommand"/>
/// and applies commands as the log reports them committed, on every replica alike. Only the replica that leads talks
/// to nodes: it keeps the sessions (heartbeat deadlines, request budgets), detects failures and sends the updates of
/// each command once it is committed; the others answer every node with a <see cref="GmsMessageKind.Redirect"/> to the
/// leader. A new leader first commits a take-over command, so it has applied everything committed before it, then
/// adopts every registered node with a fresh deadline and sends it a Welcome (same id, same epoch) and its current
/// views. The single GMS is the same code on a <see cref="LocalGmsLog"/>, which commits every proposal in place.</para>
/// </summary>
internal sealed class GmsServer
{
    private readonly IAlarmScheduler _scheduler;
    private readonly IControlChannel _channel;
    private readonly GmsOptions _options;
    private readonly ILogger _log;
    private readonly IGmsLog _gmsLog;
    private readonly ulong _proposedEpoch;
    private readonly Dictionary<NetAddress, Session> _sessions = new();
    private readonly List<GmsOp> _pending = new();
    private readonly Alarm _batchAlarm;
    private readonly Alarm _graceAlarm;
    private readonly Alarm _failureAlarm;
    private readonly Dictionary<uint, int> _nodesPerIp = new();
    private readonly long[] _refusals = new long[Enum.GetValues<GmsRefusal>().Max(r => (int)r) + 1];
    private readonly TimeSpan?[] _refusalLogged = new TimeSpan?[Enum.GetValues<GmsRefusal>().Max(r => (int)r) + 1];
    private long _sequence;
    private long _inFlight;
    private GmsCommand? _inFlightCommand;
    private string? _takeOver;
    private NetAddress? _leader;
    private long _appliedIndex;
    private long _leaderCommit;
    private TimeSpan? _leaderCommitAt;
    private readonly Dictionary<NodeId, TimeSpan> _lastRead = new();
    private readonly Alarm _replicaAlarm;
    private NetAddress[] _askReplicas = [];
    private bool _askToJoin;
    private bool _replicaChangeInFlight;

    /// <param name="epoch">The epoch this server proposes when it first leads (random in production, seeded in
    /// simulation). A single GMS always uses it; a replicated GMS keeps the epoch of its first leader for ever. A client
    /// that sees a new epoch drops the views it kept from the previous one.</param>
    /// <param name="log">Where commands are committed; null: a single GMS (<see cref="LocalGmsLog"/>).</param>
    public GmsServer(IAlarmScheduler scheduler, IControlChannel channel, ulong epoch, GmsOptions? options = null, ILogger? logger = null, IGmsLog? log = null)
    {
        _proposedEpoch = epoch;
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _channel = channel ?? throw new ArgumentNullException(nameof(channel));
        _options = options ?? new GmsOptions();
        _options.Validate();
        _log = logger ?? NullLogger.Instance;
        var gmsOptions = _options;
        Machine = new GmsStateMachine(() => new MembershipState(new MulticastAddressPool(gmsOptions.MulticastPoolStart, gmsOptions.MulticastPoolSize), gmsOptions.PinRegion, gmsOptions.UseMulticast));
        _batchAlarm = new Alarm(_ => TryPropose());
        _graceAlarm = new Alarm(_ => TryPropose());
        _failureAlarm = new Alarm(_ => DetectFailures());
        _replicaAlarm = new Alarm(_ => AskReplicaChange());
        _channel.SetReceiver(OnMessage, OnPeerFailed);
        _gmsLog = log ?? _options.Log ?? new LocalGmsLog();
        _gmsLog.Start(this);
    }

    /// <summary>The replicated state: registry, epoch and membership.</summary>
    public GmsStateMachine Machine { get; }

    public MembershipState State => Machine.State;

    /// <summary>The GMS epoch (0 until the first leader's take-over is committed).</summary>
    public ulong Epoch => Machine.Epoch;

    /// <summary>Whether this replica leads and has taken over (it talks to nodes).</summary>
    public bool IsLeading { get; private set; }

    /// <summary>The leader's GMS address as this replica last learned it (null: unknown, or this replica).</summary>
    public NetAddress? Leader => _leader;

    /// <summary>Times this replica took over as leader.</summary>
    public long TakeOvers { get; private set; }

    /// <summary>Redirects sent to nodes that asked a replica that does not lead.</summary>
    public long Redirects { get; private set; }

    /// <summary>Proposals the log did not commit (leadership lost while they were in flight).</summary>
    public long ProposalsLost { get; private set; }

    public DropCounters Drops { get; } = new();

    /// <summary>Batches with joins, leaves or failures applied while this replica led.</summary>
    public long BatchesApplied { get; private set; }

    /// <summary>The largest message this GMS has sent (a view update, or a part of one).</summary>
    public int LargestMessageBytes { get; private set; }

    /// <summary>Nodes declared dead by the failure detector (timeouts and channel failures).</summary>
    public long FailuresDetected { get; private set; }

    /// <summary>Requests refused because of <paramref name="reason"/>'s limit.</summary>
    public long Refusals(GmsRefusal reason) => Volatile.Read(ref _refusals[(int)reason]);

    /// <summary>Set when the GMS's stack seals datagrams: every batch then carries a fresh random key seed, each new region
    /// view gets a key (docs/security.md, "Keys per region and view"), and keys travel wrapped under this.</summary>
    public RegionKeyWrap? KeyWrap { get; set; }

    /// <summary>Key rotations asked for by nodes (their limit of datagrams per key) and put into a batch.</summary>
    public long RekeysRequested { get; private set; }

    /// <summary>Hellos of registered nodes dropped by the request rate limit (a node that keeps saying Hello).</summary>
    public long HellosRateLimited { get; private set; }

    /// <summary>Reads (<see cref="GmsMessageKind.Sync"/>) this replica answered, leading or following.</summary>
    public long ReadsServed { get; private set; }

    /// <summary>Reads this replica, following, redirected to the leader because it was not fresh enough (or follower reads
    /// are off).</summary>
    public long ReadsRedirected { get; private set; }

    /// <summary>Reads dropped: from an address that is not a registered node here, or a node's second read within
    /// <see cref="GmsOptions.MinReadInterval"/>.</summary>
    public long ReadsDropped { get; private set; }

    /// <summary>The Raft log index of the last entry this replica applied (any entry, the engine's own included).</summary>
    public long AppliedIndex => _appliedIndex;

    /// <summary>How many log entries this replica's applied state is behind the leader's commit index as it last learned
    /// it (0 on the leader).</summary>
    public long FollowerLag => IsLeading ? 0 : Math.Max(0, _leaderCommit - _appliedIndex);

    /// <summary>Replica-set changes this replica committed while leading (replicas added or removed on request).</summary>
    public long ReplicaChanges { get; private set; }

    /// <summary>Replica-set change requests refused: not sealed and not from loopback, or another change under way.</summary>
    public long ReplicaChangesRefused { get; private set; }

    /// <summary>Set once the leader confirmed the change this replica asked for (<see cref="AskToChangeReplicaSet"/>).</summary>
    public bool ReplicaChangeConfirmed { get; private set; }

    /// <summary>Asks the replicas at <paramref name="others"/> (every replica but this one) to add this replica to the
    /// replica set, or to remove it, once a second until the leader confirms (<see cref="ReplicaChangeConfirmed"/>).</summary>
    internal void AskToChangeReplicaSet(IReadOnlyList<NetAddress> others, bool join)
    {
        _askReplicas = [.. others];
        _askToJoin = join;
        ReplicaChangeConfirmed = false;
        AskReplicaChange();
    }

    private void AskReplicaChange()
    {
        if (ReplicaChangeConfirmed)
        {
            return;
        }

        var bytes = GmsCodec.Encode(new GmsMessage { Kind = _askToJoin ? GmsMessageKind.ReplicaJoin : GmsMessageKind.ReplicaLeave });
        foreach (var replica in _askReplicas)
        {
            _channel.Send(replica, bytes);
        }

        _scheduler.ScheduleAfter(_replicaAlarm, TimeSpan.FromSeconds(1));
    }

    /// <summary>A replica asks the leader to add or remove it: done through the log (the engine's membership change), one
    /// change at a time, only from a holder of the secret (sealed datagrams) or a loopback address.</summary>
    private void OnReplicaChangeRequest(NetAddress from, bool add)
    {
        if (!IsLeading)
        {
            if (_takeOver is null)
            {
                Redirects++;
                Send(from, new GmsMessage { Kind = GmsMessageKind.Redirect, Number = LeaderAddress.Pack(_leader) });
            }

            return;
        }

        if ((KeyWrap is null && !from.IsLoopback) || _replicaChangeInFlight)
        {
            ReplicaChangesRefused++;
            Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        _replicaChangeInFlight = true;
        _gmsLog.ChangeReplicas(from, add);
    }

    /// <summary>The log's answer to <see cref="IGmsLog.ChangeReplicas"/>: the replica that asked is told.</summary>
    internal void OnReplicaChangeDone(NetAddress replica, bool add, bool committed)
    {
        _replicaChangeInFlight = false;
        if (committed)
        {
            ReplicaChanges++;
        }

        GmsLogMessages.ReplicaSetChanged(_log, _gmsLog.ReplicaId, replica, add ? "add" : "remove", committed);
        Send(replica, new GmsMessage { Kind = GmsMessageKind.ReplicaChanged, Number = committed ? 1UL : 0UL });
    }

    /// <summary>The log applied entries up to <paramref name="index"/> (commands through <see cref="OnCommitted"/> first;
    /// the engine's own entries too), so reads know how far this replica has come.</summary>
    internal void OnApplied(long index) => _appliedIndex = Math.Max(_appliedIndex, index);

    /// <summary>A follower learned the leader's commit index (<paramref name="leaderCommit"/>) now; with
    /// <paramref name="applied"/>, the entries it had applied at that moment (0: unknown). Reads are answered only while
    /// this is recent and the lag small (<see cref="GmsOptions.FollowerReadMaxAge"/>, <see cref="GmsOptions.FollowerReadMaxLag"/>).</summary>
    internal void OnLeaderCommit(long leaderCommit, long applied = 0)
    {
        _appliedIndex = Math.Max(_appliedIndex, applied);
        _leaderCommit = Math.Max(0, leaderCommit);
        _leaderCommitAt = _scheduler.Now;
    }

    /// <summary>Whether this replica may answer a read now: it leads, or it follows with follower reads on, has learned
    /// the leader's commit index within <see cref="GmsOptions.FollowerReadMaxAge"/>, and has applied all but at most
    /// <see cref="GmsOptions.FollowerReadMaxLag"/> entries of it.</summary>
    public bool CanServeReads => Epoch != 0 && (IsLeading || (_takeOver is null && _options.FollowerReads
        && _leaderCommitAt is { } at && _scheduler.Now - at <= _options.FollowerReadMaxAge
        && _leaderCommit - _appliedIndex <= _options.FollowerReadMaxLag));

    /// <summary>The log says who leads. Becoming leader: propose a take-over and wait for it to be applied (then every
    /// command of earlier terms has been applied too). Not leading: drop the sessions and pending requests (the new
    /// leader adopts every registered node; a node whose request was lost asks again when it re-registers there).</summary>
    internal void OnLeaderChanged(NetAddress? leader, bool isSelf)
    {
        if (isSelf)
        {
            if (IsLeading || _takeOver is not null)
            {
                return;
            }

            _leader = null;
            _takeOver = $"{_gmsLog.ReplicaId}:{++_sequence}";
            _inFlight = _sequence;
            _inFlightCommand = null;
            _pending.Clear();
            _gmsLog.Propose(new GmsCommand { Ops = [GmsOp.Start(_gmsLog.ReplicaId, _proposedEpoch) with { Text = _takeOver }] }, _sequence);
            return;
        }

        _leader = leader;
        if (!IsLeading && _takeOver is null)
        {
            return; // a follower told again who leads (the log may repeat itself)
        }

        GmsLogMessages.NoLongerLeading(_log, _gmsLog.ReplicaId, leader);
        IsLeading = false;
        _takeOver = null;
        _inFlight = 0;
        _inFlightCommand = null;
        _pending.Clear();
        _sessions.Clear();
        _nodesPerIp.Clear();
        _scheduler.Cancel(_batchAlarm);
        _scheduler.Cancel(_graceAlarm);
        _scheduler.Cancel(_failureAlarm);
    }

    /// <summary>A committed command, in log order, on every replica. The leader then tells each node what changed.</summary>
    internal void OnCommitted(GmsCommand command)
    {
        var applied = Machine.Apply(command);
        if (_takeOver is not null && applied.Starts.Any(s => s.Text == _takeOver))
        {
            TakeOver();
            return;
        }

        if (!IsLeading)
        {
            return;
        }

        foreach (var registration in applied.Registered)
        {
            if (_sessions.TryGetValue(registration.Address, out var session) && session.Incarnation == registration.Incarnation)
            {
                if (session.Node is null)
                {
                    session.Node = registration.Node;
                    GmsLogMessages.Registered(_log, registration.Node, registration.Address);
                }

                SendWelcome(registration.Address, session);
            }
            else if (!_sessions.ContainsKey(registration.Address))
            {
                Enqueue(GmsOp.Down(registration.Node)); // it went away while its registration was being committed
            }
        }

        if (command.Ops.Any(o => o.Kind is GmsOpKind.Join or GmsOpKind.Leave or GmsOpKind.Down))
        {
            BatchesApplied++;
        }

        foreach (var update in applied.Change.Updates.Values)
        {
            SendUpdate(State.AddressOf(update.Node), update);
        }
    }

    /// <summary>The log's answer to the proposal numbered <paramref name="sequence"/>.</summary>
    internal void OnProposalDone(long sequence, bool committed)
    {
        if (sequence != _inFlight)
        {
            return;
        }

        _inFlight = 0;
        var command = _inFlightCommand;
        _inFlightCommand = null;
        if (!committed)
        {
            _takeOver = null; // a take-over that failed is proposed again when the log next says this replica leads
            ProposalsLost++;
            GmsLogMessages.ProposalLost(_log, _gmsLog.ReplicaId);
            if (IsLeading && command is not null)
            {
                // Still leading: propose its ops again, first. Every op is idempotent (a repeated registration with the
                // same incarnation, join, leave or down changes nothing), so this is safe even if it commits after all.
                // A registration is proposed again only for the session still waiting for it (not one replaced since).
                _pending.InsertRange(0, command.Ops.Where(op => op.Kind != GmsOpKind.Register
                    || (_sessions.TryGetValue(new NetAddress(op.Ip, op.Port), out var waiting) && waiting.Incarnation == op.Number && waiting.Node is null)));
            }
        }

        if (_pending.Count > 0 && !_batchAlarm.IsScheduled)
        {
            _scheduler.ScheduleAfter(_batchAlarm, _options.BatchInterval);
        }
    }

    /// <summary>This replica leads and has applied everything committed before: adopt every registered node with a
    /// fresh failure deadline (a node cannot have talked to a leader that did not exist yet) and tell it who leads
    /// now, with its current views (the previous leader may have died before sending the last ones).</summary>
    private void TakeOver()
    {
        _takeOver = null;
        IsLeading = true;
        TakeOvers++;
        var now = _scheduler.Now;
        foreach (var registration in Machine.Registrations.OrderBy(r => r.Node.Value))
        {
            var session = new Session(registration.Node, registration.Incarnation, _options.RequestBurst) { LastHeard = now };
            foreach (var gid in State.GroupsOf(registration.Node))
            {
                session.Groups.Add(State.GroupViewOf(gid).Name);
            }

            _sessions[registration.Address] = session;
            _nodesPerIp[registration.Address.Ip] = _nodesPerIp.GetValueOrDefault(registration.Address.Ip) + 1;
        }

        if (_sessions.Count > 0)
        {
            GmsLogMessages.Leading(_log, _gmsLog.ReplicaId, Epoch, _sessions.Count);
        }

        foreach (var (address, session) in _sessions.ToList())
        {
            SendWelcome(address, session);
            SendCurrentViews(address, session.Node!.Value);
        }

        _scheduler.ScheduleAfter(_failureAlarm, _options.HeartbeatInterval);
    }

    /// <summary>Everything a node should know now: the views of its groups and of the regions they map to.</summary>
    private void SendCurrentViews(NetAddress to, NodeId node)
    {
        var groups = State.GroupsOf(node).Select(State.GroupViewOf).OrderBy(v => v.Group.Value).ToList();
        if (groups.Count == 0 || !_sessions.ContainsKey(to))
        {
            return;
        }

        var regions = groups.SelectMany(g => g.Regions).Select(r => r.Region).Distinct().OrderBy(r => r.Value).Select(State.RegionViewOf);
        SendUpdate(to, new NodeUpdate(node, [.. groups], [.. regions], []));
    }

    private void OnMessage(NetAddress from, ReadOnlySpan<byte> bytes)
    {
        var message = GmsCodec.TryDecode(bytes, _options.MaxMessageBytes);
        if (message is null)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        switch (message.Kind)
        {
            case GmsMessageKind.Sync:
                OnSync(from);
                return;
            case GmsMessageKind.ReplicaJoin or GmsMessageKind.ReplicaLeave:
                OnReplicaChangeRequest(from, message.Kind == GmsMessageKind.ReplicaJoin);
                return;
            case GmsMessageKind.ReplicaChanged:
                if (message.Number == 1 && Array.IndexOf(_askReplicas, from) >= 0)
                {
                    ReplicaChangeConfirmed = true;
                    _scheduler.Cancel(_replicaAlarm);
                }

                return;
        }

        if (!IsLeading)
        {
            if (_takeOver is null)
            {
                Redirects++;
                Send(from, new GmsMessage { Kind = GmsMessageKind.Redirect, Number = LeaderAddress.Pack(_leader) });
            }

            return; // taking over: the node asks again, or hears from this replica once it leads
        }

        if (message.Kind == GmsMessageKind.Hello)
        {
            OnHello(from, message.Number, message.Epoch, message.RegionFloor);
            return;
        }

        if (!_sessions.TryGetValue(from, out var session))
        {
            // A node we declared dead (or never knew) is still talking: tell it to register again (QSM §2.3.2).
            Send(from, new GmsMessage { Kind = GmsMessageKind.Bye });
            return;
        }

        session.LastHeard = _scheduler.Now;
        if (session.Node is not { } node)
        {
            return; // its registration is being committed; it waits for the Welcome before asking anything
        }

        switch (message.Kind)
        {
            case GmsMessageKind.Join when !string.IsNullOrEmpty(message.GroupName):
                OnJoin(from, session, node, message.GroupName);
                break;
            case GmsMessageKind.Leave when !string.IsNullOrEmpty(message.GroupName):
                if (session.Groups.Remove(message.GroupName))
                {
                    Enqueue(GmsOp.Leave(node, message.GroupName));
                }

                break;
            case GmsMessageKind.Heartbeat:
                break;
            case GmsMessageKind.Rekey when KeyWrap is not null && message.Number is > 0 and <= uint.MaxValue:
                // Coalesced per region while waiting; limited like a join. MembershipState takes it only from a node
                // that sends into or belongs to the region.
                if (!_pending.Any(o => o.Kind == GmsOpKind.Rekey && o.Number == message.Number) && session.TakeRequest(_scheduler.Now, _options))
                {
                    RekeysRequested++;
                    Enqueue(GmsOp.Rekey(node, new RegionId((uint)message.Number)));
                }

                break;
            case GmsMessageKind.Bye:
                Remove(from, session, "left");
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    /// <summary>A read: the node at <paramref name="from"/> asks for its current views. Answered from this replica's
    /// applied state when it may serve reads (<see cref="CanServeReads"/>), at most once per node per
    /// <see cref="GmsOptions.MinReadInterval"/>; a follower that may not redirects the node to the leader. Only a
    /// registered node's own address gets an answer, and only its own views.</summary>
    private void OnSync(NetAddress from)
    {
        if (!CanServeReads)
        {
            if (!IsLeading && _takeOver is null)
            {
                ReadsRedirected++;
                Redirects++;
                Send(from, new GmsMessage { Kind = GmsMessageKind.Redirect, Number = LeaderAddress.Pack(_leader) });
            }

            return;
        }

        if (Machine.RegistrationAt(from) is not { } registration || !State.IsAlive(registration.Node))
        {
            ReadsDropped++;
            Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        var now = _scheduler.Now;
        if (_lastRead.TryGetValue(registration.Node, out var last) && now - last < _options.MinReadInterval)
        {
            ReadsDropped++;
            Drops.Increment(DropReason.ReceiveBufferFull);
            return;
        }

        if (_lastRead.Count >= _options.MaxNodes * 2)
        {
            _lastRead.Clear(); // bounded: at most two entries per registrable node before it starts again
        }

        _lastRead[registration.Node] = now;
        if (IsLeading && _sessions.TryGetValue(from, out var session))
        {
            session.LastHeard = now;
        }

        ReadsServed++;
        var node = registration.Node;
        var groups = State.GroupsOf(node).Select(State.GroupViewOf).OrderBy(v => v.Group.Value).ToList();
        var regions = groups.SelectMany(g => g.Regions).Select(r => r.Region).Distinct().OrderBy(r => r.Value).Select(State.RegionViewOf);
        SendUpdate(from, new NodeUpdate(node, [.. groups], [.. regions], []), GmsMessageKind.Views);
    }

    /// <summary>A join within the node's limits goes into the next batch; one it already asked for is not repeated.</summary>
    private void OnJoin(NetAddress from, Session session, NodeId node, string group)
    {
        if (session.Groups.Contains(group))
        {
            return;
        }

        if (System.Text.Encoding.UTF8.GetByteCount(group) > _options.MaxGroupNameBytes)
        {
            Refuse(from, node, GmsRefusal.GroupNameTooLong, group, _options.MaxGroupNameBytes);
            return;
        }

        if (session.Groups.Count >= _options.MaxGroupsPerNode)
        {
            Refuse(from, node, GmsRefusal.TooManyGroups, group, _options.MaxGroupsPerNode);
            return;
        }

        if (!session.TakeRequest(_scheduler.Now, _options))
        {
            Refuse(from, node, GmsRefusal.RateLimited, group, _options.MaxRequestsPerSecond);
            return;
        }

        session.Groups.Add(group);
        Enqueue(GmsOp.Join(node, group));
    }

    private bool _restartGraceUsed;
    private ulong _regionFloor;
    private TimeSpan _graceUntil;

    /// <summary>Times this GMS held views back after a restart (<see cref="GmsOptions.RestartGrace"/>): 0 or 1.</summary>
    public long RestartGraces { get; private set; }

    /// <summary>Joins and leaves waiting for the restart grace's end, when last counted.</summary>
    public int HeldDuringGrace { get; private set; }

    private void OnHello(NetAddress from, ulong incarnation, ulong lastEpoch, ulong regionFloor)
    {
        bool oldMember = lastEpoch != 0 && lastEpoch != Epoch && Epoch != 0 && IsLeading;
        if (oldMember && (_scheduler.Now < _graceUntil || !_restartGraceUsed))
        {
            // Its regions' ids: this GMS's new regions must not reuse them (a node still holding an old region's member
            // would take a new region's packets and tokens as its own). Bounded, so a forged floor cannot use up the ids.
            _regionFloor = Math.Max(_regionFloor, Math.Min(regionFloor, MembershipState.MaxRegionFloor - 1));
        }

        if (oldMember && !_restartGraceUsed && _options.RestartGrace > TimeSpan.Zero)
        {
            // A node registered with an earlier GMS: this one restarted. Hold views back while the old members come back.
            _restartGraceUsed = true;
            _graceUntil = _scheduler.Now + _options.RestartGrace;
            RestartGraces++;
            GmsLogMessages.RestartGrace(_log, Epoch, lastEpoch, _options.RestartGrace);
        }

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
                if (existing.Node is not null)
                {
                    SendWelcome(from, existing); // a retransmitted Hello, or a node that lost the leader: answer the same
                }

                return;
            }

            // Same address, new process: the old one is gone. The Hello came over a conversation whose handshake proved
            // the sender receives at this address (a spoofed datagram opens none), and it is that process's conversation
            // now: keep it. The new registration replaces the old node when it is applied.
            Remove(from, existing, "restarted", forgetChannel: false, down: false);
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

        _sessions[from] = new Session(null, incarnation, _options.RequestBurst) { LastHeard = _scheduler.Now };
        _nodesPerIp[from.Ip] = _nodesPerIp.GetValueOrDefault(from.Ip) + 1;
        var register = GmsOp.Register(from, incarnation, State.PinOf(from));
        if (_inFlight == 0 && _pending.Count == 0)
        {
            // A registration changes no view: it is committed at once rather than with the next batch, unless ops wait
            // ahead of it. It must not overtake them: a node just declared dead (its Down still queued) that says Hello
            // again would get its old registration back, and the Down committed next would remove it from the registry
            // and every group while the node believes it is registered (soak seeds 734, 782, 784).
            _inFlight = ++_sequence;
            _inFlightCommand = new GmsCommand { Ops = [register], KeySeed = DrawKeySeed() };
            _gmsLog.Propose(_inFlightCommand, _inFlight);
        }
        else
        {
            Enqueue(register);
        }
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
            GmsLogMessages.Refused(_log, to, node, reason, limit, _refusals[(int)reason]);
        }

        Send(to, new GmsMessage { Kind = GmsMessageKind.Refused, Number = (ulong)reason, GroupName = group, Limit = limit });
    }

    private void SendWelcome(NetAddress to, Session session)
        => Send(to, new GmsMessage
        {
            Kind = GmsMessageKind.Welcome,
            Number = session.Node!.Value.Value,
            HeartbeatMs = (int)_options.HeartbeatInterval.TotalMilliseconds,
            Epoch = Epoch,
        });

    private void OnPeerFailed(NetAddress peer)
    {
        if (IsLeading && _sessions.TryGetValue(peer, out var session))
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

    private void Remove(NetAddress address, Session session, string why, bool forgetChannel = true, bool down = true)
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

        GmsLogMessages.Removed(_log, session.Node, address, why);
        if (down && session.Node is { } node)
        {
            Enqueue(GmsOp.Down(node));
        }
    }

    private void Enqueue(GmsOp op)
    {
        _pending.Add(op);
        if (!_batchAlarm.IsScheduled)
        {
            _scheduler.ScheduleAfter(_batchAlarm, _options.BatchInterval);
        }
    }

    /// <summary>The batch alarm: propose what has been collected as one command, one proposal at a time (the next batch
    /// waits for the log's answer, then for the next alarm).</summary>
    private void TryPropose()
    {
        if (_pending.Count == 0 || _inFlight != 0 || !IsLeading)
        {
            return;
        }

        GmsOp[] ops;
        var now = _scheduler.Now;
        if (now < _graceUntil && !_pending.Any(op => op.Kind == GmsOpKind.Down))
        {
            // The restart grace: registrations go through (they change no view), joins and leaves wait for its end, so the
            // first views of this epoch hold every old member that came back. A Down ends the hold for its batch: it
            // must not be overtaken by the registration of the node it removes (see OnHello).
            ops = [.. _pending.Where(op => op.Kind == GmsOpKind.Register)];
            if (ops.Length == 0)
            {
                if (!_graceAlarm.IsScheduled)
                {
                    _scheduler.ScheduleAfter(_graceAlarm, _graceUntil - now); // the held ops go then
                }

                return;
            }

            _pending.RemoveAll(op => op.Kind == GmsOpKind.Register);
            HeldDuringGrace = _pending.Count;
        }
        else
        {
            ops = _regionFloor > 0 && State.NextRegion <= _regionFloor
                ? [GmsOp.RegionFloor((uint)_regionFloor + 1), .. _pending] // before the batch makes any region
                : [.. _pending];
            _regionFloor = 0;
            _pending.Clear();
        }

        var command = new GmsCommand { Ops = ops, KeySeed = DrawKeySeed() };
        _inFlight = ++_sequence;
        _inFlightCommand = command;
        _gmsLog.Propose(command, _inFlight);
    }

    /// <summary>The leader draws the keys of a batch's new region views as one random seed, carried in the command, so every
    /// replica derives the same keys (<see cref="MembershipState.Apply"/>); null when security is off.</summary>
    private byte[]? DrawKeySeed() => KeyWrap is null ? null : System.Security.Cryptography.RandomNumberGenerator.GetBytes(MembershipState.KeySeedBytes);

    /// <summary>
    /// Sends an update in as many messages as the control channel needs: an update larger than one message is halved,
    /// region views before group views (a group view refers to region views, so those must arrive first), and the
    /// groups left travel with the first part. The client applies each part as it comes.
    /// </summary>
    private void SendUpdate(NetAddress to, NodeUpdate update, GmsMessageKind kind = GmsMessageKind.Update)
    {
        var bytes = GmsCodec.Encode(kind == GmsMessageKind.Views
            ? new GmsMessage { Kind = kind, Update = GmsCodec.ToWire(update, KeyWrap), Epoch = Epoch, Number = (ulong)_appliedIndex }
            : new GmsMessage { Kind = kind, Update = GmsCodec.ToWire(update, KeyWrap) });
        int items = update.RegionViews.Length + update.GroupViews.Length;
        if (bytes.Length <= _channel.MaxMessageBytes || items <= 1)
        {
            if (bytes.Length > _channel.MaxMessageBytes)
            {
                GmsLogMessages.ViewTooLarge(_log, update.Node, bytes.Length, _channel.MaxMessageBytes);
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
        SendUpdate(to, first, kind);
        SendUpdate(to, second, kind);
    }

    private void Send(NetAddress to, GmsMessage message) => Send(to, GmsCodec.Encode(message));

    private void Send(NetAddress to, byte[] message)
    {
        LargestMessageBytes = Math.Max(LargestMessageBytes, message.Length);
        if (!_channel.Send(to, message))
        {
            // The node cannot keep up with its control channel: it would miss views, so it is treated as failed.
            Drops.Increment(DropReason.SendQueueFull);
            if (IsLeading && _sessions.TryGetValue(to, out var session))
            {
                FailuresDetected++;
                Remove(to, session, "control channel full");
            }
        }
    }

    /// <summary>What the leader knows of a node beyond the replicated state: when it last heard from it, its request
    /// budget, and the groups it asked for that may not be committed yet. Null <see cref="Node"/>: its registration is
    /// being committed.</summary>
    private sealed class Session(NodeId? node, ulong incarnation, double burst)
    {
        private double _tokens = burst;
        private TimeSpan _tokensAt;

        public NodeId? Node { get; set; } = node;
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
