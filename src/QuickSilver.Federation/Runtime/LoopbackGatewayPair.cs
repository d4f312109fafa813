using System.Net;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Runtime;

/// <summary>Two gateways peered over loopback, gateway 1 in island 1 and gateway 2 in island 2, each over its own
/// plug-in: what the loopback tests and <c>qs gateway-bench</c> set up.</summary>
public static class LoopbackGatewayPair
{
    /// <summary>Starts the pair and waits (at most <paramref name="routeWait"/>) until gateway 2 has a route to island 1;
    /// the caller owns and disposes both runtimes (and the plug-ins). With <paramref name="peeringSecret"/> both gateways
    /// authenticate and seal their peering link (<see cref="GatewayOptions.PeeringSecret"/>).</summary>
    public static async Task<(GatewayRuntime G1, GatewayRuntime G2)> StartAsync(IHostedNativeNet island1, IHostedNativeNet island2,
        TimeSpan routeWait, byte[]? peeringSecret = null, CancellationToken cancellationToken = default)
    {
        // Gateway 2 listens first, so gateway 1 (the lower number, which dials) knows its port.
        var g2 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(2), Island = new IslandId(2), PeeringSecret = peeringSecret }, island2,
            new IPEndPoint(IPAddress.Loopback, 0), [new PeerConfig(new GatewayId(1), new IPEndPoint(IPAddress.Loopback, 1), LinkCosts.Default)]);
        var g1 = new GatewayRuntime(new GatewayOptions { Gateway = new GatewayId(1), Island = new IslandId(1), PeeringSecret = peeringSecret }, island1,
            new IPEndPoint(IPAddress.Loopback, 0), [new PeerConfig(new GatewayId(2), g2.ListenEndpoint, LinkCosts.Default)]);
        g1.Start();
        g2.Start();
        var deadline = DateTime.UtcNow + routeWait;
        while (DateTime.UtcNow < deadline && !(await g2.SnapshotAsync().ConfigureAwait(false)).Routes.Any(r => r.Destination == 1))
        {
            await Task.Delay(50, cancellationToken).ConfigureAwait(false);
        }

        return (g1, g2);
    }
}
