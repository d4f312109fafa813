namespace QuickSilver.Hosting;

/// <summary>
/// What <see cref="QuickSilverServiceCollectionExtensions.AddQuickSilver(Microsoft.Extensions.DependencyInjection.IServiceCollection, Microsoft.Extensions.Configuration.IConfiguration)"/>
/// binds: the node's options (<see cref="Node"/>, read from the keys of the configuration section itself, e.g.
/// <c>QuickSilver:Gms</c>, <c>QuickSilver:Region:TokenInterval</c>), the groups the hosted node joins at start
/// (<c>QuickSilver:Groups</c>), and how long start may take.
/// </summary>
public sealed class QuickSilverHostOptions
{
    /// <summary>The node's options. <see cref="QuickSilverNodeOptions"/> is an immutable record: replace it
    /// (<c>o.Node = o.Node with { EmbeddedGms = true }</c>) rather than set its properties.</summary>
    public QuickSilverNodeOptions Node { get; set; } = new();

    /// <summary>Groups the node joins when the host starts, before any hosted service registered after
    /// <c>AddQuickSilver</c> starts.</summary>
    public IList<string> Groups { get; } = new List<string>();

    /// <summary>How long starting the node and joining <see cref="Groups"/> may take before the host's start fails.
    /// Default 30 s.</summary>
    public TimeSpan StartTimeout { get; set; } = TimeSpan.FromSeconds(30);
}
