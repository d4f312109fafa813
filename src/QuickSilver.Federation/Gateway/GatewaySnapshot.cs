using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Gateway;

/// <summary>A gateway's state as <c>qs sessions</c> shows it: peers, routes per metric, sessions with their tree, counters.</summary>
public sealed record GatewaySnapshot(
    uint Gateway,
    uint Island,
    IReadOnlyList<PeerSnapshot> Peers,
    IReadOnlyList<RouteSnapshot> Routes,
    IReadOnlyList<SessionSnapshot> Sessions,
    IReadOnlyDictionary<string, long> Counters)
{
    /// <summary>Takes the snapshot; call on the gateway's thread.</summary>
    public static GatewaySnapshot Of(BroadcastGateway gateway, TimeSpan now)
    {
        var peers = gateway.Peers.Select(p => new PeerSnapshot(p.Info.Gateway.Value, p.Info.Island.Value, p.Info.Kind.ToString(), (now - p.LastHeard).TotalSeconds)).OrderBy(p => p.Gateway).ToList();
        var routes = new List<RouteSnapshot>();
        for (int m = 0; m < RouteCost.MetricCount; m++)
        {
            routes.AddRange(gateway.Router.Table.Routes((RouteMetric)m).OrderBy(r => r.Destination.Value).Select(r =>
                new RouteSnapshot(r.Metric.ToString(), r.Destination.Value, r.DestinationIsland.Value, r.Cost, r.NextHop.Value, [.. r.Path.Select(g => g.Value)])));
        }

        var sessions = gateway.Sessions.Values.Select(t => new SessionSnapshot(
            t.Name.Text,
            t.IsRoot,
            t.Upstream?.Value,
            [.. t.Downstream.Keys.Select(g => g.Value).Order()],
            t.LocalUntil is not null,
            [.. t.Labels.Select(l => l.Value)],
            t.UpstreamLabels?.Select(l => l.Value).ToArray(),
            [.. (t.LocalChannels ?? t.RootChannels ?? []).Select(c => c.Address)],
            gateway.Cluster?.NodeOf(t.Name))).OrderBy(s => s.Name, StringComparer.Ordinal).ToList();
        var c = gateway.Counters;
        var counters = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach (var field in typeof(GatewayCounters).GetFields())
        {
            if (field.FieldType == typeof(long))
            {
                counters[field.Name] = (long)field.GetValue(c)!;
            }
        }

        counters["MalformedTotal"] = c.MalformedTotal;
        if (gateway.Cluster is { } cluster)
        {
            foreach (var field in typeof(Cluster.CoordinatorCounters).GetFields())
            {
                if (field.FieldType == typeof(long))
                {
                    counters["Cluster" + field.Name] = (long)field.GetValue(cluster.Counters)!;
                }
            }

            counters["ClusterMalformedTotal"] = cluster.Counters.MalformedTotal;
        }

        return new GatewaySnapshot(gateway.Id.Value, gateway.Island.Value, peers, routes, sessions, counters);
    }
}

public sealed record PeerSnapshot(uint Gateway, uint Island, string Kind, double SecondsSinceHeard);

public sealed record RouteSnapshot(string Metric, uint Destination, uint Island, uint Cost, uint NextHop, uint[] Path);

public sealed record SessionSnapshot(string Name, bool Root, uint? Upstream, uint[] Downstream, bool LocalClients, uint[] Labels, uint[]? UpstreamLabels, string[] Channels, uint? DataNode = null);
