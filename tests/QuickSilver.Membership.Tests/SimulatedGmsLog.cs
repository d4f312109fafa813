using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// Three (or more) GMS replicas in a <see cref="VirtualWorld"/> on <see cref="SimulatedConsensus"/>, the stand-in for
/// the Raft engine: the test elects, kills (its endpoint is cut off) and restarts replicas (a fresh server that replays
/// the log).
/// </summary>
internal sealed class SimulatedGmsCluster
{
    private readonly SimulatedConsensus _consensus;
    private readonly GmsOptions _options;
    private readonly VirtualWorld _world;

    public SimulatedGmsCluster(VirtualWorld world, GmsOptions options, params NetAddress[] addresses)
    {
        _world = world;
        _options = options;
        _consensus = new SimulatedConsensus(world);
        foreach (var address in addresses)
        {
            Boot(_consensus.Add(address));
        }
    }

    public SimulatedConsensus.Member this[int i] => _consensus[i];

    public SimulatedConsensus Consensus => _consensus;

    public void Elect(SimulatedConsensus.Member leader) => _consensus.Elect(leader);

    public void Kill(SimulatedConsensus.Member replica)
    {
        _world.CutOff(replica.Address);
        _consensus.Crash(replica);
    }

    public void Restart(SimulatedConsensus.Member replica)
    {
        _world.Restore(replica.Address);
        Boot(replica);
    }

    private void Boot(SimulatedConsensus.Member replica)
        => _ = new GmsServer(_world, _world.Channel(replica.Address), 1000 + replica.ReplicaId, _options, log: replica);
}
