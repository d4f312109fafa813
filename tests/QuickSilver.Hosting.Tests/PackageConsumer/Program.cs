using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using QuickSilver;
using QuickSilver.Hosting;

// Starts a hosted node (embedded GMS on the port given as args[0], multicast pool args[1]), publishes 1,000 messages
// in "consumer/test", reads them back in order and prints "consumer ok 1000"; exit 1 otherwise.
var builder = Host.CreateApplicationBuilder(new HostApplicationBuilderSettings { DisableDefaults = true });
builder.Configuration.AddInMemoryCollection(new Dictionary<string, string?>
{
    ["QuickSilver:Gms"] = $"127.0.0.1:{args[0]}",
    ["QuickSilver:EmbeddedGms"] = "true",
    ["QuickSilver:GmsServer:MulticastPoolStart"] = args[1],
    ["QuickSilver:Groups:0"] = "consumer/test",
});
builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
using var host = builder.Build();
await host.StartAsync();
var group = host.Services.GetRequiredService<QuickSilverService>().Group("consumer/test");
for (int i = 0; i < 1000; i++)
{
    await group.PublishAsync(BitConverter.GetBytes(i));
}

int next = 0;
using var guard = new CancellationTokenSource(TimeSpan.FromSeconds(30));
await foreach (var message in group.ReadAllAsync(guard.Token))
{
    if (BitConverter.ToInt32(message.Payload) != next++)
    {
        Console.WriteLine($"consumer out of order at {next - 1}");
        return 1;
    }

    if (next == 1000)
    {
        break;
    }
}

await host.StopAsync();
Console.WriteLine($"consumer ok {next} {typeof(QuickSilverNode).Assembly.GetName().Version}");
return 0;
