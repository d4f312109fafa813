using QuickSilver.Core;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>Options of the GMS server. Defaults suit one machine; every value is validated at start-up.</summary>
public sealed record GmsOptions
{
    /// <summary>How often the GMS applies the requests it has collected (the "predefined maximum rate" of QSM §2.1).</summary>
    public TimeSpan BatchInterval { get; init; } = TimeSpan.FromMilliseconds(100);

    /// <summary>After a restart (a node says Hello naming an earlier epoch of the GMS: docs/membership.md, "A restarted
    /// GMS"), how long the GMS registers nodes but holds back joins, leaves and the views they make, so that every node
    /// that was a member before has registered again and the first views of the new epoch include them all (a node
    /// missing from the first view would miss what its groups' senders send in it). Once per GMS lifetime, so a forged
    /// old epoch can delay views at most this long once. Zero: no hold. At most one minute.</summary>
    public TimeSpan RestartGrace { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>The longest <see cref="HeartbeatInterval"/>: a node takes no longer one from a Welcome (so a forged or
    /// broken one cannot make it go silent for days and be declared dead).</summary>
    public static readonly TimeSpan MaxHeartbeatInterval = TimeSpan.FromMinutes(1);

    /// <summary>How often nodes send heartbeats, at most <see cref="MaxHeartbeatInterval"/>.</summary>
    public TimeSpan HeartbeatInterval { get; init; } = TimeSpan.FromMilliseconds(500);

    /// <summary>A node silent for this long is declared dead and removed from every view.</summary>
    public TimeSpan FailureTimeout { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary>First address of the regions' multicast address pool (port included).</summary>
    public NetAddress MulticastPoolStart { get; init; } = new(0xEFFF0000u + 0x0100u, 47000); // 239.255.1.0:47000

    public int MulticastPoolSize { get; init; } = 1024;

    /// <summary>Whether regions get IP multicast addresses. False (or a failed multicast probe at start-up, for an embedded
    /// GMS) makes every region use unicast fan-out with the same recovery protocol, for networks without multicast.</summary>
    public bool UseMulticast { get; init; } = true;

    /// <summary>Largest encoded control message the GMS accepts from a node; larger ones are dropped and counted.</summary>
    public int MaxMessageBytes { get; init; } = 64 * 1024;

    /// <summary>Nodes the GMS registers at most; a further Hello is refused (<see cref="GmsRefusal.TooManyNodes"/>).</summary>
    public int MaxNodes { get; init; } = 16_384;

    /// <summary>Nodes registered from one IPv4 address at most (one host cannot fill the node table); a further Hello
    /// from it is refused (<see cref="GmsRefusal.TooManyNodesFromAddress"/>). A host that runs more nodes needs more,
    /// and its reliable unicast's MaxConnectionsPerIp too.</summary>
    public int MaxNodesPerIp { get; init; } = 256;

    /// <summary>Groups one node may be in (joined, or asked to join); a further join is refused
    /// (<see cref="GmsRefusal.TooManyGroups"/>) until it leaves one.</summary>
    public int MaxGroupsPerNode { get; init; } = 8_192;

    /// <summary>Longest group name, in UTF-8 bytes, enforced on the GMS whatever the client checked; a longer one is
    /// refused (<see cref="GmsRefusal.GroupNameTooLong"/>). Names travel in every view of the group.</summary>
    public int MaxGroupNameBytes { get; init; } = 256;

    /// <summary>Joins and Hellos a registered node may send per second (a token bucket of <see cref="RequestBurst"/>):
    /// beyond it a join is refused (<see cref="GmsRefusal.RateLimited"/>) and a repeated Hello dropped and counted.
    /// Leaves are not limited (a node leaves only groups it joined) and heartbeats cost nothing to apply.</summary>
    public int MaxRequestsPerSecond { get; init; } = 1_000;

    /// <summary>The burst of <see cref="MaxRequestsPerSecond"/>: enough for a node to join all its groups at start.</summary>
    public int RequestBurst { get; init; } = 10_000;

    /// <summary>Whether a replica that does not lead answers reads (<see cref="GmsMessageKind.Sync"/>: a node asking for
    /// its current views) from its applied state when it is fresh enough; false: it redirects every read to the leader.
    /// The leader always answers. Default true.</summary>
    public bool FollowerReads { get; init; } = true;

    /// <summary>A follower answers a read only when the leader's commit index, as it last learned it, is at most this many
    /// Raft log entries ahead of the entries it has applied (each GMS batch is one entry; the engine adds a few of its
    /// own). Otherwise it redirects the node to the leader. Default 4; 0 to answer only when fully caught up.</summary>
    public int FollowerReadMaxLag { get; init; } = 4;

    /// <summary>A follower answers a read only when it learned the leader's commit index at most this long ago (a follower
    /// cut off from the leader does not know how far behind it is, and stops answering). Default 1 s.</summary>
    public TimeSpan FollowerReadMaxAge { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>Each replica answers one node's reads at most once per this interval (a read costs the node's whole set of
    /// views); more are dropped and counted. Default 100 ms.</summary>
    public TimeSpan MinReadInterval { get; init; } = TimeSpan.FromMilliseconds(100);

    /// <summary>Designer override of regions (QSM §1.3): a region name for a node's address, or null.</summary>
    public Func<NetAddress, string?>? PinRegion { get; init; }

    /// <summary>Where this GMS commits its state (a replica of a replicated GMS, set by its host); null: a single GMS.
    /// Not validated: set only by code in this assembly's friends.</summary>
    internal IGmsLog? Log { get; init; }

    /// <summary>The most replicas a replicated GMS may have (Raft clusters are 3 or 5; 7 is the practical ceiling).</summary>
    public const int MaxReplicas = 7;

    /// <summary>Checks a replica list: at most <see cref="MaxReplicas"/> unicast addresses with ports, no duplicates.</summary>
    public static void ValidateReplicas(IReadOnlyList<NetAddress> replicas, string name)
    {
        ArgumentNullException.ThrowIfNull(replicas, name);
        if (replicas.Count > MaxReplicas)
        {
            throw new ArgumentException($"{name} lists {replicas.Count} GMS replicas; at most {MaxReplicas} are supported.", name);
        }

        foreach (var replica in replicas)
        {
            if (replica.IsMulticast || replica.Port == 0 || replica.Ip == 0)
            {
                throw new ArgumentException($"{name} must list unicast addresses with ports; got {replica}.", name);
            }
        }

        if (replicas.Distinct().Count() != replicas.Count)
        {
            throw new ArgumentException($"{name} lists a replica twice: {string.Join(", ", replicas)}.", name);
        }
    }

    public void Validate()
    {
        OptionChecks.Positive(BatchInterval, $"GmsOptions.{nameof(BatchInterval)}");
        OptionChecks.Positive(HeartbeatInterval, $"GmsOptions.{nameof(HeartbeatInterval)}");
        if (HeartbeatInterval > MaxHeartbeatInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(HeartbeatInterval), HeartbeatInterval,
                $"GmsOptions.HeartbeatInterval ({HeartbeatInterval}) must be at most {MaxHeartbeatInterval}.");
        }

        if (RestartGrace < TimeSpan.Zero || RestartGrace > TimeSpan.FromMinutes(1))
        {
            throw new ArgumentOutOfRangeException(nameof(RestartGrace), RestartGrace,
                $"GmsOptions.RestartGrace ({RestartGrace}) must be between 0 and 1 minute.");
        }

        OptionChecks.Positive(FailureTimeout, $"GmsOptions.{nameof(FailureTimeout)}");
        if (FailureTimeout <= HeartbeatInterval * 2)
        {
            throw new ArgumentOutOfRangeException(nameof(FailureTimeout), FailureTimeout,
                $"GmsOptions.FailureTimeout ({FailureTimeout}) must exceed twice GmsOptions.HeartbeatInterval ({HeartbeatInterval}).");
        }

        if (!MulticastPoolStart.IsMulticast)
        {
            throw new ArgumentException($"GmsOptions.MulticastPoolStart must be a multicast address, got {MulticastPoolStart}.", nameof(MulticastPoolStart));
        }

        OptionChecks.InRange(MulticastPoolSize, 1, 1 << 20, $"GmsOptions.{nameof(MulticastPoolSize)}");
        OptionChecks.InRange(MaxMessageBytes, 256, 16 << 20, $"GmsOptions.{nameof(MaxMessageBytes)}");
        OptionChecks.InRange(MaxNodes, 1, 1 << 24, $"GmsOptions.{nameof(MaxNodes)}");
        OptionChecks.InRange(MaxNodesPerIp, 1, 1 << 24, $"GmsOptions.{nameof(MaxNodesPerIp)}");
        OptionChecks.InRange(MaxGroupsPerNode, 1, 1 << 24, $"GmsOptions.{nameof(MaxGroupsPerNode)}");
        OptionChecks.InRange(MaxGroupNameBytes, 1, MaxMessageBytes / 2, $"GmsOptions.{nameof(MaxGroupNameBytes)}");
        OptionChecks.InRange(MaxRequestsPerSecond, 1, 10_000_000, $"GmsOptions.{nameof(MaxRequestsPerSecond)}");
        OptionChecks.InRange(RequestBurst, 1, 100_000_000, $"GmsOptions.{nameof(RequestBurst)}");
        OptionChecks.InRange(FollowerReadMaxLag, 0, 1_000_000, $"GmsOptions.{nameof(FollowerReadMaxLag)}");
        OptionChecks.Positive(FollowerReadMaxAge, $"GmsOptions.{nameof(FollowerReadMaxAge)}");
        OptionChecks.Positive(MinReadInterval, $"GmsOptions.{nameof(MinReadInterval)}");
    }
}
