using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Hosting;

namespace QuickSilver.Hosting.Tests;

/// <summary>Hosts for the tests: an embedded GMS on a random loopback port, a random multicast pool, a short token
/// interval, configured the way an application's appsettings.json would.</summary>
internal static class Hosts
{
    public static Dictionary<string, string?> Settings(params (string Key, string? Value)[] extra)
    {
        var settings = new Dictionary<string, string?>
        {
            ["QuickSilver:Gms"] = $"127.0.0.1:{Random.Shared.Next(30000, 60000)}",
            ["QuickSilver:EmbeddedGms"] = "true",
            ["QuickSilver:Region:TokenInterval"] = "00:00:00.100",
            ["QuickSilver:GmsServer:BatchInterval"] = "00:00:00.020",
            ["QuickSilver:GmsServer:MulticastPoolStart"] = $"239.252.{Random.Shared.Next(1, 200)}.0:{Random.Shared.Next(20000, 60000)}",
            ["QuickSilver:Groups:0"] = "tests/hosting",
        };
        foreach (var (key, value) in extra)
        {
            settings[key] = value;
        }

        return settings;
    }

    /// <summary>A host on <paramref name="settings"/> whose start fails validation with a message containing
    /// <paramref name="expected"/>, and starts nothing.</summary>
    public static async Task AssertStartFailsNamingAsync(Dictionary<string, string?> settings, string expected)
    {
        var builder = Builder(settings);
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        var error = await Assert.ThrowsAsync<Microsoft.Extensions.Options.OptionsValidationException>(() => host.StartAsync());
        Assert.Contains(expected, error.Message, StringComparison.Ordinal);
        Assert.Throws<InvalidOperationException>(() => host.Services.GetRequiredService<QuickSilverService>().Node); // nothing started
    }

    public static HostApplicationBuilder Builder(Dictionary<string, string?> settings)
    {
        var builder = Host.CreateApplicationBuilder(new HostApplicationBuilderSettings { DisableDefaults = true });
        builder.Configuration.AddInMemoryCollection(settings);
        return builder;
    }
}
