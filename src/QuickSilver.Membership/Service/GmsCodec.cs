using System.Collections.Immutable;
using MessagePack;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;

namespace QuickSilver.Membership.Service;

/// <summary>Encodes and decodes GMS messages. Decoding never throws: malformed input yields null.</summary>
internal static class GmsCodec
{
    private static readonly MessagePackSerializerOptions Options =
        MessagePackSerializerOptions.Standard.WithResolver(MessagePack.Resolvers.StandardResolverAllowPrivate.Instance) // the GMS messages are internal types
            .WithSecurity(MessagePackSecurity.UntrustedData);

    public static byte[] Encode(GmsMessage message) => MessagePackSerializer.Serialize(message, Options);

    /// <summary>Decodes a message of at most <paramref name="maxBytes"/>; null if it is larger, truncated or malformed.</summary>
    public static GmsMessage? TryDecode(ReadOnlySpan<byte> bytes, int maxBytes)
    {
        if (bytes.IsEmpty || bytes.Length > maxBytes)
        {
            return null;
        }

        try
        {
            // The library needs a ReadOnlyMemory; control messages are rare, so one copy is acceptable here.
            var message = MessagePackSerializer.Deserialize<GmsMessage>(bytes.ToArray(), Options);
            return message is not null && Enum.IsDefined(message.Kind) ? message : null;
        }
        catch (MessagePackSerializationException)
        {
            return null;
        }
    }

    /// <summary>The update as sent; each region key wrapped under <paramref name="wrap"/> (null: keys are not sent).</summary>
    public static WireUpdate ToWire(NodeUpdate update, RegionKeyWrap? wrap = null)
    {
        ArgumentNullException.ThrowIfNull(update);
        return new WireUpdate
        {
            Groups = [.. update.GroupViews.Select(ToWire)],
            Regions = [.. update.RegionViews.Select(r => ToWire(r, wrap))],
            LeftGroups = [.. update.LeftGroups.Select(g => g.Value)],
        };
    }

    /// <summary>Validates and converts a received update; null when any part is malformed, or a region key does not
    /// unwrap under <paramref name="wrap"/> (null: keys are ignored).</summary>
    public static NodeUpdate? FromWire(NodeId node, WireUpdate? wire, RegionKeyWrap? wrap = null)
    {
        if (wire?.Groups is null || wire.Regions is null || wire.LeftGroups is null)
        {
            return null;
        }

        var groups = ImmutableArray.CreateBuilder<GroupView>(wire.Groups.Length);
        foreach (var g in wire.Groups)
        {
            if (g?.Regions is null || g.Name is null || g.Regions.Length % 2 != 0)
            {
                return null;
            }

            var refs = ImmutableArray.CreateBuilder<RegionRef>(g.Regions.Length / 2);
            for (int i = 0; i < g.Regions.Length; i += 2)
            {
                refs.Add(new RegionRef(new RegionId(g.Regions[i]), g.Regions[i + 1]));
            }

            groups.Add(new GroupView(new GroupId(g.Group), g.Name, g.ViewNumber, refs.MoveToImmutable()));
        }

        var regions = ImmutableArray.CreateBuilder<RegionView>(wire.Regions.Length);
        foreach (var r in wire.Regions)
        {
            if (r?.Members is null || r.Members.Length % 3 != 0 || r.Members.Length == 0)
            {
                return null;
            }

            var members = ImmutableArray.CreateBuilder<ViewMember>(r.Members.Length / 3);
            for (int i = 0; i < r.Members.Length; i += 3)
            {
                if (r.Members[i + 2] > ushort.MaxValue)
                {
                    return null;
                }

                members.Add(new ViewMember(new NodeId(r.Members[i]), new NetAddress(r.Members[i + 1], (ushort)r.Members[i + 2])));
            }

            NetAddress? multicast = r.MulticastIp == 0 ? null : new NetAddress(r.MulticastIp, r.MulticastPort);
            if (multicast is { IsMulticast: false })
            {
                return null;
            }

            RegionViewKey? key = null;
            if (r.Key is { } wrapped && wrap is not null)
            {
                var material = new byte[DatagramKeyRing.KeyBytes];
                if (r.KeyId == 0 || !wrap.TryUnwrap(r.KeyId, r.Region, r.ViewNumber, wrapped, material))
                {
                    return null;
                }

                key = new RegionViewKey(r.KeyId, ImmutableArray.Create(material));
            }

            regions.Add(new RegionView(new RegionId(r.Region), r.ViewNumber, members.MoveToImmutable(), multicast) { Key = key });
        }

        return new NodeUpdate(node, groups.MoveToImmutable(), regions.MoveToImmutable(),
            [.. wire.LeftGroups.Select(g => new GroupId(g))]);
    }

    private static WireGroupView ToWire(GroupView view) => new()
    {
        Group = view.Group.Value,
        Name = view.Name,
        ViewNumber = view.ViewNumber,
        Regions = [.. view.Regions.SelectMany(r => new[] { r.Region.Value, r.ViewNumber })],
    };

    private static WireRegionView ToWire(RegionView view, RegionKeyWrap? wrap) => new()
    {
        Region = view.Region.Value,
        ViewNumber = view.ViewNumber,
        Members = [.. view.Members.SelectMany(m => new[] { m.Node.Value, m.Address.Ip, (uint)m.Address.Port })],
        MulticastIp = view.MulticastAddress?.Ip ?? 0,
        MulticastPort = view.MulticastAddress?.Port ?? 0,
        KeyId = wrap is not null ? view.Key?.Id ?? 0 : 0,
        Key = view.Key is { } key && wrap is not null ? wrap.Wrap(key.Id, view.Region.Value, view.ViewNumber, key.Material.AsSpan()) : null,
    };
}
