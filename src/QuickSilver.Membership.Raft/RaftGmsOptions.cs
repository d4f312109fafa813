using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Raft;

/// <summary>Options of one replica of a replicated GMS (docs/membership.md, "Replicated GMS"). Every replica of one
/// GMS must be given the same <see cref="Peers"/>, in any order.</summary>
public sealed record RaftGmsOptions
{
    /// <summary>This replica's number, 1-based: its position in <see cref="Peers"/>.</summary>
    public int Id { get; init; } = 1;

    /// <summary>Every replica's GMS address (UDP, where nodes reach it). The replica's Raft traffic uses TCP on the same
    /// IP address and port number. 3 or 5 replicas tolerate 1 or 2 failures; 1 is allowed (no fault tolerance).</summary>
    public IReadOnlyList<NetAddress> Peers { get; init; } = [];

    /// <summary>Where the replica keeps its Raft log and snapshots (created if missing). A full restart of every replica
    /// from its directory keeps the GMS's state: node ids, views, the epoch.</summary>
    public string DataDirectory { get; init; } = "";

    /// <summary>Election timeout range (Raft §5.2): a follower that hears no leader for a random time in this range
    /// stands for election. Failover takes about this long plus one round trip.</summary>
    public TimeSpan LowerElectionTimeout { get; init; } = TimeSpan.FromMilliseconds(300);

    public TimeSpan UpperElectionTimeout { get; init; } = TimeSpan.FromMilliseconds(600);

    /// <summary>How long a Raft request to a peer may take before it is abandoned.</summary>
    public TimeSpan RequestTimeout { get; init; } = TimeSpan.FromMilliseconds(250);

    /// <summary>A snapshot is written every this many applied commands (and the log before it may be dropped).</summary>
    public int SnapshotEvery { get; init; } = 256;

    /// <summary>The cluster secret (at least 32 bytes; the one of <c>--secret-file</c>): when set, every Raft connection
    /// between replicas is TLS 1.3, authenticated both ways by a key derived from it and encrypted
    /// (docs/membership.md, "Replica traffic"); a peer without it is refused and counted. Null: plain TCP. A replicated
    /// GMS started with datagram security uses that secret unless this is set.</summary>
    public byte[]? ClusterSecret { get; init; }

    /// <summary>This replica is new to a running GMS (docs/membership.md, "Changing the replica set"): it starts with no
    /// configuration, takes part in no election, and waits until the leader adds it (<c>AddReplicaAsync</c>,
    /// <c>qs gms --add-replica</c>), which copies it the log and commits a configuration that includes it. <see cref="Peers"/>
    /// lists it with the replicas it joins. Default false: the replica set is <see cref="Peers"/>.</summary>
    public bool Join { get; init; }

    /// <summary>The replica's address from <see cref="Peers"/>.</summary>
    public NetAddress Self => Peers[Id - 1];

    public void Validate()
    {
        ArgumentNullException.ThrowIfNull(Peers, "RaftGmsOptions.Peers");
        if (Peers.Count == 0)
        {
            throw new ArgumentException("RaftGmsOptions.Peers must list every replica's address (e.g. --peers 127.0.0.1:47001,127.0.0.1:47002,127.0.0.1:47003).", nameof(Peers));
        }

        GmsOptions.ValidateReplicas(Peers, "RaftGmsOptions.Peers");
        if (Id < 1 || Id > Peers.Count)
        {
            throw new ArgumentOutOfRangeException(nameof(Id), Id, $"RaftGmsOptions.Id must be between 1 and the number of peers ({Peers.Count}); got {Id}.");
        }
        if (string.IsNullOrWhiteSpace(DataDirectory))
        {
            throw new ArgumentException("RaftGmsOptions.DataDirectory must name a directory for the replica's log and snapshots.", nameof(DataDirectory));
        }

        if (LowerElectionTimeout < TimeSpan.FromMilliseconds(10))
        {
            throw new ArgumentOutOfRangeException(nameof(LowerElectionTimeout), LowerElectionTimeout, "RaftGmsOptions.LowerElectionTimeout must be at least 10 ms.");
        }
        if (UpperElectionTimeout <= LowerElectionTimeout)
        {
            throw new ArgumentException($"RaftGmsOptions.UpperElectionTimeout ({UpperElectionTimeout}) must exceed LowerElectionTimeout ({LowerElectionTimeout}).", nameof(UpperElectionTimeout));
        }

        if (RequestTimeout <= TimeSpan.Zero || RequestTimeout >= LowerElectionTimeout)
        {
            throw new ArgumentException($"RaftGmsOptions.RequestTimeout ({RequestTimeout}) must be positive and shorter than LowerElectionTimeout ({LowerElectionTimeout}).", nameof(RequestTimeout));
        }

        if (ClusterSecret is { Length: < QuickSilver.Core.Security.DatagramSecurityOptions.MinSecretBytes })
        {
            throw new ArgumentException($"RaftGmsOptions.ClusterSecret must be at least {QuickSilver.Core.Security.DatagramSecurityOptions.MinSecretBytes} bytes; got {ClusterSecret.Length}.", nameof(ClusterSecret));
        }

        if (SnapshotEvery < 1 || SnapshotEvery > 1 << 20)
        {
            throw new ArgumentOutOfRangeException(nameof(SnapshotEvery), SnapshotEvery, "RaftGmsOptions.SnapshotEvery must be between 1 and 1,048,576.");
        }
    }
}
