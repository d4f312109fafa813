namespace QuickSilver.Federation.Cluster;

/// <summary>Options of a clustered gateway (seed §4, §5.3.4: one control node, N data nodes), shared by the control
/// node's <see cref="DataCoordinator"/> and every <see cref="DataNode"/>. <see cref="Validate"/> names the option that
/// is wrong. The seed gives no value for any of them; the defaults are ours.</summary>
public sealed record ClusterOptions
{
    /// <summary>The data nodes' numbers (the control node's configuration). They share the 32-bit gateway numbering:
    /// a data node stamps forwarded packets with its own number as the origin, so it must not equal any gateway's or any
    /// other data node's number in the federation.</summary>
    public IReadOnlyList<uint> DataNodes { get; init; } = [];

    /// <summary>A data node sends HEARTBEAT this often.</summary>
    public TimeSpan HeartbeatInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>The control node declares a data node dead after this long without a HEARTBEAT and moves its sessions.</summary>
    public TimeSpan HeartbeatTimeout { get; init; } = TimeSpan.FromSeconds(3);

    /// <summary>The control node re-sends every ASSIGN this often even when nothing changed (soft state).</summary>
    public TimeSpan AssignRefresh { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>A data node drops a session whose ASSIGN was not refreshed for this long.</summary>
    public TimeSpan SessionHold { get; init; } = TimeSpan.FromSeconds(35);

    /// <summary>Sessions one data node holds at most; ASSIGNs beyond are refused and counted.</summary>
    public int MaxSessionsPerNode { get; init; } = 4096;

    /// <summary>The secret the control node and its data nodes share (at least
    /// <see cref="ClusterAuthenticator.MinSecretBytes"/> bytes): every control↔data frame then carries an HMAC-SHA256
    /// tag and a counter, and frames without a valid tag, or replayed, are dropped and counted
    /// (<see cref="ClusterAuthenticator"/>). Null (the default): frames travel unauthenticated, for loopback or a
    /// trusted machine-room network only.</summary>
    public byte[]? ClusterSecret { get; init; }

    /// <summary>Control nodes of this gateway: 1 (the seed's shape; the control node is a single point of failure) or 2
    /// (a primary and a standby, docs/federation.md "Standby control node"). With 2, the active control node sends LEAD
    /// to its data nodes and to the other control node every <see cref="HeartbeatInterval"/>.</summary>
    public int ControlNodes { get; init; } = 1;

    /// <summary>With <see cref="ControlNodes"/> = 2: this control node starts as the standby (passive: no peering, no
    /// mediator, no placement) and takes over after <see cref="TakeoverTimeout"/> without a sign of the primary.</summary>
    public bool Standby { get; init; }

    /// <summary>A passive control node takes over after this long without a LEAD from the active one and without a data
    /// node's HEARTBEAT saying it heard the leader. Must exceed twice <see cref="HeartbeatInterval"/> (a data node's
    /// "leader heard" covers two intervals).</summary>
    public TimeSpan TakeoverTimeout { get; init; } = TimeSpan.FromSeconds(3);

    public const int MaxDataNodesBound = 256;

    public void Validate()
    {
        if (DataNodes.Count is 0 or > MaxDataNodesBound)
        {
            throw new ArgumentOutOfRangeException(nameof(DataNodes), $"a clustered gateway needs 1 to {MaxDataNodesBound} data nodes; got {DataNodes.Count}");
        }

        if (DataNodes.Any(n => n == 0) || DataNodes.Distinct().Count() != DataNodes.Count)
        {
            throw new ArgumentOutOfRangeException(nameof(DataNodes), "data node numbers must be distinct and 1 or more");
        }

        if (HeartbeatInterval <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(nameof(HeartbeatInterval), "HeartbeatInterval must be positive");
        }

        if (HeartbeatTimeout <= HeartbeatInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(HeartbeatTimeout), $"HeartbeatTimeout ({HeartbeatTimeout.TotalSeconds} s) must exceed HeartbeatInterval ({HeartbeatInterval.TotalSeconds} s)");
        }

        if (AssignRefresh <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(nameof(AssignRefresh), "AssignRefresh must be positive");
        }

        if (SessionHold <= AssignRefresh)
        {
            throw new ArgumentOutOfRangeException(nameof(SessionHold), $"SessionHold ({SessionHold.TotalSeconds} s) must exceed AssignRefresh ({AssignRefresh.TotalSeconds} s)");
        }

        if (ClusterSecret is { Length: < ClusterAuthenticator.MinSecretBytes })
        {
            throw new ArgumentOutOfRangeException(nameof(ClusterSecret), $"ClusterSecret must be at least {ClusterAuthenticator.MinSecretBytes} bytes; got {ClusterSecret.Length}");
        }

        if (ControlNodes is < 1 or > 2)
        {
            throw new ArgumentOutOfRangeException(nameof(ControlNodes), $"ControlNodes must be 1 or 2; got {ControlNodes}");
        }

        if (Standby && ControlNodes != 2)
        {
            throw new ArgumentOutOfRangeException(nameof(Standby), "a standby control node needs ControlNodes = 2");
        }

        if (ControlNodes == 2 && TakeoverTimeout <= 2 * HeartbeatInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(TakeoverTimeout), $"TakeoverTimeout ({TakeoverTimeout.TotalSeconds} s) must exceed twice HeartbeatInterval ({HeartbeatInterval.TotalSeconds} s)");
        }

        if (MaxSessionsPerNode is < 1 or > 1_000_000)
        {
            throw new ArgumentOutOfRangeException(nameof(MaxSessionsPerNode), $"MaxSessionsPerNode must be between 1 and 1000000; got {MaxSessionsPerNode}");
        }
    }
}
