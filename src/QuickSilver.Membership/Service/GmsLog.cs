using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Service;

/// <summary>
/// Where a <see cref="GmsServer"/> commits its commands. The server proposes each batch as one
/// <see cref="GmsCommand"/> and changes its state only when the log hands a command back as committed, so the state of
/// every replica is the same sequence of commands applied to <see cref="GmsStateMachine"/>. All calls into the server
/// (<see cref="GmsServer.OnCommitted"/>, <see cref="GmsServer.OnLeaderChanged"/>, <see cref="GmsServer.OnProposalDone"/>)
/// happen on the server's core thread.
/// </summary>
internal interface IGmsLog
{
    /// <summary>This replica's number within the replicated GMS (1 for a single GMS).</summary>
    uint ReplicaId { get; }

    /// <summary>Starts reporting to <paramref name="server"/>: leader changes, committed commands.</summary>
    void Start(GmsServer server);

    /// <summary>Proposes <paramref name="command"/> (this replica believes it leads); the outcome comes back through
    /// <see cref="GmsServer.OnProposalDone"/> with <paramref name="sequence"/>, and the command itself, if committed,
    /// through <see cref="GmsServer.OnCommitted"/>.</summary>
    void Propose(GmsCommand command, long sequence);

    /// <summary>On the leader: adds (or removes) the replica at <paramref name="replica"/> to (from) the replica set; the
    /// outcome comes back through <see cref="GmsServer.OnReplicaChangeDone"/>. A log that cannot change its replica set
    /// reports false.</summary>
    void ChangeReplicas(NetAddress replica, bool add);
}

/// <summary>The single, unreplicated GMS: it leads from the start and every proposal commits at once, in place.</summary>
internal sealed class LocalGmsLog : IGmsLog
{
    private GmsServer? _server;

    public uint ReplicaId => 1;

    public void Start(GmsServer server)
    {
        _server = server;
        server.OnLeaderChanged(leader: null, isSelf: true);
    }

    public void Propose(GmsCommand command, long sequence)
    {
        var server = _server ?? throw new InvalidOperationException("The log has not been started.");
        server.OnCommitted(command);
        server.OnProposalDone(sequence, committed: true);
    }

    public void ChangeReplicas(NetAddress replica, bool add) => _server?.OnReplicaChangeDone(replica, add, committed: false);
}

/// <summary>Packs a leader's GMS address into a <see cref="GmsMessageKind.Redirect"/>'s number (0: no leader known).</summary>
internal static class LeaderAddress
{
    public static ulong Pack(NetAddress? address) => address is { } a ? ((ulong)a.Ip << 16) | a.Port : 0;

    public static NetAddress? Unpack(ulong number)
        => number == 0 || number >> 48 != 0 ? null : new NetAddress((uint)(number >> 16), (ushort)(number & 0xFFFF));
}
