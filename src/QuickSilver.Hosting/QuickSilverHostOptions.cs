namespace QuickSilver.Hosting;

/// <summary>
/// What <see cref="QuickSilverServiceCollectionExtensions.AddQuickSilver(Microsoft.Extensions.DependencyInjection.IServiceCollection, Microsoft.Extensions.Configuration.IConfiguration)"/>
/// binds: the node's options (<see cref="Node"/>, read from the keys of the configuration section itself, e.g.
/// <c>QuickSilver:Gms</c>, <c>QuickSilver:Region:TokenInterval</c>), the groups the hosted node joins at start
/// (<c>QuickSilver:Groups</c>, QSM; <c>QuickSilver:AerGroups</c>, AER), and how long start may take. In-node AER repair
/// servers are node options (<c>QuickSilver:RepairServers:0:Session</c>, …), AER's timers and bounds too
/// (<c>QuickSilver:Aer:SpmInterval</c>, …).
/// </summary>
public sealed class QuickSilverHostOptions
{
    /// <summary>The node's options. <see cref="QuickSilverNodeOptions"/> is an immutable record: replace it
    /// (<c>o.Node = o.Node with { EmbeddedGms = true }</c>) rather than set its properties.</summary>
    public QuickSilverNodeOptions Node { get; set; } = new();

    /// <summary>Groups the node joins when the host starts, before any hosted service registered after
    /// <c>AddQuickSilver</c> starts.</summary>
    public IList<string> Groups { get; } = new List<string>();

    /// <summary>AER groups (wide area, docs/aer.md) the node joins when the host starts, by group name:
    /// <c>QuickSilver:AerGroups:prices/eu:Session</c>, <c>…:Group</c> (multicast "a.b.c.d:port"), <c>…:Source</c> (the
    /// source node's address), <c>…:Children:0</c> (on the source: its top repair servers). This node is the group's
    /// source when its address is <c>Source</c> (give it a fixed <c>Bind</c>), a receiver otherwise. A name here is not
    /// also in <see cref="Groups"/>; a name with ':' cannot be a configuration key (set it in code).</summary>
    public IDictionary<string, AerGroupOptions> AerGroups { get; } = new Dictionary<string, AerGroupOptions>(StringComparer.Ordinal);

    /// <summary>How long starting the node and joining <see cref="Groups"/> may take before the host's start fails.
    /// Default 30 s.</summary>
    public TimeSpan StartTimeout { get; set; } = TimeSpan.FromSeconds(30);
}
