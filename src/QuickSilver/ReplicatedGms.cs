using QuickSilver.Core;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Raft;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm;

namespace QuickSilver;

/// <summary>What one GMS replica knows at one moment (<see cref="ReplicatedGms.GetStatusAsync"/>).</summary>
/// <param name="IsLeading">It leads and has taken over (it talks to nodes).</param>
/// <param name="Leader">The leader's GMS address as this replica knows it (itself when leading; null: unknown).</param>
/// <param name="Epoch">The GMS epoch (fixed by the first leader ever; 0 before).</param>
/// <param name="Nodes">Registered nodes.</param>
/// <param name="Groups">Groups.</param>
/// <param name="CommandsApplied">Log commands applied so far (snapshots included).</param>
/// <param name="TakeOvers">Times this replica took over as leader.</param>
/// <param name="FailuresDetected">Nodes it declared dead while leading.</param>
/// <param name="IdsIssued">Node ids handed out so far (never reused, so a renumbering shows as more ids than nodes).</param>
public sealed record GmsReplicaStatus(bool IsLeading, NetAddress? Leader, ulong Epoch, int Nodes, int Groups, long CommandsApplied, long TakeOvers, long FailuresDetected, long IdsIssued)
{
    /// <summary>Reads (a node asking for its views) this replica answered, leading or following.</summary>
    public long ReadsServed { get; init; }

    /// <summary>Reads it redirected to the leader, following but not fresh enough (docs/membership.md, "Reads").</summary>
    public long ReadsRedirected { get; init; }

    /// <summary>Log entries its applied state is behind the leader's commit index as it last learned it (0 leading).</summary>
    public long FollowerLag { get; init; }

    /// <summary>The engine's current Raft term (a disturbed election shows as a higher one).</summary>
    public long Term { get; init; }

    /// <summary>Whether its Raft traffic is TLS authenticated by the cluster secret.</summary>
    public bool RaftAuthenticated { get; init; }

    /// <summary>Raft peers it refused at the TLS handshake (without the cluster secret's key).</summary>
    public long RaftPeersRefused { get; init; }

    /// <summary>Replicas in the replica set as its engine knows it (0: not yet in one, a joining replica).</summary>
    public int Replicas { get; init; }

    /// <summary>Replica-set changes it committed while leading, on other replicas' requests.</summary>
    public long ReplicaChanges { get; init; }
}

/// <summary>
/// One replica of a replicated GMS (docs/membership.md, "Replicated GMS"): a core thread with the GMS stack (reliable
/// unicast and the GMS server) on a UDP endpoint at its address, and DotNext Raft over TCP at the same IP address and
/// port, with its log and snapshots on disk. The leader runs the GMS (batches, heartbeats, failure detection, updates);
/// the others apply the committed commands and redirect nodes to it. Run three (or five): <c>qs gms --id N --peers
/// a,b,c --data DIR</c>; nodes list the same addresses in <see cref="QuickSilverNodeOptions.GmsReplicas"/>.
/// <para>Every replica must be given the same <see cref="GmsOptions"/> that shape the state (multicast pool,
/// <see cref="GmsOptions.UseMulticast"/>): a replica does not probe for IP multicast as an embedded GMS does, since
/// replicas that decided differently would number addresses differently.</para>
/// </summary>
public sealed class ReplicatedGms : IAsyncDisposable
{
    private readonly QuickSilverCore _core;
    private readonly RaftGmsLog _log;
    private readonly GmsServer _server;

    private ReplicatedGms(QuickSilverCore core, RaftGmsLog log, GmsServer server, RaftGmsOptions options)
    {
        _core = core;
        _log = log;
        _server = server;
        Options = options;
    }

    /// <summary>The replica's Raft options (its id, the peers, the data directory).</summary>
    public RaftGmsOptions Options { get; }

    /// <summary>This replica's GMS address.</summary>
    public NetAddress Address => Options.Self;

    /// <summary>Starts the replica: restores its state from disk, joins the Raft cluster, and serves nodes once it leads
    /// (or redirects them to the leader).</summary>
    public static async Task<ReplicatedGms> StartAsync(RaftGmsOptions options, GmsOptions? gms = null, DatagramSecurityOptions? security = null,
        Microsoft.Extensions.Logging.ILoggerFactory? loggerFactory = null, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (options.ClusterSecret is null && security is { Enabled: true, ClusterSecret: { } secret })
        {
            options = options with { ClusterSecret = secret }; // replica traffic is authenticated by the nodes' secret too
        }

        options.Validate();
        gms ??= new GmsOptions();
        gms.Validate();
        security?.Validate("ReplicatedGms security");
        var loggers = loggerFactory ?? Microsoft.Extensions.Logging.Abstractions.NullLoggerFactory.Instance;
        var logger = loggers.CreateLogger("QuickSilver.Gms");
        var core = QuickSilverCore.Start(new CoreOptions { Name = $"gms{options.Id}", Logger = loggers.CreateLogger("QuickSilver.Core") });
        RaftGmsLog? log = null;
        try
        {
            var endpoint = core.OpenUdp(new UdpEndpointOptions
            {
                Bind = options.Self,
                MaxDatagramSize = options.Self.IsLoopback ? QuickSilverNodeOptions.LoopbackDatagramSize : QuickSilverNodeOptions.EthernetDatagramSize,
            });
            log = new RaftGmsLog(options, action => core.InvokeAsync(() =>
            {
                action();
                return true;
            }), loggers.CreateLogger("QuickSilver.Gms.Raft"));
            var raftLog = log;
            var server = await core.InvokeAsync(() => QsmStack.BuildGms(endpoint, core, (uint)Random.Shared.Next(1, int.MaxValue),
                    (ulong)Random.Shared.NextInt64(1, long.MaxValue), gms with { Log = raftLog }, logger: logger, log: new RateLimitedLog(logger, core), security: security)
                .Get<GmsServerLayer>().Server).ConfigureAwait(false);
            await log.StartAsync(cancellationToken).ConfigureAwait(false);
            if (options.Join)
            {
                // A new replica asks the leader (through any replica) to add it, once a second until it is added.
                var others = options.Peers.Where(p => p != options.Self).ToList();
                await core.InvokeAsync(() =>
                {
                    server.AskToChangeReplicaSet(others, join: true);
                    return true;
                }).ConfigureAwait(false);
            }

            return new ReplicatedGms(core, log, server, options);
        }
        catch
        {
            if (log is not null)
            {
                await log.DisposeAsync().ConfigureAwait(false);
            }

            core.Dispose();
            throw;
        }
    }

    /// <summary>This replica's role and counts (leading or following, the leader it knows, epoch, nodes, groups, commands
    /// applied, take-overs, failures detected, ids issued), read on its core.</summary>
    public Task<GmsReplicaStatus> GetStatusAsync() => _core.InvokeAsync(() => new GmsReplicaStatus(
        _server.IsLeading, _server.IsLeading ? Address : _server.Leader, _server.Epoch, _server.State.NodeCount, _server.State.GroupCount,
        _server.Machine.CommandsApplied, _server.TakeOvers, _server.FailuresDetected, _server.State.IdsIssued)
    {
        ReadsServed = _server.ReadsServed,
        Term = _log.Term,
        RaftAuthenticated = _log.Authenticated,
        RaftPeersRefused = _log.PeersRefused,
        Replicas = _log.Replicas.Count,
        ReplicaChanges = _server.ReplicaChanges,
        ReadsRedirected = _server.ReadsRedirected,
        FollowerLag = _server.FollowerLag,
    });

    /// <summary>Adds a replica to the running GMS (docs/membership.md, "Changing the replica set"); call it on the leader,
    /// with the new replica already started with <see cref="RaftGmsOptions.Join"/>. The engine copies it the log, then
    /// commits a configuration that includes it. Throws <see cref="InvalidOperationException"/> naming the leader when
    /// this replica does not lead; false when the change was not committed.</summary>
    public Task<bool> AddReplicaAsync(NetAddress replica, CancellationToken cancellationToken = default)
        => ChangeReplicasAsync(() => _log.AddReplicaAsync(replica, cancellationToken), "add");

    /// <summary>Removes a replica from the running GMS; call it on the leader, then stop the removed replica. Throws
    /// <see cref="InvalidOperationException"/> naming the leader when this replica does not lead.</summary>
    public Task<bool> RemoveReplicaAsync(NetAddress replica, CancellationToken cancellationToken = default)
        => ChangeReplicasAsync(() => _log.RemoveReplicaAsync(replica, cancellationToken), "remove");

    /// <summary>Asks the leader to remove this replica from the replica set and waits, at most <paramref name="timeout"/>,
    /// until it confirms (true) — for a replica leaving on purpose (<c>qs gms --leave-on-exit</c>). Dispose it after.</summary>
    public async Task<bool> LeaveReplicaSetAsync(TimeSpan timeout)
    {
        var others = _log.Replicas.Where(r => r != Address).ToList();
        if (others.Count == 0)
        {
            return false;
        }

        await _core.InvokeAsync(() =>
        {
            _server.AskToChangeReplicaSet(others, join: false);
            return true;
        }).ConfigureAwait(false);
        var deadline = DateTime.UtcNow + timeout;
        while (DateTime.UtcNow < deadline)
        {
            if (await _core.InvokeAsync(() => _server.ReplicaChangeConfirmed).ConfigureAwait(false))
            {
                return true;
            }

            await Task.Delay(50).ConfigureAwait(false);
        }

        return false;
    }

    /// <summary>The replica set as this replica knows it now (it changes with <see cref="AddReplicaAsync"/> and
    /// <see cref="RemoveReplicaAsync"/>).</summary>
    public IReadOnlyList<NetAddress> Replicas => _log.Replicas;

    private async Task<bool> ChangeReplicasAsync(Func<Task<bool>> change, string what)
    {
        var status = await GetStatusAsync().ConfigureAwait(false);
        if (status.IsLeading)
        {
            try
            {
                return await change().ConfigureAwait(false);
            }
            catch (DotNext.Net.Cluster.Consensus.Raft.NotLeaderException)
            {
                status = await GetStatusAsync().ConfigureAwait(false);
            }
        }

        throw new InvalidOperationException($"Cannot {what} a replica at {Address}: it does not lead; the leader is {status.Leader?.ToString() ?? "unknown"}.");
    }

    /// <summary>The replicated state's bytes (equal on replicas that applied the same commands).</summary>
    internal Task<byte[]> ExportStateAsync() => _core.InvokeAsync(() => _server.Machine.ExportSnapshot());

    /// <summary>What this replica knows of the groups (as <see cref="QuickSilverNode.GetGmsSnapshotAsync"/>).</summary>
    public Task<GmsSnapshot> GetSnapshotAsync() => _core.InvokeAsync(() => GmsSnapshot.Of(_server.State));

    /// <summary><paramref name="count"/> distinct loopback addresses whose port was free a moment ago for both UDP (the
    /// GMS) and TCP (Raft, on the same port): for tests, benchmarks and demos that start replicas on one machine.</summary>
    public static NetAddress[] FreeLoopbackAddresses(int count)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(count);
        var found = new List<NetAddress>();
        while (found.Count < count)
        {
            int port = Random.Shared.Next(30000, 60000);
            try
            {
                using var tcp = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Stream, System.Net.Sockets.ProtocolType.Tcp);
                tcp.Bind(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, port));
                using var udp = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp);
                udp.Bind(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, port));
                if (!found.Contains(NetAddress.Loopback((ushort)port)))
                {
                    found.Add(NetAddress.Loopback((ushort)port));
                }
            }
            catch (System.Net.Sockets.SocketException)
            {
                // Taken for one of the two: try another.
            }
        }

        return [.. found];
    }

    /// <summary>Leaves the Raft cluster (the others elect a leader without it) and stops the core.</summary>
    public async ValueTask DisposeAsync()
    {
        await _log.DisposeAsync().ConfigureAwait(false);
        _core.Dispose();
    }
}
