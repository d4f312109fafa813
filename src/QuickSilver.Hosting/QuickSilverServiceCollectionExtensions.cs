using System.Diagnostics.Metrics;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;

namespace QuickSilver.Hosting;

/// <summary>Registers a QuickSilver node with the generic host (docs/ecosystem.md, "Hosting").</summary>
public static class QuickSilverServiceCollectionExtensions
{
    /// <summary>
    /// Adds a hosted QuickSilver node whose options come from <paramref name="configuration"/> (usually
    /// <c>builder.Configuration.GetSection("QuickSilver")</c>): the keys of <see cref="QuickSilverNodeOptions"/> at the
    /// section's top level (<c>Gms</c>, <c>Bind</c> as "a.b.c.d:port", <c>EmbeddedGms</c>, <c>Region:TokenInterval</c>, …),
    /// <c>RepairServers</c> and <c>Aer</c> (in-node AER repair servers and AER's options), <c>Groups</c> (a list of QSM
    /// groups), <c>AerGroups</c> (AER groups by name) and <c>StartTimeout</c>. The options are validated when the host starts, by the options'
    /// own rules; a failure names the configuration key and the option.
    /// </summary>
    public static QuickSilverBuilder AddQuickSilver(this IServiceCollection services, IConfiguration configuration)
    {
        ArgumentNullException.ThrowIfNull(configuration);
        string? path = (configuration as IConfigurationSection)?.Path;
        services.AddOptions<QuickSilverHostOptions>().Configure(options =>
        {
            configuration.Bind(options.Node);
            configuration.GetSection(nameof(QuickSilverHostOptions.Groups)).Bind(options.Groups);
            configuration.GetSection(nameof(QuickSilverHostOptions.AerGroups)).Bind(options.AerGroups);
            if (configuration[nameof(QuickSilverHostOptions.StartTimeout)] is not null)
            {
                options.StartTimeout = configuration.GetValue<TimeSpan>(nameof(QuickSilverHostOptions.StartTimeout));
            }
        });
        return Add(services, path ?? "QuickSilver");
    }

    /// <summary>Adds a hosted QuickSilver node configured in code, e.g.
    /// <c>o => { o.Node = o.Node with { EmbeddedGms = true }; o.Groups.Add("prices/tech"); }</c>. Validated when the host starts.</summary>
    public static QuickSilverBuilder AddQuickSilver(this IServiceCollection services, Action<QuickSilverHostOptions> configure)
    {
        ArgumentNullException.ThrowIfNull(configure);
        services.AddOptions<QuickSilverHostOptions>().Configure(configure);
        return Add(services, null);
    }

    private static QuickSilverBuilder Add(IServiceCollection services, string? sectionPath)
    {
        services.AddOptions<QuickSilverHostOptions>().ValidateOnStart();
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IValidateOptions<QuickSilverHostOptions>>(new QuickSilverHostOptionsValidator(sectionPath)));
        services.TryAddSingleton(sp => new QuickSilverService(
            sp.GetRequiredService<IOptions<QuickSilverHostOptions>>(),
            sp.GetServices<GroupRegistration>(),
            sp,
            sp.GetService<IMeterFactory>(),
            sp.GetService<Microsoft.Extensions.Logging.ILoggerFactory>()));
        services.AddHostedService(sp => sp.GetRequiredService<QuickSilverService>());
        return new QuickSilverBuilder(services);
    }
}
