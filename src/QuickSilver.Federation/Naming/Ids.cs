using System.Globalization;

namespace QuickSilver.Federation.Naming;

/// <summary>An island (the seed's broadcast network, BN): a globally unique 32-bit number. 0 is never a valid island.</summary>
public readonly record struct IslandId(uint Value)
{
    public override string ToString() => Value.ToString(CultureInfo.InvariantCulture);
}

/// <summary>A broadcast gateway: a 32-bit number unique in the federation. Routes lead to individual gateways (seed §5.1),
/// not to islands. 0 is never a valid gateway.</summary>
public readonly record struct GatewayId(uint Value)
{
    public override string ToString() => "g" + Value.ToString(CultureInfo.InvariantCulture);
}

/// <summary>A 32-bit flow label (seed §5.3.2): assigned by the upstream end of a peering link, unique at that gateway,
/// carried in every data header on the link so the receiver finds the flow with one table lookup instead of the URL.
/// 0 is never assigned.</summary>
public readonly record struct FlowLabel(uint Value)
{
    public override string ToString() => "L" + Value.ToString(CultureInfo.InvariantCulture);
}
