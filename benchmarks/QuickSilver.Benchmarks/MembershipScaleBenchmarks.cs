using BenchmarkDotNet.Attributes;
using BenchmarkDotNet.Engines;
using QuickSilver.Core.Io;
using QuickSilver.Membership;

namespace QuickSilver.Benchmarks;

/// <summary>
/// QSM §2.1 scale target: the GMS handles one node joining 10,000 groups, and the crash of a node that is in 10,000
/// groups, each as one batch. 25 other nodes are already in every group (so every group view and the shared region
/// change). Each iteration builds a fresh state in [IterationSetup]; only the one batch is measured.
/// </summary>
[MemoryDiagnoser]
[SimpleJob(RunStrategy.Monitoring, launchCount: 1, warmupCount: 2, iterationCount: 10)]
public class MembershipScaleBenchmarks
{
    private MembershipState? _state;
    private NodeId _node;
    private List<MembershipRequest>? _joins;

    [Params(10_000)]
    public int Groups { get; set; }

    [IterationSetup(Target = nameof(NodeJoinsAllGroups))]
    public void SetupJoin()
    {
        Build();
        _joins = Enumerable.Range(0, Groups).Select(g => (MembershipRequest)new JoinRequest(_node, $"g{g}")).ToList();
    }

    [IterationSetup(Target = nameof(NodeInAllGroupsCrashes))]
    public void SetupCrash()
    {
        Build();
        _state!.Apply(Enumerable.Range(0, Groups).Select(g => (MembershipRequest)new JoinRequest(_node, $"g{g}")).ToList());
    }

    [Benchmark]
    public int NodeJoinsAllGroups() => _state!.Apply(_joins!).NewGroupViews.Length;

    [Benchmark]
    public int NodeInAllGroupsCrashes() => _state!.Apply([new NodeDownRequest(_node)]).NewGroupViews.Length;

    private void Build()
    {
        _state = new MembershipState(new MulticastAddressPool(new NetAddress(0xEFFF0000u, 9000), 1024));
        var others = Enumerable.Range(0, 25).Select(i => _state.RegisterNode(NetAddress.Loopback((ushort)(20000 + i)))).ToList();
        _state.Apply(others.SelectMany(n => Enumerable.Range(0, Groups).Select(g => (MembershipRequest)new JoinRequest(n, $"g{g}"))).ToList());
        _node = _state.RegisterNode(NetAddress.Loopback(30000));
    }
}
