using System.Net;
using DotNext.Net.Cluster;
using DotNext.Net.Cluster.Consensus.Raft;
using DotNext.Net.Cluster.Consensus.Raft.StateMachine;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace QuickSilver.Membership.Raft;

/// <summary>
/// A GMS replica's log on DotNext Raft over TCP (<see cref="RaftCluster"/>), with a persistent write-ahead log and
/// snapshots under <see cref="RaftGmsOptions.DataDirectory"/>. It tells the server who leads (on every leader change,
/// and again every <see cref="LeaderPoll"/>, which the server ignores when nothing changed), commits what the server
/// proposes with <c>ReplicateAsync</c>, and hands committed commands to the server through
/// <see cref="GmsRaftStateMachine"/>. Everything that touches the server runs on the server's core thread, through
/// the dispatcher the host gives; the engine's own threads only wait for it.
/// </summary>
internal sealed class RaftGmsLog : IGmsLog, IAsyncDisposable
{
    /// <summary>How often the leader state is repeated to the server (a missed or failed take-over is retried then).</summary>
    public static readonly TimeSpan LeaderPoll = TimeSpan.FromMilliseconds(200);

    /// <summary>How long a proposal may take before it is reported lost.</summary>
    public static readonly TimeSpan ProposalTimeout = TimeSpan.FromSeconds(5);

    private readonly RaftGmsOptions _options;
    private readonly Func<Action, Task> _onCore;
    private readonly CancellationTokenSource _stop = new();
    private GmsServer? _server;
    private RaftCluster? _cluster;
    private WriteAheadLog? _wal;
    private GmsRaftStateMachine? _machine;
    private Task? _poll;
    private ReplicaSetStorage? _replicaSet;
    private RaftTls? _tls;

    /// <param name="onCore">Runs an action on the GMS server's core thread and completes when it has run.</param>
    public RaftGmsLog(RaftGmsOptions options, Func<Action, Task> onCore, ILogger? logger = null)
    {
        _options = options ?? throw new ArgumentNullException(nameof(options));
        _options.Validate();
        _onCore = onCore ?? throw new ArgumentNullException(nameof(onCore));
        Logger = logger ?? NullLogger.Instance;
    }

    public uint ReplicaId => (uint)_options.Id;

    public ILogger Logger { get; }

    /// <summary>Raft peers refused at the TLS handshake (no certificate, or not the cluster secret's key); 0 without a
    /// <see cref="RaftGmsOptions.ClusterSecret"/>.</summary>
    public long PeersRefused => _tls?.Refused ?? 0;

    /// <summary>The current Raft term as persisted by this replica (0 before start).</summary>
    public long Term => _wal is IPersistentState state ? state.Term : 0;

    /// <summary>Whether replica traffic is TLS (a cluster secret was given).</summary>
    public bool Authenticated => _tls is not null;

    /// <summary>The engine (after <see cref="StartAsync"/>).</summary>
    public IRaftCluster Cluster => _cluster ?? throw new InvalidOperationException("The Raft log has not been started.");

    public void Start(GmsServer server) => _server = server;

    /// <summary>Loads the saved replica set (<see cref="ReplicaSetStorage"/>), restores the latest snapshot into the server,
    /// opens the write-ahead log and waits while it replays the committed entries after the snapshot, then joins the Raft
    /// cluster. Call once the server exists (<see cref="Start"/>).</summary>
    public async Task StartAsync(CancellationToken cancellationToken = default)
    {
        if (_server is null)
        {
            throw new InvalidOperationException("The GMS server must be built on this log before it starts.");
        }

        var root = Path.GetFullPath(_options.DataDirectory);
        Directory.CreateDirectory(root);
        var self = _options.Self.ToIPEndPoint();
        _tls = _options.ClusterSecret is { } secret ? RaftTls.FromSecret(secret, Logger, ReplicaId) : null;

        // The replica set, from the file a change saved (not --peers, which the change made stale) at the log index it came
        // from, before the log is opened: the configuration entries the log replays are then installed only if newer.
        _replicaSet = new ReplicaSetStorage(root, _options.Self, givenOthers: _options.Peers.Count > 1, Logger, ReplicaId);
        var saved = ReplicaSetStorage.Load(root);
        if (saved is not null && !saved.Replicas.SequenceEqual(_options.Peers.OrderBy(a => a.Ip).ThenBy(a => a.Port)))
        {
            RaftLog.ReplicaSetFromDisk(Logger, ReplicaId, saved.Replicas, _options.Peers);
        }

        if (!_options.Join || saved is not null)
        {
            // (A joining replica has no configuration until the leader's reaches it through the log.)
            await _replicaSet.SeedAsync(saved, _options.Peers, cancellationToken).ConfigureAwait(false);
        }

        _machine = new GmsRaftStateMachine(new DirectoryInfo(Path.Combine(root, "snapshots")), this, _options.SnapshotEvery);
        await _machine.RestoreAsync(cancellationToken).ConfigureAwait(false);
        _wal = new WriteAheadLog(new WriteAheadLog.Options { Location = Path.Combine(root, "wal") }, _machine);

        // The log replays its committed entries as soon as it is opened. Wait for that before the engine starts: its
        // configuration entries all reach the storage through the state machine (the engine hands them there only once it
        // has started), and the engine then starts from the set they leave, rather than installing them while it loads
        // its configuration (a set installed in between was lost).
        await _wal.InitializeAsync(cancellationToken).ConfigureAwait(false);

        var configuration = new RaftCluster.TcpConfiguration(self)
        {
            SslOptions = _tls?.CreateOptions(),
            LowerElectionTimeout = (int)_options.LowerElectionTimeout.TotalMilliseconds,
            UpperElectionTimeout = (int)_options.UpperElectionTimeout.TotalMilliseconds,
            RequestTimeout = _options.RequestTimeout,
            ColdStart = false,
            TransmissionBlockSize = 8192,
            ConfigurationStorage = _replicaSet,
        };

        _cluster = new RaftCluster(configuration) { AuditTrail = _wal };
        _cluster.LeaderChanged += OnLeaderChanged;
        await _cluster.StartAsync(cancellationToken).ConfigureAwait(false);
        _poll = PollLeaderAsync(_stop.Token);
        RaftLog.Started(Logger, ReplicaId, _options.Self, _options.Peers, root);
    }

    /// <summary>On the leader: adds the replica at <paramref name="replica"/> (already running with
    /// <see cref="RaftGmsOptions.Join"/>) to the replica set. The engine copies it the log, then commits a configuration
    /// that includes it. False if the replica could not be caught up or the change not committed.</summary>
    public Task<bool> AddReplicaAsync(NetAddress replica, CancellationToken cancellationToken)
        => ChangeAsync(replica, add: true, cancellationToken);

    /// <summary>On the leader: removes the replica at <paramref name="replica"/> from the replica set (commits a
    /// configuration without it). Stop its process afterwards.</summary>
    public Task<bool> RemoveReplicaAsync(NetAddress replica, CancellationToken cancellationToken)
        => ChangeAsync(replica, add: false, cancellationToken);

    /// <summary>One change, idempotent: true at once when the replica is already in (out of) the set. The engine takes one
    /// change at a time; while another is under way (the replica's own request racing an operator's, say) this waits
    /// for it and tries again, until <paramref name="cancellationToken"/>.</summary>
    private async Task<bool> ChangeAsync(NetAddress replica, bool add, CancellationToken cancellationToken)
    {
        var cluster = (RaftCluster)Cluster;
        while (true)
        {
            if (Replicas.Contains(replica) == add)
            {
                return true;
            }

            try
            {
                return add
                    ? await cluster.AddMemberAsync(replica.ToIPEndPoint(), cancellationToken).ConfigureAwait(false)
                    : await cluster.RemoveMemberAsync(replica.ToIPEndPoint(), cancellationToken).ConfigureAwait(false);
            }
            catch (RaftCluster<RaftClusterMember>.ConcurrentMembershipModificationException)
            {
                await Task.Delay(100, cancellationToken).ConfigureAwait(false);
            }
        }
    }

    /// <summary>The engine's configuration storage, which keeps the replica set on disk (after <see cref="StartAsync"/>
    /// has begun).</summary>
    internal ReplicaSetStorage ReplicaSet => _replicaSet ?? throw new InvalidOperationException("The Raft log has not been started.");

    /// <summary>The replica set as this replica's engine knows it now.</summary>
    public IReadOnlyList<NetAddress> Replicas => [.. Cluster.Members.Select(m => m.EndPoint).OfType<IPEndPoint>().Select(NetAddress.FromIPEndPoint).OrderBy(a => a.Port)];

    /// <summary>The server's replica-set change: on the engine, within 30 s; the outcome goes back to the server.</summary>
    public void ChangeReplicas(NetAddress replica, bool add) => _ = Task.Run(async () =>
    {
        bool committed = false;
        try
        {
            using var timeout = CancellationTokenSource.CreateLinkedTokenSource(_stop.Token);
            timeout.CancelAfter(TimeSpan.FromSeconds(30));
            committed = add ? await AddReplicaAsync(replica, timeout.Token).ConfigureAwait(false) : await RemoveReplicaAsync(replica, timeout.Token).ConfigureAwait(false);
        }
        catch (Exception e)
        {
            // Whatever the engine throws, the server must hear back (it handles one change at a time).
            RaftLog.NotCommitted(Logger, ReplicaId, 0, e.Message);
        }

        await OnCoreAsync(server => server.OnReplicaChangeDone(replica, add, committed)).ConfigureAwait(false);
    });

    public void Propose(GmsCommand command, long sequence)
    {
        var cluster = _cluster;
        byte[] bytes = GmsStateMachine.Encode(command);
        _ = Task.Run(async () =>
        {
            bool committed = false;
            try
            {
                if (cluster is not null)
                {
                    // Bounded: a proposal that neither commits nor fails (a leader cut off from its majority that has not
                    // stepped down yet) is reported lost, so the server can propose again. Should it commit later after
                    // all, it is applied then like any other committed command.
                    using var timeout = CancellationTokenSource.CreateLinkedTokenSource(_stop.Token);
                    timeout.CancelAfter(ProposalTimeout);
                    await cluster.ReplicateAsync(bytes, context: null, timeout.Token).ConfigureAwait(false);
                    committed = true;
                }
            }
            catch (Exception e) when (e is NotLeaderException or OperationCanceledException or ObjectDisposedException or QuorumUnreachableException or InvalidOperationException)
            {
                RaftLog.NotCommitted(Logger, ReplicaId, sequence, e.Message);
            }

            await OnCoreAsync(server => server.OnProposalDone(sequence, committed)).ConfigureAwait(false);
        });
    }

    /// <summary>Runs <paramref name="action"/> on the server's core thread; a stopped core is not an error here.</summary>
    internal async Task OnCoreAsync(Action<GmsServer> action)
    {
        var server = _server ?? throw new InvalidOperationException("No GMS server.");
        try
        {
            await _onCore(() => action(server)).ConfigureAwait(false);
        }
        catch (ObjectDisposedException) when (_stop.IsCancellationRequested)
        {
        }
    }

    private void OnLeaderChanged(ICluster cluster, IClusterMember? leader) => _ = ReportLeaderAsync(leader);

    private Task ReportLeaderAsync(IClusterMember? leader)
    {
        bool self = leader is { IsRemote: false };
        NetAddress? address = leader?.EndPoint is IPEndPoint ip ? NetAddress.FromIPEndPoint(ip) : null;
        return OnCoreAsync(server => server.OnLeaderChanged(self ? null : address, self));
    }

    private async Task PollLeaderAsync(CancellationToken token)
    {
        using var timer = new PeriodicTimer(LeaderPoll);
        try
        {
            while (await timer.WaitForNextTickAsync(token).ConfigureAwait(false))
            {
                if (_cluster is { } cluster)
                {
                    var leader = cluster.Leader;
                    bool self = leader is { IsRemote: false } && !cluster.LeadershipToken.IsCancellationRequested;
                    await ReportLeaderAsync(self ? leader : leader is { IsRemote: true } ? leader : null).ConfigureAwait(false);
                    if (leader is IRaftClusterMember { IsRemote: true } remote)
                    {
                        await LearnLeaderCommitAsync(remote, token).ConfigureAwait(false);
                    }
                }
            }
        }
        catch (OperationCanceledException)
        {
        }
    }

    /// <summary>A follower asks the leader for its commit index (the engine's <c>SynchronizeAsync</c>, one request within
    /// <see cref="RaftGmsOptions.RequestTimeout"/>) and tells the server, with the index it has applied itself: follower
    /// reads are answered only while this is recent and the gap small (docs/membership.md, "Reads"). A failure tells the
    /// server nothing, so its last figure ages out.</summary>
    private async Task LearnLeaderCommitAsync(IRaftClusterMember leader, CancellationToken token)
    {
        if (_wal is not { } wal)
        {
            return;
        }

        try
        {
            using var timeout = CancellationTokenSource.CreateLinkedTokenSource(token);
            timeout.CancelAfter(_options.RequestTimeout);
            if (await leader.SynchronizeAsync(wal.LastCommittedEntryIndex, timeout.Token).ConfigureAwait(false) is { } commit)
            {
                long applied = wal.LastAppliedIndex;
                await OnCoreAsync(server => server.OnLeaderCommit(commit, applied)).ConfigureAwait(false);
            }
        }
        catch (Exception e) when (e is DotNext.Net.Cluster.MemberUnavailableException or OperationCanceledException or ObjectDisposedException or InvalidOperationException)
        {
            token.ThrowIfCancellationRequested();
        }
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync().ConfigureAwait(false);
        if (_poll is not null)
        {
            await _poll.ConfigureAwait(ConfigureAwaitOptions.SuppressThrowing);
        }

        if (_cluster is not null)
        {
            _cluster.LeaderChanged -= OnLeaderChanged;
            try
            {
                await _cluster.StopAsync(CancellationToken.None).ConfigureAwait(false);
            }
            catch (Exception e) when (e is ObjectDisposedException or OperationCanceledException)
            {
            }

            _cluster.Dispose();
        }

        if (_wal is not null)
        {
            await _wal.DisposeAsync().ConfigureAwait(false);
        }

        if (_machine is not null)
        {
            await _machine.DisposeAsync().ConfigureAwait(false);
        }

        _replicaSet?.Dispose();
        _tls?.Dispose();
        _stop.Dispose();
    }
}
