using QuickSilver.Membership;
using QuickSilver.Membership.Service;

namespace QuickSilver.Fuzz;

/// <summary>GMS messages.</summary>
internal static class MembershipTargets
{
    public static void Gms(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        var message = GmsCodec.TryDecode(input, 64 * 1024);
        Expect.AllocatedAtMost(mark, (48L * input.Length) + (64 * 1024), "GmsCodec.TryDecode");
        if (message is null)
        {
            return;
        }

        Expect.That(Enum.IsDefined(message.Kind), $"kind {(byte)message.Kind}");
        var encoded = GmsCodec.Encode(message);
        var again = GmsCodec.TryDecode(encoded, int.MaxValue);
        Expect.That(again is not null && encoded.AsSpan().SequenceEqual(GmsCodec.Encode(again)), "a decoded message does not re-encode to a fixpoint");
        mark = Expect.Mark();
        var update = GmsCodec.FromWire(new NodeId(1), message.Update);
        Expect.AllocatedAtMost(mark, (48L * input.Length) + (64 * 1024), "GmsCodec.FromWire");
        foreach (var region in update?.RegionViews ?? [])
        {
            Expect.That(!region.Members.IsEmpty && (region.MulticastAddress is null || region.MulticastAddress.Value.IsMulticast), $"region {region.Region} accepted malformed");
        }
    }

    public static IEnumerable<byte[]> GmsSeeds()
    {
        yield return GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Hello, Number = 12345 });
        yield return GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Join, GroupName = "prices" });
        yield return GmsCodec.Encode(new GmsMessage
        {
            Kind = GmsMessageKind.Update,
            Update = new WireUpdate
            {
                Groups = [new WireGroupView { Group = 1, Name = "prices", ViewNumber = 2, Regions = [1, 1] }],
                Regions = [new WireRegionView { Region = 1, ViewNumber = 1, Members = [1, 0x7F000001, 5000, 2, 0x7F000001, 5001], MulticastIp = 0xEFFF0100, MulticastPort = 47000 }],
                LeftGroups = [3],
            },
        });
    }
}
