using CsCheck;
using QuickSilver.Membership.Service;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Membership.Tests.Fuzz;

/// <summary>
/// GMS messages (GmsCodec, MessagePack with untrusted-data settings) under hostile input: undefined kinds, numbers at
/// the limits, long and odd names, updates whose flattened arrays have the wrong arity, ports above 65,535 and
/// multicast addresses that are not, collection headers that claim billions of elements, truncations and noise.
/// Decoding must not throw and must allocate at most a small multiple of the message's size; what it accepts has a
/// defined kind and re-encodes to a fixpoint; converting an accepted update either refuses it or gives a well-formed one.
/// </summary>
public sealed class GmsCodecProperties
{
    private const int MaxBytes = 64 * 1024;

    private static readonly Gen<uint[]> Numbers = Gen.Frequency(
        (3, Hostile.U32.Array[0, 12]),
        (1, Hostile.U32.Array[0, 400]));

    private static readonly Gen<string?> Name = Gen.Frequency(
        (1, Gen.Const(default(string))),
        (3, Gen.String[0, 40].Select(s => (string?)s)),
        (1, Gen.Char.Array[0, 2000].Select(c => (string?)new string(c))));

    private static readonly Gen<WireGroupView> GroupView = Gen.Select(Hostile.U32, Name, Hostile.U32, Numbers, (group, name, view, regions) =>
        new WireGroupView { Group = group, Name = name!, ViewNumber = view, Regions = regions });

    private static readonly Gen<WireRegionView> RegionView = Gen.Select(Hostile.U32, Hostile.U32, Numbers, Gen.Select(Hostile.U32, Hostile.U16), (region, view, members, multicast) =>
        new WireRegionView { Region = region, ViewNumber = view, Members = members, MulticastIp = multicast.Item1, MulticastPort = multicast.Item2 });

    private static readonly Gen<WireUpdate?> Update = Gen.Frequency(
        (1, Gen.Const(default(WireUpdate))),
        (3, Gen.Select(GroupView.Array[0, 6], RegionView.Array[0, 6], Hostile.U32.Array[0, 8], (groups, regions, left) =>
            (WireUpdate?)new WireUpdate { Groups = groups, Regions = regions, LeftGroups = left })));

    private static readonly Gen<GmsMessageKind> Kind = Gen.Frequency((6, Gen.Byte[1, 7]), (1, Gen.Byte)).Select(b => (GmsMessageKind)b);

    private static readonly Gen<byte[]> Valid =
        Gen.Select(Kind, Hostile.U64, Name, Update, Gen.Int, Hostile.U64, (kind, number, name, update, heartbeat, epoch) =>
            GmsCodec.Encode(new GmsMessage { Kind = kind, Number = number, GroupName = name, Update = update, HeartbeatMs = heartbeat, Epoch = epoch }));

    /// <summary>What decoding may allocate: the copy the codec makes, the objects a message of that size can describe
    /// (every array element costs at least one byte on the wire and at most a few dozen in memory), and a constant.</summary>
    private static long Bound(int length) => (48L * length) + (64 * 1024);

    [Fact]
    public void Messages_are_rejected_or_decode_within_a_bound_and_re_encode_to_a_fixpoint()
    {
        Property.Decodes(Hostile.Mutate(Valid), 2500, seed: 201, example =>
        {
            var (bytes, _) = example;
            var message = Property.Decode(bytes, Bound(bytes.Length), b => GmsCodec.TryDecode(b, MaxBytes), "GmsCodec.TryDecode");
            if (message is null)
            {
                return false;
            }

            Assert.True(Enum.IsDefined(message.Kind), $"kind {(byte)message.Kind}");
            var encoded = GmsCodec.Encode(message);
            var again = GmsCodec.TryDecode(encoded, int.MaxValue);
            Assert.NotNull(again);
            Assert.Equal(encoded, GmsCodec.Encode(again));

            var update = Property.Decode(bytes, Bound(bytes.Length), _ => GmsCodec.FromWire(new NodeId(1), message.Update), "GmsCodec.FromWire");
            if (update is not null)
            {
                foreach (var region in update.RegionViews)
                {
                    Assert.False(region.Members.IsEmpty);
                    Assert.True(region.MulticastAddress is null || region.MulticastAddress.Value.IsMulticast);
                }
            }

            return true;
        });
    }

    [Fact]
    public void A_collection_header_claiming_billions_of_elements_costs_no_large_allocation()
    {
        // [kind Update, number 0, name nil, update [groups: array32 claiming 2^31 - 1 elements, then nothing]]
        byte[] groups = [0x94, 0x06, 0x00, 0xC0, 0x93, 0xDD, 0x7F, 0xFF, 0xFF, 0xFF];
        byte[] members = [0x94, 0x06, 0x00, 0xC0, 0x93, 0x90, 0x91, 0x93, 0x01, 0x01, 0xDD, 0x7F, 0xFF, 0xFF, 0xFF];
        byte[] name = [0x93, 0x03, 0x00, 0xDB, 0x7F, 0xFF, 0xFF, 0xFF, 0x41];
        foreach (var bytes in new[] { groups, members, name })
        {
            Assert.Null(Property.Decode(bytes, 64 * 1024, b => GmsCodec.TryDecode(b, MaxBytes), "GmsCodec.TryDecode"));
        }
    }

    [Fact]
    public void Deeply_nested_input_is_rejected_without_a_stack_overflow()
    {
        // 60,000 nested one-element arrays: the untrusted-data settings cap the depth.
        var bytes = new byte[60_000];
        Array.Fill(bytes, (byte)0x91);
        Assert.Null(Property.Decode(bytes, Bound(bytes.Length), b => GmsCodec.TryDecode(b, MaxBytes), "GmsCodec.TryDecode"));
    }
}
