using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>
/// A stand-in for the Raft engine in simulation (virtual time, one thread), with the behaviour the replicated GMS relies
/// on and nothing more: one leader at a time, chosen by the caller (<see cref="Elect"/>) as an election would; a
/// proposal by anyone else fails; a leader's proposal is appended to one shared log and committed after
/// <see cref="CommitDelay"/>, when every live member applies the log's entries in order, each through the codec as the
/// real replicas do. A crashed member applies nothing; a recovered one is given a fresh server that replays the whole log
/// (a replica without a snapshot). It does not model terms, split votes, or a deposed leader that keeps talking.
/// <para>For follower reads: the entry at position i is log index i + 1; every <see cref="HeartbeatInterval"/> while
/// someone leads (as Raft's AppendEntries heartbeats do) each live follower learns the leader's commit index. A member
/// can be <see cref="Member.Isolated"/> (cut off from the leader: it learns nothing and applies nothing, while nodes may
/// still reach it) or <see cref="Member.Paused"/> (a slow follower: it learns the commit index but applies nothing).</para>
/// </summary>
internal sealed class SimulatedConsensus
{
    private readonly IAlarmScheduler scheduler;
    private readonly List<byte[]> _entries = new();
    private readonly List<Member> _members = new();
    private readonly Alarm _heartbeat;

    public SimulatedConsensus(IAlarmScheduler scheduler)
    {
        this.scheduler = scheduler;
        _heartbeat = new Alarm(_ => Heartbeat());
    }

    /// <summary>How often followers learn the leader's commit index (Raft heartbeats). Default 50 ms.</summary>
    public TimeSpan HeartbeatInterval { get; set; } = TimeSpan.FromMilliseconds(50);

    /// <summary>Entries appended to the shared log.</summary>
    public int Count => _entries.Count;

    public TimeSpan CommitDelay { get; set; } = TimeSpan.FromMilliseconds(3);

    public Member? Leader { get; private set; }

    /// <summary>Proposals to refuse from now on, even the leader's (as a real engine does when a commit times out).</summary>
    public int RefuseProposals { get; set; }

    public IReadOnlyList<Member> Members => _members;

    public Member this[int i] => _members[i];

    public Member Add(NetAddress address)
    {
        var member = new Member(this, (uint)(_members.Count + 1), address);
        _members.Add(member);
        return member;
    }

    /// <summary>Makes <paramref name="leader"/> the leader and tells every live member.</summary>
    public void Elect(Member leader)
    {
        ArgumentNullException.ThrowIfNull(leader);
        Leader = leader;
        foreach (var member in _members.Where(m => m.Alive && m.Server is not null))
        {
            member.Server!.OnLeaderChanged(leader.Address, member == leader);
        }

        if (!_heartbeat.IsScheduled)
        {
            scheduler.ScheduleAfter(_heartbeat, HeartbeatInterval);
        }
    }

    /// <summary>The leader's heartbeat: each live follower it reaches learns its commit index.</summary>
    private void Heartbeat()
    {
        if (Leader is not { Alive: true, Isolated: false } leader)
        {
            return; // no heartbeats until the next election
        }

        foreach (var member in _members.Where(m => m != leader && m.Alive && !m.Isolated && m.Server is not null))
        {
            member.Server!.OnLeaderCommit(_entries.Count);
        }

        scheduler.ScheduleAfter(_heartbeat, HeartbeatInterval);
    }

    /// <summary>The member crashed: it applies nothing more; if it led, the others learn there is no leader.</summary>
    public void Crash(Member member)
    {
        ArgumentNullException.ThrowIfNull(member);
        member.Alive = false;
        if (Leader == member)
        {
            LoseLeader();
        }
    }

    /// <summary>Nobody leads until the next <see cref="Elect"/>, as when a Raft leader steps down because a heartbeat
    /// round reached no majority (a peer restarting, say); every live member learns there is no leader.</summary>
    public void LoseLeader()
    {
        Leader = null;
        foreach (var member in _members.Where(m => m.Alive && m.Server is not null))
        {
            member.Server!.OnLeaderChanged(null, false);
        }
    }

    private void Append(Member from, GmsCommand command, long sequence)
    {
        var server = from.Server!;
        if (from != Leader || !from.Alive || RefuseProposals > 0)
        {
            RefuseProposals = Math.Max(0, RefuseProposals - 1);
            scheduler.ScheduleAfter(new Alarm(_ => server.OnProposalDone(sequence, committed: false)), CommitDelay);
            return;
        }

        _entries.Add(GmsStateMachine.Encode(command));
        scheduler.ScheduleAfter(new Alarm(_ =>
        {
            foreach (var member in _members.Where(m => m.Alive))
            {
                member.CatchUp();
            }

            if (from.Alive && from.Server == server)
            {
                server.OnProposalDone(sequence, committed: true);
            }
        }), CommitDelay);
    }

    /// <summary>One replica's log: give it to a new <see cref="GmsServer"/> (through <see cref="GmsOptions"/>'s log
    /// or the constructor); starting it replays the shared log and, if someone leads, says who.</summary>
    internal sealed class Member(SimulatedConsensus consensus, uint id, NetAddress address) : IGmsLog
    {
        private int _applied;
        private bool _paused;

        public NetAddress Address { get; } = address;

        public bool Alive { get; internal set; } = true;

        /// <summary>Cut off from the leader: it neither applies entries nor learns the commit index until set back (then it
        /// catches up).</summary>
        public bool Isolated
        {
            get => _isolated;
            set
            {
                _isolated = value;
                if (!value && !_paused)
                {
                    CatchUp();
                }
            }
        }

        private bool _isolated;

        /// <summary>Slow: it learns the leader's commit index but applies nothing until set back (then it catches up).</summary>
        public bool Paused
        {
            get => _paused;
            set
            {
                _paused = value;
                if (!value && !Isolated)
                {
                    CatchUp();
                }
            }
        }

        public GmsServer? Server { get; private set; }

        public uint ReplicaId => id;

        public void Start(GmsServer server)
        {
            Server = server;
            Alive = true;
            _applied = 0;
            CatchUp();
            if (consensus.Leader is { } leader && leader != this)
            {
                server.OnLeaderChanged(leader.Address, false);
            }
        }

        public void Propose(GmsCommand command, long sequence) => consensus.Append(this, command, sequence);

        /// <summary>The stand-in has a fixed replica set.</summary>
        public void ChangeReplicas(NetAddress replica, bool add) => Server?.OnReplicaChangeDone(replica, add, committed: false);

        internal void CatchUp()
        {
            while (Server is { } server && _applied < consensus._entries.Count && !_paused && !Isolated)
            {
                server.OnCommitted(GmsStateMachine.TryDecode(consensus._entries[_applied++])!);
                server.OnApplied(_applied);
            }
        }
    }
}
