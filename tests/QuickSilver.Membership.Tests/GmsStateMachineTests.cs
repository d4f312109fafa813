using CsCheck;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// The replicated GMS state machine: applying the same command log to a fresh state, or to a state loaded from a
/// snapshot taken part-way, must give the same node ids, view numbers, regions and multicast addresses, byte for byte.
/// </summary>
public sealed class GmsStateMachineTests
{
    private static readonly NetAddress PoolStart = new(0xEFFF0100u, 9000);

    private static GmsStateMachine NewMachine(int poolSize = 8)
        => new(() => new MembershipState(new MulticastAddressPool(PoolStart, poolSize)));

    private static NetAddress Address(int i) => NetAddress.Loopback((ushort)(20000 + i));

    private static GmsCommand Command(params GmsOp[] ops) => new() { Ops = ops };

    /// <summary>A hand-made history: registrations (one pinned), overlapping joins, a leave, a crash, a restart at the
    /// same address with a new incarnation, and a repeated registration that must change nothing.</summary>
    private static List<GmsCommand> History() =>
    [
        Command(GmsOp.Start(1, 77)),
        Command(GmsOp.Register(Address(1), 11, null), GmsOp.Register(Address(2), 12, null), GmsOp.Register(Address(3), 13, "pinned")),
        Command(GmsOp.Join(new NodeId(1), "a"), GmsOp.Join(new NodeId(2), "a"), GmsOp.Join(new NodeId(2), "b"), GmsOp.Join(new NodeId(3), "b")),
        Command(GmsOp.Register(Address(4), 14, null), GmsOp.Join(new NodeId(1), "c")),
        Command(GmsOp.Join(new NodeId(4), "a"), GmsOp.Join(new NodeId(4), "c"), GmsOp.Leave(new NodeId(2), "b")),
        Command(GmsOp.Start(2, 99), GmsOp.Down(new NodeId(1))),
        Command(GmsOp.Register(Address(2), 22, null), GmsOp.Register(Address(4), 14, null)),
        Command(GmsOp.Join(new NodeId(5), "b"), GmsOp.Join(new NodeId(5), "d"), GmsOp.Join(new NodeId(2), "zombie")),
    ];

    private static byte[] ApplyAll(GmsStateMachine machine, IEnumerable<GmsCommand> commands)
    {
        foreach (var command in commands)
        {
            // Through the codec, as a replica receives it.
            machine.Apply(GmsStateMachine.TryDecode(GmsStateMachine.Encode(command)) ?? throw new InvalidOperationException("decode"));
        }

        return machine.ExportSnapshot();
    }

    [Fact]
    public void Replaying_the_log_on_a_fresh_state_gives_identical_state()
    {
        var original = NewMachine();
        byte[] expected = ApplyAll(original, History());
        var replica = NewMachine();
        Assert.Equal(expected, ApplyAll(replica, History()));

        // The state is what the history says: the first epoch sticks, node 2's restart became node 5 and node 2 is gone
        // (its join of "zombie" did nothing), the repeated registration of node 4 kept its id.
        Assert.Equal(77ul, replica.Epoch);
        Assert.Equal([3u, 4u, 5u], replica.Registrations.Select(r => r.Node.Value).Order());
        Assert.Equal(new NodeId(5), replica.RegistrationAt(Address(2))!.Node);
        Assert.Null(replica.State.FindGroup("zombie"));
        Assert.Equal(original.State.GroupViews.OrderBy(v => v.Group.Value), replica.State.GroupViews.OrderBy(v => v.Group.Value));
        Assert.Equal(original.State.RegionViews.OrderBy(v => v.Region.Value), replica.State.RegionViews.OrderBy(v => v.Region.Value));
    }

    [Fact]
    public void A_snapshot_taken_part_way_then_the_rest_of_the_log_gives_identical_state()
    {
        var history = History();
        for (int cut = 0; cut <= history.Count; cut++)
        {
            var original = NewMachine();
            ApplyAll(original, history.Take(cut));
            var restored = NewMachine();
            restored.ImportSnapshot(original.ExportSnapshot());
            Assert.Equal(original.ExportSnapshot(), restored.ExportSnapshot());
            Assert.Equal(ApplyAll(original, history.Skip(cut)), ApplyAll(restored, history.Skip(cut)));
            Assert.Equal(original.State.RegionViews.OrderBy(v => v.Region.Value), restored.State.RegionViews.OrderBy(v => v.Region.Value));
            Assert.Equal(original.State.GroupViews.OrderBy(v => v.Group.Value), restored.State.GroupViews.OrderBy(v => v.Group.Value));
        }
    }

    [Fact]
    public void A_pin_travels_in_the_registration_not_in_the_replica_configuration()
    {
        var machine = NewMachine();
        ApplyAll(machine, [Command(GmsOp.Register(Address(1), 1, "east"), GmsOp.Register(Address(2), 2, "east"), GmsOp.Register(Address(3), 3, null)),
            Command(GmsOp.Join(new NodeId(1), "x"), GmsOp.Join(new NodeId(2), "y"), GmsOp.Join(new NodeId(3), "x"))]);
        Assert.Equal(machine.State.RegionOf(new NodeId(1)), machine.State.RegionOf(new NodeId(2)));
        Assert.NotEqual(machine.State.RegionOf(new NodeId(1)), machine.State.RegionOf(new NodeId(3)));
    }

    [Fact]
    public void A_malformed_snapshot_or_command_is_refused()
    {
        Assert.Null(GmsStateMachine.TryDecode(new byte[] { 0x93, 0x01, 0xFF }));
        Assert.Null(GmsStateMachine.TryDecode(GmsStateMachine.Encode(new GmsCommand { Version = 9 })));
        Assert.Throws<InvalidDataException>(() => NewMachine().ImportSnapshot(new byte[] { 0xC1 }));
    }

    private static readonly Gen<GmsOp> Op = Gen.Frequency(
        (1, Gen.Select(Gen.UInt[1, 3], Gen.ULong[0, 3], (replica, epoch) => GmsOp.Start(replica, epoch))),
        (3, Gen.Select(Gen.Int[1, 10], Gen.ULong[1, 2], Gen.Int[0, 5], (port, inc, pin) => GmsOp.Register(Address(port), inc, pin == 0 ? "p" : null))),
        (6, Gen.Select(Gen.UInt[1, 24], Gen.Int[0, 6], (node, group) => GmsOp.Join(new NodeId(node), $"g{group}"))),
        (2, Gen.Select(Gen.UInt[1, 24], Gen.Int[0, 6], (node, group) => GmsOp.Leave(new NodeId(node), $"g{group}"))),
        (1, Gen.UInt[1, 24].Select(node => GmsOp.Down(new NodeId(node)))));

    private static readonly Gen<(List<GmsCommand> Log, int Cut)> Log =
        Op.Array[1, 8].Select(ops => new GmsCommand { Ops = ops }).List[1, 30].SelectMany(log => Gen.Int[0, log.Count].Select(cut => (log, cut)));

    [Fact]
    public void Property_random_logs_replay_and_restore_to_identical_state()
    {
        Log.Sample(example =>
        {
            var (log, cut) = example;
            var original = NewMachine(poolSize: 4); // small: the pool runs out and addresses are reused
            byte[] expected = ApplyAll(original, log);
            Assert.Equal(expected, ApplyAll(NewMachine(poolSize: 4), log));
            var partial = NewMachine(poolSize: 4);
            ApplyAll(partial, log.Take(cut));
            var restored = NewMachine(poolSize: 4);
            restored.ImportSnapshot(partial.ExportSnapshot());
            Assert.Equal(expected, ApplyAll(restored, log.Skip(cut)));
            Assert.Equal(original.State.RegionViews.OrderBy(v => v.Region.Value), restored.State.RegionViews.OrderBy(v => v.Region.Value));
            Assert.Equal(original.State.GroupViews.OrderBy(v => v.Group.Value), restored.State.GroupViews.OrderBy(v => v.Group.Value));
        }, iter: 400, seed: "0N0XIzNsQ0O2");
    }
}
