using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// A stand-in for the Raft engine in virtual time, with the behaviour the GMS relies on: one leader at a time, chosen
/// by the test; a proposal by anyone else fails; a leader's proposal is appended to one shared log and committed after
/// <see cref="CommitDelay"/>, then every live replica applies the log's entries in order (through the codec, as the real
/// replicas do); a new leader is told so, the others who leads. A killed replica stops applying and its endpoint is cut
/// off; a restarted one is a fresh server that replays the whole log, as a replica without a snapshot would.
/// </summary>
internal sealed class SimulatedGmsCluster
{
    private readonly List<byte[]> _entries = new();
    private readonly List<Replica> _replicas = new();

    public SimulatedGmsCluster(VirtualWorld world, GmsOptions options, params NetAddress[] addresses)
    {
        World = world;
        Options = options;
        for (int i = 0; i < addresses.Length; i++)
        {
            _replicas.Add(new Replica(this, (uint)(i + 1), addresses[i]));
        }

        foreach (var replica in _replicas)
        {
            replica.Boot();
        }
    }

    public VirtualWorld World { get; }

    public GmsOptions Options { get; }

    public TimeSpan CommitDelay { get; set; } = TimeSpan.FromMilliseconds(3);

    public Replica? Leader { get; private set; }

    public IReadOnlyList<Replica> Replicas => _replicas;

    public Replica this[int i] => _replicas[i];

    /// <summary>Makes <paramref name="leader"/> the leader and tells every live replica.</summary>
    public void Elect(Replica leader)
    {
        Leader = leader;
        foreach (var replica in _replicas.Where(r => r.Alive))
        {
            replica.Server.OnLeaderChanged(leader.Address, replica == leader);
        }
    }

    /// <summary>The replica crashes: its messages vanish, its peers' channels report it failed later, it applies
    /// nothing more; with no leader the cluster elects none until the test says so.</summary>
    public void Kill(Replica replica)
    {
        replica.Alive = false;
        World.CutOff(replica.Address);
        if (Leader == replica)
        {
            Leader = null;
            foreach (var other in _replicas.Where(r => r.Alive))
            {
                other.Server.OnLeaderChanged(null, false);
            }
        }
    }

    /// <summary>The replica starts again with an empty state and replays the log; it follows the current leader.</summary>
    public void Restart(Replica replica)
    {
        World.Restore(replica.Address);
        replica.Boot();
        replica.CatchUp();
        if (Leader is { } leader)
        {
            replica.Server.OnLeaderChanged(leader.Address, false);
        }
    }

    internal void Append(Replica from, GmsCommand command, long sequence)
    {
        if (from != Leader || !from.Alive)
        {
            World.After(CommitDelay, () => from.Server.OnProposalDone(sequence, committed: false));
            return;
        }

        _entries.Add(GmsStateMachine.Encode(command));
        var server = from.Server;
        World.After(CommitDelay, () =>
        {
            foreach (var replica in _replicas.Where(r => r.Alive))
            {
                replica.CatchUp();
            }

            if (from.Alive && from.Server == server)
            {
                server.OnProposalDone(sequence, committed: true);
            }
        });
    }

    internal sealed class Replica(SimulatedGmsCluster cluster, uint id, NetAddress address) : IGmsLog
    {
        private int _applied;

        public NetAddress Address { get; } = address;

        public bool Alive { get; set; } = true;

        public GmsServer Server { get; private set; } = null!;

        public uint ReplicaId => id;

        public void Boot()
        {
            Alive = true;
            _applied = 0;
            Server = new GmsServer(cluster.World, cluster.World.Channel(Address), 1000 + id, cluster.Options, log: this);
        }

        public void Start(GmsServer server)
        {
        }

        public void Propose(GmsCommand command, long sequence) => cluster.Append(this, command, sequence);

        public void CatchUp()
        {
            while (_applied < cluster._entries.Count)
            {
                Server.OnCommitted(GmsStateMachine.TryDecode(cluster._entries[_applied++])!);
            }
        }
    }
}
