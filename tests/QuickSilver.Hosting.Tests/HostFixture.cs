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

    public static HostApplicationBuilder Builder(Dictionary<string, string?> settings)
    {
        var builder = Host.CreateApplicationBuilder(new HostApplicationBuilderSettings { DisableDefaults = true });
        builder.Configuration.AddInMemoryCollection(settings);
        return builder;
    }
}
