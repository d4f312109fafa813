using System.Globalization;
using System.Net;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Runtime;

/// <summary>
/// One administratively configured peering link (seed §3.1): the peer's gateway number, its TCP address and the
/// link's cost per metric. Text form <c>id@host:port[,host:port][/hops,latency,bandwidth]</c>, e.g.
/// <c>2@127.0.0.1:47202/1,5,1</c>; a second address is the peer's standby control node (a clustered gateway with
/// <c>--standby</c>): the dialler tries the addresses in turn. Both ends list each other; the lower-numbered gateway
/// dials, the other accepts (so one link, never two).
/// </summary>
public sealed record PeerConfig(GatewayId Gateway, IPEndPoint Address, LinkCosts Costs)
{
    /// <summary>The peer's other control node, if it has a standby (tried after <see cref="Address"/>, in turn).</summary>
    public IPEndPoint? Standby { get; init; }

    /// <summary>The addresses to dial, in order.</summary>
    public IReadOnlyList<IPEndPoint> Addresses => Standby is null ? [Address] : [Address, Standby];

    public static PeerConfig Parse(string text)
    {
        ArgumentNullException.ThrowIfNull(text);
        int at = text.IndexOf('@', StringComparison.Ordinal);
        if (at <= 0 || !uint.TryParse(text.AsSpan(0, at), NumberStyles.None, CultureInfo.InvariantCulture, out uint id) || id == 0)
        {
            throw new FormatException($"peer '{text}' must be <gateway-number>@<ip>:<port>[/hops,latency,bandwidth]");
        }

        string rest = text[(at + 1)..];
        var costs = LinkCosts.Default;
        int slash = rest.IndexOf('/', StringComparison.Ordinal);
        if (slash >= 0)
        {
            var parts = rest[(slash + 1)..].Split(',');
            if (parts.Length != 3 || !parts.All(p => uint.TryParse(p, NumberStyles.None, CultureInfo.InvariantCulture, out uint v) && v > 0 && v < RouteCost.Infinite))
            {
                throw new FormatException($"peer '{text}': link costs must be three positive numbers hops,latency,bandwidth");
            }

            var v = parts.Select(p => uint.Parse(p, CultureInfo.InvariantCulture)).ToArray();
            costs = new LinkCosts(v[0], v[1], v[2]);
            rest = rest[..slash];
        }

        var addresses = rest.Split(',');
        if (addresses.Length > 2)
        {
            throw new FormatException($"peer '{text}': at most two addresses (a control node and its standby)");
        }

        var endpoints = new IPEndPoint[addresses.Length];
        for (int i = 0; i < addresses.Length; i++)
        {
            if (!IPEndPoint.TryParse(addresses[i], out var endpoint) || endpoint.Port == 0)
            {
                throw new FormatException($"peer '{text}': '{addresses[i]}' is not an ip:port with a non-zero port");
            }

            endpoints[i] = endpoint;
        }

        if (endpoints.Length == 2 && endpoints[0].Equals(endpoints[1]))
        {
            throw new FormatException($"peer '{text}': the standby's address equals the primary's");
        }

        return new PeerConfig(new GatewayId(id), endpoints[0], costs) { Standby = endpoints.Length == 2 ? endpoints[1] : null };
    }
}
