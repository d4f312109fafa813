using System.Diagnostics.Metrics;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;
using QuickSilver.Core.Io;

namespace QuickSilver.Hosting.Tests;

/// <summary>AddQuickSilver: binding, validation at start, the hosted node's life and its health check. Nodes run over
/// real loopback UDP with an embedded GMS; the timeouts are hang guards. One collection with <see cref="AerHostingTests"/>:
/// the meter-factory test listens to every meter in the process, so no other hosts start beside it.</summary>
[Collection(nameof(HostingTests))]
public sealed class HostingTests
{
    [Fact]
    public void Options_bind_from_configuration_keys_named_like_the_options()
    {
        var builder = Hosts.Builder(Hosts.Settings(
            ("QuickSilver:Gms", "127.0.0.2:47123"),
            ("QuickSilver:PublishBuffer", "1234"),
            ("QuickSilver:Region:TokenInterval", "00:00:02"),
            ("QuickSilver:GmsServer:MaxNodes", "77"),
            ("QuickSilver:Groups:1", "tests/second"),
            ("QuickSilver:StartTimeout", "00:00:07")));
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        var options = host.Services.GetRequiredService<IOptions<QuickSilverHostOptions>>().Value;
        Assert.Equal(NetAddress.Parse("127.0.0.2:47123"), options.Node.Gms);
        Assert.True(options.Node.EmbeddedGms);
        Assert.Equal(1234, options.Node.PublishBuffer);
        Assert.Equal(TimeSpan.FromSeconds(2), options.Node.Region.TokenInterval);
        Assert.Equal(77, options.Node.GmsServer.MaxNodes);
        Assert.Equal(new[] { "tests/hosting", "tests/second" }, options.Groups);
        Assert.Equal(TimeSpan.FromSeconds(7), options.StartTimeout);
        Assert.Equal(new QuickSilverNodeOptions().ReceiveBuffer, options.Node.ReceiveBuffer); // untouched keys keep their defaults
    }

    [Theory]
    [InlineData("QuickSilver:PublishBuffer", "0", "QuickSilver:PublishBuffer: QuickSilverNodeOptions.PublishBuffer must be between")]
    [InlineData("QuickSilver:Region:TokenInterval", "-00:00:01", "QuickSilver:Region:TokenInterval: RegionOptions.TokenInterval must be positive")]
    [InlineData("QuickSilver:GmsServer:MaxNodes", "0", "QuickSilver:GmsServer:MaxNodes: GmsOptions.MaxNodes")]
    [InlineData("QuickSilver:SendQueueCapacity", "0", "QuickSilver:SendQueueCapacity: QuickSilverNodeOptions.SendQueueCapacity must be between")]
    [InlineData("QuickSilver:ReliableUnicast:MaxPeers", "0", "QuickSilver:ReliableUnicast:MaxPeers: QuickSilverNodeOptions.ReliableUnicast.MaxPeers must be between")]
    [InlineData("QuickSilver:Bind", "239.1.2.3:5000", "QuickSilver:Bind: QuickSilverNodeOptions.Bind must be a unicast address")]
    [InlineData("QuickSilver:Groups:1", "tests/hosting", "QuickSilver:Groups:1: QuickSilverHostOptions.Groups[1] repeats group 'tests/hosting'")]
    public async Task A_bad_option_fails_the_host_start_with_a_message_naming_the_key_and_the_option(string key, string value, string expected)
        => await Hosts.AssertStartFailsNamingAsync(Hosts.Settings((key, value)), expected);

    [Fact]
    public async Task An_address_that_does_not_parse_names_its_key()
    {
        var builder = Hosts.Builder(Hosts.Settings(("QuickSilver:Gms", "not-an-address")));
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        var error = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync());
        Assert.Contains("QuickSilver:Gms", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Options_set_in_code_are_validated_by_the_same_rules()
    {
        var builder = Hosts.Builder([]);
        builder.Services.AddQuickSilver(o => o.Node = o.Node with { ReceiveBuffer = 1 });
        using var host = builder.Build();

        var error = await Assert.ThrowsAsync<OptionsValidationException>(() => host.StartAsync());
        Assert.StartsWith("QuickSilverNodeOptions.ReceiveBuffer must be between 2 and", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_hosted_node_starts_with_the_host_joins_its_groups_delivers_and_stops_with_it()
    {
        var builder = Hosts.Builder(Hosts.Settings());
        QuickSilverGroup? joined = null;
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"))
            .JoinGroup("tests/from-di", (group, _) => joined = group);
        builder.Services.AddHealthChecks().AddQuickSilver();
        using var host = builder.Build();
        var service = host.Services.GetRequiredService<QuickSilverService>();
        var health = host.Services.GetRequiredService<HealthCheckService>();
        Assert.Equal(HealthStatus.Unhealthy, (await health.CheckHealthAsync()).Status); // before start

        await host.StartAsync().WaitAsync(TimeSpan.FromSeconds(60));
        var node = await service.GetNodeAsync().WaitAsync(TimeSpan.FromSeconds(5));
        Assert.Same(service.Group("tests/from-di"), joined);
        var group = service.Group("tests/hosting");
        Assert.NotNull(group.View);
        Assert.NotEqual(0u, node.Id);

        const int Messages = 100;
        for (int i = 0; i < Messages; i++)
        {
            await group.PublishAsync(BitConverter.GetBytes(i));
        }

        int next = 0;
        using var guard = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        await foreach (var message in group.ReadAllAsync(guard.Token))
        {
            Assert.Equal(next++, BitConverter.ToInt32(message.Payload));
            if (next == Messages)
            {
                break;
            }
        }

        var report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Healthy, report.Status);
        Assert.Equal(2, report.Entries["quicksilver"].Data["groups"]);

        await host.StopAsync().WaitAsync(TimeSpan.FromSeconds(30));
        Assert.Throws<InvalidOperationException>(() => service.Node);
        Assert.Equal(HealthStatus.Unhealthy, (await health.CheckHealthAsync()).Status);
        Assert.Throws<InvalidOperationException>(() => group.TryPublish(new byte[1]));
    }

    [Fact]
    public async Task A_start_that_cannot_reach_the_GMS_fails_within_the_start_timeout_naming_it()
    {
        var builder = Hosts.Builder(Hosts.Settings(("QuickSilver:EmbeddedGms", "false"), ("QuickSilver:StartTimeout", "00:00:00.500")));
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        var error = await Assert.ThrowsAsync<TimeoutException>(() => host.StartAsync().WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Contains("QuickSilverHostOptions.StartTimeout", error.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<TimeoutException>(() => host.Services.GetRequiredService<QuickSilverService>().GetNodeAsync());
    }

    [Fact]
    public async Task The_hosted_node_takes_its_meters_from_the_hosts_meter_factory()
    {
        var builder = Hosts.Builder(Hosts.Settings());
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();
        var factory = host.Services.GetRequiredService<IMeterFactory>();
        var scopes = new List<object?>();
        using var listener = new MeterListener
        {
            InstrumentPublished = (instrument, _) =>
            {
                if (instrument.Meter.Name is QuickSilverTelemetry.CoreMeterName or QuickSilverTelemetry.QsmMeterName && instrument.Name == "qs.packets.in")
                {
                    lock (scopes)
                    {
                        scopes.Add(instrument.Meter.Scope);
                    }
                }
            },
        };
        listener.Start();

        await host.StartAsync().WaitAsync(TimeSpan.FromSeconds(60));
        await host.StopAsync().WaitAsync(TimeSpan.FromSeconds(30));

        lock (scopes)
        {
            Assert.NotEmpty(scopes);
            Assert.All(scopes, scope => Assert.Same(factory, scope));
        }
    }
}
