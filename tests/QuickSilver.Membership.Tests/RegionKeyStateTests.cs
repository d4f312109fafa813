using System.Security.Cryptography;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

/// <summary>
/// Region keys in the replicated GMS state (docs/security.md, "Keys per region and view"): every new region view gets a
/// key derived from the seed its command carries, so replicas applying the same log (or a snapshot and the rest) hold
/// the same keys byte for byte; keys differ per view and region; a rekey asked by a node that neither belongs to nor
/// sends into a region changes nothing; the keys travel wrapped and a key wrapped under another secret is refused.
/// </summary>
public sealed class RegionKeyStateTests
{
    private static readonly NetAddress PoolStart = new(0xEFFF0100u, 9000);

    private static GmsStateMachine NewMachine() => new(() => new MembershipState(new MulticastAddressPool(PoolStart, 8)));

    private static NetAddress Address(int i) => NetAddress.Loopback((ushort)(21000 + i));

    private static GmsCommand Command(params GmsOp[] ops) => new() { Ops = ops, KeySeed = RandomNumberGenerator.GetBytes(MembershipState.KeySeedBytes) };

    private static List<GmsCommand> History() =>
    [
        Command(GmsOp.Start(1, 77)),
        Command(GmsOp.Register(Address(1), 11, null), GmsOp.Register(Address(2), 12, null), GmsOp.Register(Address(3), 13, null)),
        Command(GmsOp.Join(new NodeId(1), "a"), GmsOp.Join(new NodeId(2), "a"), GmsOp.Join(new NodeId(3), "b")),
        Command(GmsOp.Rekey(new NodeId(1), new RegionId(1))), // a member asks: region 1 gets a new view and key
        Command(GmsOp.Rekey(new NodeId(3), new RegionId(1))), // neither member nor sender: nothing
        Command(GmsOp.Join(new NodeId(3), "a"), GmsOp.Down(new NodeId(2))),
    ];

    private static byte[] ApplyAll(GmsStateMachine machine, IEnumerable<GmsCommand> commands)
    {
        foreach (var command in commands)
        {
            machine.Apply(GmsStateMachine.TryDecode(GmsStateMachine.Encode(command)) ?? throw new InvalidOperationException("decode"));
        }

        return machine.ExportSnapshot();
    }

    [Fact]
    public void Replicas_applying_the_same_log_or_a_snapshot_hold_the_same_keys()
    {
        var history = History();
        var first = NewMachine();
        var keys = new List<RegionViewKey>();
        foreach (var command in history)
        {
            var applied = first.Apply(command);
            keys.AddRange(applied.Change.NewRegionViews.Select(v => v.Key!));
        }

        // Every new region view got its own key and id; the rekey by a member made one more view, the other nothing.
        Assert.Equal(keys.Count, keys.Select(k => k.Id).Distinct().Count());
        Assert.Equal(keys.Count, keys.Select(k => Convert.ToHexString(k.Material.AsSpan())).Distinct().Count());
        Assert.All(keys, k => Assert.Equal(32, k.Material.Length));
        var regionOne = first.State.RegionViews.Single(v => v.Members.Any(m => m.Node == new NodeId(1)));
        Assert.NotNull(regionOne.Key);

        var replica = NewMachine();
        Assert.Equal(first.ExportSnapshot(), ApplyAll(replica, history));
        var restored = NewMachine();
        var midway = NewMachine();
        restored.ImportSnapshot(ApplyAll(midway, history.Take(3)));
        Assert.Equal(first.ExportSnapshot(), ApplyAll(restored, history.Skip(3)));
        foreach (var view in first.State.RegionViews)
        {
            Assert.Equal(view.Key, replica.State.RegionViewOf(view.Region).Key);
            Assert.Equal(view.Key, restored.State.RegionViewOf(view.Region).Key);
        }
    }

    [Fact]
    public void A_rekey_makes_a_new_view_with_a_new_key_only_for_a_member_or_sender_of_the_region()
    {
        var machine = NewMachine();
        ApplyAll(machine, History().Take(3));
        var region = machine.State.RegionViews.Single(v => v.Members.Any(m => m.Node == new NodeId(1)));
        var outsider = machine.Apply(Command(GmsOp.Rekey(new NodeId(3), region.Region)));
        Assert.True(outsider.Change.IsEmpty);
        var member = machine.Apply(Command(GmsOp.Rekey(new NodeId(2), region.Region)));
        var view = Assert.Single(member.Change.NewRegionViews);
        Assert.Equal(region.ViewNumber + 1, view.ViewNumber);
        Assert.True(region.Members.SequenceEqual(view.Members));
        Assert.NotEqual(region.Key, view.Key);

        // The group mapped to it gets a new view too, so its senders are sent the region's new view (and key).
        Assert.Contains(member.Change.NewGroupViews, g => g.Name == "a");
        Assert.Contains(view, member.Change.Updates[new NodeId(1)].RegionViews);

        // Without a seed (security off) views carry no key.
        var plain = machine.Apply(new GmsCommand { Ops = [GmsOp.Join(new NodeId(1), "z")] });
        Assert.All(plain.Change.NewRegionViews, v => Assert.Null(v.Key));
    }

    [Fact]
    public void Keys_travel_wrapped_and_a_key_wrapped_under_another_secret_is_refused()
    {
        var machine = NewMachine();
        var applied = ApplyAll(machine, History().Take(3));
        var view = machine.State.RegionViews.First();
        var update = new NodeUpdate(new NodeId(1), [], [view], []);
        using var wrap = new RegionKeyWrap(DatagramSecurityOptions.GenerateSecret());
        var wire = GmsCodec.ToWire(update, wrap);
        var bytes = GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Update, Update = wire });
        Assert.True(bytes.AsSpan().IndexOf(view.Key!.Material.AsSpan()) < 0, "the key travels in clear");

        var decoded = GmsCodec.FromWire(new NodeId(1), GmsCodec.TryDecode(bytes, 1 << 20)!.Update, wrap);
        Assert.Equal(view.Key, Assert.Single(decoded!.RegionViews).Key);
        using var other = new RegionKeyWrap(DatagramSecurityOptions.GenerateSecret());
        Assert.Null(GmsCodec.FromWire(new NodeId(1), wire, other));
        wire.Regions[0].ViewNumber++; // bound to its view: passed off as the next one, it does not unwrap
        Assert.Null(GmsCodec.FromWire(new NodeId(1), wire, wrap));
        Assert.Null(GmsCodec.ToWire(update).Regions[0].Key); // no wrap: the key is not sent
        Assert.NotEmpty(applied);
    }
}
