using QuickSilver.Core;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;

namespace QuickSilver.Membership.Service;

/// <summary>Options of a node's GMS client.</summary>
internal sealed record GmsClientOptions
{
    /// <summary>How often an unanswered Hello is repeated (at start, and after losing the GMS).</summary>
    public TimeSpan RetryInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>With several replicas, how often a node not yet registered repeats its Hello, to every replica at once
    /// (the leader welcomes it, followers redirect it): a fresh node must not wait a whole <see cref="RetryInterval"/>
    /// per dead or leaderless replica while an election finishes. Default 250 ms.</summary>
    public TimeSpan FirstContactInterval { get; init; } = TimeSpan.FromMilliseconds(250);

    public int MaxMessageBytes { get; init; } = 16 << 20;

    /// <summary>Every replica of a replicated GMS (their GMS addresses); empty: the one GMS the client is given. The
    /// client talks to the leader, follows redirects, and moves to the next replica when the one it talks to fails.</summary>
    public IReadOnlyList<NetAddress> Replicas { get; init; } = [];

    public void Validate()
    {
        ArgumentNullException.ThrowIfNull(Replicas, "GmsClientOptions.Replicas");
        GmsOptions.ValidateReplicas(Replicas, "GmsClientOptions.Replicas");
        OptionChecks.Positive(RetryInterval, $"GmsClientOptions.{nameof(RetryInterval)}");
        OptionChecks.Positive(FirstContactInterval, $"GmsClientOptions.{nameof(FirstContactInterval)}");
        OptionChecks.InRange(MaxMessageBytes, 256, 256 << 20, $"GmsClientOptions.{nameof(MaxMessageBytes)}");
    }
}

/// <summary>
/// A node's side of the GMS: registers, keeps heartbeats going, sends the application's joins and leaves, and keeps
/// the latest group and region views it was sent. When it loses the GMS (the channel reports failure, or the GMS says
/// it no longer knows the node) it keeps its last views, registers again, and re-joins every group it wants to be in.
/// A request the GMS refuses (one of its limits, <see cref="GmsOptions"/>) is reported as a
/// <see cref="GmsRefusedException"/>: a refused join through <see cref="JoinRefused"/> (the group is no longer wanted), a
/// refused registration through <see cref="RegistrationRefusal"/> (it keeps asking, at <see cref="GmsClientOptions.RetryInterval"/>).
/// <para>With a replicated GMS (<see cref="GmsClientOptions.Replicas"/>) it talks to one replica at a time: a
/// <see cref="GmsMessageKind.Redirect"/> sends it to the leader named (once registered, only a redirect from the replica
/// it talks to, or one answering its read: any other answers an earlier Hello and is stale), a Welcome from another
/// replica (a new leader taking over) makes that replica the one it talks to, and a replica that fails or stays silent
/// makes it try the next. Across such a change it keeps its node id and views (the replicated GMS keeps them too), asks
/// the new leader again for every join and leave that may have been lost with the old one, and reads its views there
/// (updates sent while it talked to another replica were dropped). Welcomed again by the replica it already talks to
/// (a leader that lost the lead for a moment and took over again), it asks again for what is still outstanding.</para>
/// I/O-free; core thread only.
/// </summary>
internal sealed class GmsClient
{
    private readonly IAlarmScheduler _scheduler;
    private readonly IControlChannel _channel;
    private NetAddress[] _replicas;
    private NetAddress _gms;
    private bool _heardSinceHello;
    private readonly ulong _incarnation;
    private readonly GmsClientOptions _options;
    private readonly HashSet<string> _wanted = new(StringComparer.Ordinal);
    private readonly List<GmsMessage> _requests = new(); // oldest first; at most one per group and one rekey per region
    private readonly Dictionary<string, GroupView> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<GroupId, GroupView> _groups = new();
    private readonly Dictionary<RegionId, RegionView> _regions = new();
    private readonly Alarm _helloAlarm;
    private readonly Alarm _heartbeatAlarm;
    private TimeSpan _heartbeatInterval;
    private ulong _epoch;
    private bool _epochChanged;
    private bool _stopped;

    /// <summary>A read of this node's views (<see cref="RequestViews"/>) is under way: its answer or a redirect is expected.</summary>
    private bool _readPending;

    /// <summary>The client moved to another replica and has not been welcomed there yet: the next Welcome re-asks for
    /// every join and leave.</summary>
    private bool _welcomesPending;

    public GmsClient(IAlarmScheduler scheduler, IControlChannel channel, NetAddress gms, ulong incarnation, GmsClientOptions? options = null)
    {
        _scheduler = scheduler ?? throw new ArgumentNullException(nameof(scheduler));
        _channel = channel ?? throw new ArgumentNullException(nameof(channel));
        _incarnation = incarnation;
        _options = options ?? new GmsClientOptions();
        _options.Validate();
        _replicas = _options.Replicas.Count > 0 ? [.. _options.Replicas] : [gms];
        _gms = _replicas.Contains(gms) ? gms : _replicas[0];
        _helloAlarm = new Alarm(_ => RetryHello());
        _heartbeatAlarm = new Alarm(_ => SendHeartbeat());
        _channel.SetReceiver(OnMessage, OnPeerFailed);
    }

    /// <summary>The GMS incarnation this node last registered with (0 before the first Welcome).</summary>
    public ulong Epoch => _epoch;

    /// <summary>The GMS epoch of the views this client holds (0 before the first update). It changes when the first
    /// update from a restarted GMS replaces the old views wholesale: node ids, region ids and view numbers of the old
    /// epoch mean nothing in the new one, and the layers above start afresh (<c>RegionLayer.StartNewEpoch</c>).</summary>
    public ulong ViewsEpoch { get; private set; }

    /// <summary>The node ids of the epoch before <see cref="ViewsEpoch"/> and their addresses, as this client's views
    /// had them when a restarted GMS's first update replaced them (empty before any restart): a node keeps its address
    /// across a GMS restart but not its id, so the layers above carry per-sender state over by address.</summary>
    public IReadOnlyDictionary<uint, NetAddress> PreviousEpochAddresses { get; private set; } = new Dictionary<uint, NetAddress>();

    /// <summary>The id the GMS gave this node, once registered.</summary>
    public NodeId? Node { get; private set; }

    public bool IsRegistered => Node is not null;

    /// <summary>The GMS replica this client talks to now (the leader, as far as it knows).</summary>
    public NetAddress CurrentGms => _gms;

    /// <summary>Times this client moved to another GMS replica (redirects, new leaders, failed replicas).</summary>
    public long GmsSwitches { get; private set; }

    public DropCounters Drops { get; } = new();

    /// <summary>Read answers (<see cref="GmsMessageKind.Views"/>) received, from the leader or a follower.</summary>
    public long ReadsAnswered { get; private set; }

    /// <summary>Reads a follower redirected to the leader (it was too far behind, or cut off from the leader).</summary>
    public long ReadsRedirected { get; private set; }

    /// <summary>Redirects from a replica this registered client does not talk to, outside a read: answers to an earlier
    /// Hello, ignored.</summary>
    public long StaleRedirectsIgnored { get; private set; }

    /// <summary>Views in read answers that were not newer than the ones this node held, and so were not applied.</summary>
    public long StaleViewsIgnored { get; private set; }

    /// <summary>Replicas this client learned of from a listed replica's redirect (a replica added at run time), at most
    /// up to <see cref="GmsOptions.MaxReplicas"/> in all.</summary>
    public long ReplicasLearned { get; private set; }

    /// <summary>The replicas this client knows: the ones it was given and the ones it learned of.</summary>
    public IReadOnlyList<NetAddress> Replicas => _replicas;

    /// <summary>The replica that answered the last read.</summary>
    public NetAddress? LastReadFrom { get; private set; }

    /// <summary>Raised after each update from the GMS has been applied to the local views.</summary>
    public event Action<NodeUpdate>? ViewsChanged;

    /// <summary>Raised when the GMS is lost; the last views stay in place.</summary>
    public event Action? GmsLost;

    /// <summary>Raised when the GMS refused to let this node join a group; the group is no longer wanted (join it again to
    /// retry).</summary>
    public event Action<string, GmsRefusedException>? JoinRefused;

    /// <summary>Why the GMS last refused to register this node, while it is not registered (null otherwise).</summary>
    public GmsRefusedException? RegistrationRefusal { get; private set; }

    public IEnumerable<GroupView> Groups => _groups.Values;

    /// <summary>Unwraps the region keys the GMS hands out with region views (set when the node's stack seals datagrams;
    /// null: keys are ignored).</summary>
    public RegionKeyWrap? KeyWrap { get; set; }

    /// <summary>Asks the GMS for a new key for <paramref name="region"/> (this node sealed its limit of datagrams under
    /// the current one); the region's next view brings it. Nothing while unregistered (the key is asked for again).</summary>
    public void RequestRekey(RegionId region)
    {
        if (IsRegistered)
        {
            Request(new GmsMessage { Kind = GmsMessageKind.Rekey, Number = region.Value });
        }
    }

    public GroupView? FindGroup(string name) => _groupsByName.GetValueOrDefault(name);

    /// <summary>Asks the GMS for this node's current views, a read (docs/membership.md, "Reads"): with several replicas it
    /// goes to a follower (<paramref name="replica"/>, or the one after the leader in the list), which answers from its
    /// applied state when fresh enough or redirects to the leader, to whom the read then goes. Only views newer than the
    /// ones held are applied. Used after losing the leader (views committed but never sent to this node) and by
    /// callers that want to check their views. Nothing while unregistered.</summary>
    public void RequestViews(NetAddress? replica = null)
    {
        if (!IsRegistered)
        {
            return;
        }

        var to = replica is { } r && Array.IndexOf(_replicas, r) >= 0 ? r
            : _replicas.Length > 1 ? _replicas[(Array.IndexOf(_replicas, _gms) + 1) % _replicas.Length] : _gms;
        _readPending = true;
        _channel.Send(to, GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Sync, Number = Node!.Value.Value }));
    }

    public RegionView? FindRegion(RegionId region) => _regions.GetValueOrDefault(region);

    /// <summary>Starts registering with the GMS.</summary>
    public void Start()
    {
        _stopped = false;
        SendHello();
    }

    /// <summary>Asks to join <paramref name="groupName"/>; remembered, so it is re-joined after a reconnect.</summary>
    public void Join(string groupName)
    {
        ArgumentException.ThrowIfNullOrEmpty(groupName);
        if (_wanted.Add(groupName) && IsRegistered)
        {
            Request(new GmsMessage { Kind = GmsMessageKind.Join, GroupName = groupName });
        }
    }

    public void Leave(string groupName)
    {
        ArgumentException.ThrowIfNullOrEmpty(groupName);
        if (_wanted.Remove(groupName) && IsRegistered)
        {
            Request(new GmsMessage { Kind = GmsMessageKind.Leave, GroupName = groupName });
        }
    }

    /// <summary>Says goodbye, so the GMS removes this node at once instead of waiting for the failure timeout.</summary>
    public void Stop()
    {
        if (IsRegistered)
        {
            Send(new GmsMessage { Kind = GmsMessageKind.Bye });
        }

        _scheduler.Cancel(_helloAlarm);
        _scheduler.Cancel(_heartbeatAlarm);
        Node = null;
        _stopped = true; // the GMS's answering Bye must not make a stopped client register again
    }

    private void SendHello()
    {
        // The epoch it was registered in (0: never) and the highest region id it knows: a restarted GMS waits for its old
        // members and numbers its regions above theirs.
        var hello = new GmsMessage { Kind = GmsMessageKind.Hello, Number = _incarnation, Epoch = _epoch, RegionFloor = _regions.Count > 0 ? _regions.Keys.Max(r => r.Value) : 0 };
        _heardSinceHello = false;
        if (SeekingLeader)
        {
            // Not registered yet: ask every replica at once; the leader's Welcome (or a follower's Redirect) decides.
            var bytes = GmsCodec.Encode(hello);
            foreach (var replica in _replicas)
            {
                _channel.Send(replica, bytes);
            }

            _scheduler.ScheduleAfter(_helloAlarm, _options.FirstContactInterval);
            return;
        }

        Send(hello);
        _scheduler.ScheduleAfter(_helloAlarm, _options.RetryInterval);
    }

    /// <summary>A node not yet registered with a replicated GMS: its Hellos go to every replica.</summary>
    private bool SeekingLeader => !IsRegistered && _replicas.Length > 1;

    /// <summary>The Hello alarm: a replica that said nothing since the last Hello may be down; try the next one.</summary>
    private void RetryHello()
    {
        if (!_heardSinceHello && _replicas.Length > 1 && !SeekingLeader)
        {
            MoveTo(_replicas[(Array.IndexOf(_replicas, _gms) + 1) % _replicas.Length], hello: false, forget: true);
        }

        SendHello();
    }

    /// <summary>Talks to <paramref name="replica"/> from now on: joins and leaves not yet sent are dropped (they are
    /// asked again after the Welcome), heartbeats wait for the Welcome, and the node keeps its id and views. The
    /// conversation with the replica left is forgotten only when it failed or went silent (<paramref name="forget"/>): a
    /// live one (a follower that redirected, a deposed leader) may still hold data for it, and forgetting a conversation
    /// the other side still uses makes the two end each other's newer ones.</summary>
    private void MoveTo(NetAddress replica, bool hello, bool forget)
    {
        _welcomesPending = true;
        if (replica != _gms)
        {
            if (forget)
            {
                _channel.Forget(_gms);
            }

            _gms = replica;
            GmsSwitches++;
        }

        _requests.Clear();
        _scheduler.Cancel(_heartbeatAlarm);
        if (hello)
        {
            SendHello();
        }
    }

    private void SendHeartbeat()
    {
        FlushRequests();
        Send(new GmsMessage { Kind = GmsMessageKind.Heartbeat });
        _scheduler.ScheduleAfter(_heartbeatAlarm, _heartbeatInterval);
    }

    private void OnMessage(NetAddress from, ReadOnlySpan<byte> bytes)
    {
        if (_stopped)
        {
            return;
        }

        if (Array.IndexOf(_replicas, from) < 0)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        var message = GmsCodec.TryDecode(bytes, _options.MaxMessageBytes);
        if (message is null)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (message.Kind == GmsMessageKind.Views)
        {
            OnViews(from, message);
            return;
        }

        if (from != _gms && message.Kind == GmsMessageKind.Redirect && IsRegistered && _readPending
            && (LeaderAddress.Unpack(message.Number) is not { } named || named == _gms))
        {
            // A follower would not answer a read (too far behind the leader, or cut off from it): ask the leader.
            ReadsRedirected++;
            _readPending = false;
            _channel.Send(_gms, GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Sync, Number = Node!.Value.Value }));
            return;
        }

        if (from != _gms && message.Kind is not (GmsMessageKind.Welcome or GmsMessageKind.Redirect))
        {
            return; // a replica this client no longer talks to (a deposed leader's late message)
        }

        if (from != _gms && message.Kind == GmsMessageKind.Redirect && IsRegistered && !_readPending)
        {
            // A registered node sends its Hellos only to the replica it talks to, so a redirect from another one answers a
            // Hello from before (the first contact's, sent to every replica and retransmitted late by reliable unicast):
            // stale. Following it moved a node from the live leader to the crashed one it named, where the leader's
            // updates were dropped (soak seeds 3912, 4099, 4450, 9028), or, naming the leader it talked to, made it
            // Hello again as if it had moved; its Hello retry then left the leader for a follower (soak seed 6059).
            StaleRedirectsIgnored++;
            return;
        }

        _heardSinceHello = true;
        switch (message.Kind)
        {
            case GmsMessageKind.Redirect:
                // A replica that does not lead: go to the leader it names, or (none known) to the next replica at the
                // next Hello retry.
                if (LeaderAddress.Unpack(message.Number) is { } added && _replicas.Length > 1 && Array.IndexOf(_replicas, added) < 0
                    && _replicas.Length < GmsOptions.MaxReplicas && !added.IsMulticast && added.Ip != 0 && added.Port != 0)
                {
                    // A listed replica names a leader this node was not given: a replica added at run time
                    // (docs/membership.md, "Changing the replica set"). Trust it as far as the replica that named it.
                    _replicas = [.. _replicas, added];
                    ReplicasLearned++;
                }

                if (LeaderAddress.Unpack(message.Number) is { } leader && Array.IndexOf(_replicas, leader) >= 0 && leader != from)
                {
                    MoveTo(leader, hello: !SeekingLeader, forget: false); // seeking: the leader has this round's Hello already
                }
                else if (from == _gms)
                {
                    _heardSinceHello = false;
                    _scheduler.Cancel(_heartbeatAlarm);
                    if (!_helloAlarm.IsScheduled)
                    {
                        _scheduler.ScheduleAfter(_helloAlarm, _options.RetryInterval);
                    }
                }

                break;
            case GmsMessageKind.Welcome when message.Number is > 0 and <= uint.MaxValue && message.HeartbeatMs > 0
                                              && message.HeartbeatMs <= GmsOptions.MaxHeartbeatInterval.TotalMilliseconds:
                bool moved = from != _gms;
                if (moved)
                {
                    MoveTo(from, hello: false, forget: false); // a new leader took over and says so
                }

                bool movedBefore = _welcomesPending && IsRegistered; // a registered client that moved and is welcomed now
                bool first = !IsRegistered || moved || Node!.Value.Value != message.Number || _welcomesPending;
                _welcomesPending = false;
                if (message.Epoch != _epoch)
                {
                    _epochChanged = _epoch != 0; // a restarted GMS: keep old views until its first update replaces them
                    _epoch = message.Epoch;
                }

                Node = new NodeId((uint)message.Number);
                RegistrationRefusal = null;
                _heartbeatInterval = TimeSpan.FromMilliseconds(message.HeartbeatMs);
                _scheduler.Cancel(_helloAlarm);
                _scheduler.ScheduleAfter(_heartbeatAlarm, _heartbeatInterval);
                if (moved || movedBefore)
                {
                    // Views the leader sent while this client talked to another replica came from a replica it was not
                    // talking to and were dropped (soak seed 8255: a node pointed back at the crashed leader missed the
                    // view that removed two crashed members, and nothing changed after, so it never installed it): read
                    // them. Also when the client moved first and the Welcome then came from the replica it had moved to
                    // (a replica left at the Hello retry as silent: soak seeds 3912, 4099, 4450, 6059 and 9028).
                    RequestViews(from);
                }

                // Ask for every wanted group (the GMS ignores a join of a group the node is in) and leave every unwanted
                // one it may still be in: requests sent to a previous leader may have died with it. Welcomed again by the
                // replica it talks to, with no move, only what is still outstanding is asked again (a wanted group it has
                // no view of): that replica took over again (it lost the lead for a moment, dropping the requests it
                // held, and won it back) or answered a Hello. Before, a join asked in that moment was never completed
                // (ReplicaSetChangeTests on real Raft, 2 runs in 60).
                foreach (var group in _wanted.Where(g => first || !_groupsByName.ContainsKey(g)))
                {
                    Request(new GmsMessage { Kind = GmsMessageKind.Join, GroupName = group });
                }

                foreach (var group in _groupsByName.Keys.Where(g => !_wanted.Contains(g)).ToList())
                {
                    Request(new GmsMessage { Kind = GmsMessageKind.Leave, GroupName = group });
                }

                break;
            case GmsMessageKind.Update when IsRegistered:
                var update = GmsCodec.FromWire(Node!.Value, message.Update, KeyWrap);
                if (update is null)
                {
                    Drops.Increment(DropReason.Malformed);
                    return;
                }

                Apply(update);
                break;
            case GmsMessageKind.Bye:
                // The GMS no longer knows us: register again, over the same conversation (the Bye came through it, so it
                // is alive). Forgetting it here would leave the GMS's side holding data for a conversation we dropped:
                // each side's data then ends the other's newer conversation, over and over (soak seed 283).
                LoseGms(forgetChannel: false);
                break;
            case GmsMessageKind.Refused when Enum.IsDefined((GmsRefusal)Math.Min(message.Number, int.MaxValue)):
                OnRefused((GmsRefusal)message.Number, message.GroupName, message.Limit);
                break;
            default:
                Drops.Increment(DropReason.Malformed);
                break;
        }
    }

    /// <summary>A read's answer, from any replica: applied only within this node's epoch, only for groups it wants, and
    /// only views newer than the ones it holds (a follower may be behind the leader's last update; a node never moves
    /// backwards). Groups left are never taken from a read.</summary>
    private void OnViews(NetAddress from, GmsMessage message)
    {
        if (!IsRegistered || message.Epoch != _epoch || _epochChanged)
        {
            return;
        }

        var update = GmsCodec.FromWire(Node!.Value, message.Update, KeyWrap);
        if (update is null)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        ReadsAnswered++;
        _readPending = false;
        LastReadFrom = from;
        var groups = new List<GroupView>();
        foreach (var group in update.GroupViews)
        {
            if (!_wanted.Contains(group.Name) || (_groups.TryGetValue(group.Group, out var known) && known.ViewNumber >= group.ViewNumber))
            {
                StaleViewsIgnored++;
                continue;
            }

            groups.Add(group);
        }

        var referenced = update.GroupViews.Where(g => _wanted.Contains(g.Name)).SelectMany(g => g.Regions).Select(r => r.Region).ToHashSet();
        var regions = new List<RegionView>();
        foreach (var region in update.RegionViews)
        {
            if (!referenced.Contains(region.Region))
            {
                continue;
            }

            if (_regions.TryGetValue(region.Region, out var known) && known.ViewNumber >= region.ViewNumber)
            {
                StaleViewsIgnored++;
                continue;
            }

            regions.Add(region);
        }

        if (groups.Count > 0 || regions.Count > 0)
        {
            Apply(new NodeUpdate(update.Node, [.. groups], [.. regions], []));
        }
    }

    private void Apply(NodeUpdate update)
    {
        if (_epochChanged)
        {
            _epochChanged = false;
            PreviousEpochAddresses = _regions.Values.SelectMany(r => r.Members).GroupBy(m => m.Node.Value).ToDictionary(g => g.Key, g => g.First().Address);
            _groups.Clear();
            _groupsByName.Clear();
            _regions.Clear();
        }

        ViewsEpoch = _epoch;

        foreach (var region in update.RegionViews)
        {
            if (!_regions.TryGetValue(region.Region, out var known) || known.ViewNumber < region.ViewNumber)
            {
                _regions[region.Region] = region;
            }
        }

        foreach (var group in update.GroupViews)
        {
            if (!_groups.TryGetValue(group.Group, out var known) || known.ViewNumber < group.ViewNumber)
            {
                _groups[group.Group] = group;
                _groupsByName[group.Name] = group;
            }
        }

        foreach (var left in update.LeftGroups)
        {
            if (_groups.Remove(left, out var view))
            {
                _groupsByName.Remove(view.Name);
            }
        }

        ForgetUnreferencedRegions();
        ViewsChanged?.Invoke(update);
    }

    private readonly HashSet<RegionId> _referenced = new();
    private readonly List<RegionId> _unreferenced = new();

    /// <summary>Region views no group view of this node references any more (it left the groups mapped to them, or their
    /// groups' views moved to other regions).</summary>
    public long RegionViewsForgotten { get; private set; }

    /// <summary>Region views held now: those of the regions this node's groups map to (its own among them).</summary>
    public int RegionViewCount => _regions.Count;

    /// <summary>Keeps only the region views some group view of this node references: the node receives from or sends into
    /// those regions only. A region that comes back into a group's view comes with its current view (the GMS sends a
    /// node the views of every region of a group whose view names a changed region, and of every region of its groups
    /// when its own groups change), so nothing needed is lost. Without this a node kept every region view a group it
    /// was ever in referenced.</summary>
    private void ForgetUnreferencedRegions()
    {
        foreach (var group in _groups.Values)
        {
            foreach (var region in group.Regions)
            {
                _referenced.Add(region.Region);
            }
        }

        foreach (var region in _regions.Keys)
        {
            if (!_referenced.Contains(region))
            {
                _unreferenced.Add(region);
            }
        }

        foreach (var region in _unreferenced)
        {
            _regions.Remove(region);
        }

        RegionViewsForgotten += _unreferenced.Count;
        _referenced.Clear();
        _unreferenced.Clear();
    }

    private void OnRefused(GmsRefusal reason, string? group, long limit)
    {
        var refusal = new GmsRefusedException(reason, group, limit);
        if (group is null)
        {
            if (!IsRegistered)
            {
                RegistrationRefusal = refusal; // the Hello alarm keeps asking
            }

            return;
        }

        if (_wanted.Remove(group))
        {
            JoinRefused?.Invoke(group, refusal);
        }
    }

    private void OnPeerFailed(NetAddress peer)
    {
        if (peer != _gms || _stopped)
        {
            return;
        }

        if (_replicas.Length > 1 && IsRegistered)
        {
            // Another replica may lead now: keep the id and views, and ask the next one (it redirects if it does not lead).
            _welcomesPending = true;
            MoveTo(_replicas[(Array.IndexOf(_replicas, _gms) + 1) % _replicas.Length], hello: true, forget: true);
            RequestViews(_gms); // a follower may answer at once: views the old leader committed but never sent
            return;
        }

        LoseGms(forgetChannel: true);
    }

    private void LoseGms(bool forgetChannel)
    {
        _requests.Clear(); // registering again re-joins every wanted group
        _scheduler.Cancel(_heartbeatAlarm);
        if (forgetChannel)
        {
            _channel.Forget(_gms);
        }

        Node = null;
        GmsLost?.Invoke();
        SendHello();
    }

    private void Send(GmsMessage message) => _channel.Send(_gms, GmsCodec.Encode(message));

    /// <summary>Joins and leaves must all arrive, in order: one the channel refuses (its send buffer is full, e.g. a node
    /// joining thousands of groups at once) waits, with every later one, and is offered again at each heartbeat. Bounded:
    /// a join or leave of a group replaces the one still waiting for that group (only the last wish counts), a rekey
    /// of a region already waiting is not queued again, so what waits is at most one request per group and per region
    /// however often the application flips (<see cref="RequestsCoalesced"/>).</summary>
    private void Request(GmsMessage message)
    {
        int removed = message.Kind is GmsMessageKind.Join or GmsMessageKind.Leave
            ? _requests.RemoveAll(r => r.Kind is GmsMessageKind.Join or GmsMessageKind.Leave && r.GroupName == message.GroupName)
            : message.Kind == GmsMessageKind.Rekey ? _requests.RemoveAll(r => r.Kind == GmsMessageKind.Rekey && r.Number == message.Number) : 0;
        RequestsCoalesced += removed;
        _requests.Add(message);
        FlushRequests();
    }

    /// <summary>Joins, leaves and rekeys waiting for room in the channel's send buffer.</summary>
    public int RequestsWaiting => _requests.Count;

    /// <summary>Waiting requests replaced by a later one for the same group or region.</summary>
    public long RequestsCoalesced { get; private set; }

    private void FlushRequests()
    {
        int sent = 0;
        while (sent < _requests.Count && _channel.Send(_gms, GmsCodec.Encode(_requests[sent])))
        {
            sent++;
        }

        _requests.RemoveRange(0, sent);
    }
}
