using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;
using QuickSilver.Core.Io;

namespace QuickSilver.Hosting.Tests;

/// <summary>AER groups and in-node repair servers in <c>AddQuickSilver</c>'s configuration (docs/aer.md, "In the generic
/// host and qs node"): binding, validation at start naming the key, and three hosts (source, repair server, receiver)
/// over real loopback UDP and IP multicast. The timeouts are hang guards. In <see cref="HostingTests"/>' collection (its
/// meter-factory test must not see these hosts' meters).</summary>
[Collection(nameof(HostingTests))]
public sealed class AerHostingTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(60);

    [Fact]
    public void AER_groups_repair_servers_and_AER_options_bind_from_configuration()
    {
        var builder = Hosts.Builder(Hosts.Settings(
            ("QuickSilver:AerGroups:prices/eu:Session", "7"),
            ("QuickSilver:AerGroups:prices/eu:Group", "239.255.42.1:47100"),
            ("QuickSilver:AerGroups:prices/eu:Source", "127.0.0.1:5000"),
            ("QuickSilver:AerGroups:prices/eu:Children:0", "127.0.0.1:5001"),
            ("QuickSilver:AerGroups:prices/eu:Children:1", "127.0.0.1:5002"),
            ("QuickSilver:AerGroups:news:Session", "8"),
            ("QuickSilver:AerGroups:news:Group", "239.255.42.2:47100"),
            ("QuickSilver:AerGroups:news:Source", "127.0.0.1:5003"),
            ("QuickSilver:RepairServers:0:Session", "9"),
            ("QuickSilver:RepairServers:0:Group", "239.255.42.3:47100"),
            ("QuickSilver:RepairServers:0:Source", "127.0.0.1:5004"),
            ("QuickSilver:RepairServers:0:Children:0", "127.0.0.1:5005"),
            ("QuickSilver:Aer:SpmInterval", "00:00:00.050")));
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        var options = host.Services.GetRequiredService<IOptions<QuickSilverHostOptions>>().Value;
        Assert.Equal(2, options.AerGroups.Count);
        var eu = options.AerGroups["prices/eu"];
        Assert.Equal(7u, eu.Session);
        Assert.Equal(NetAddress.Parse("239.255.42.1:47100"), eu.Group);
        Assert.Equal(NetAddress.Parse("127.0.0.1:5000"), eu.Source);
        Assert.Equal(new[] { NetAddress.Parse("127.0.0.1:5001"), NetAddress.Parse("127.0.0.1:5002") }, eu.Children);
        Assert.Empty(options.AerGroups["news"].Children); // a receiver's, or a source that re-multicasts repairs
        var server = Assert.Single(options.Node.RepairServers);
        Assert.Equal(new AerRepairServerOptions
        {
            Session = 9, Group = NetAddress.Parse("239.255.42.3:47100"), Source = NetAddress.Parse("127.0.0.1:5004"), Children = server.Children,
        }, server);
        Assert.Equal(new[] { NetAddress.Parse("127.0.0.1:5005") }, server.Children);
        Assert.Equal(TimeSpan.FromMilliseconds(50), options.Node.Aer.SpmInterval);
        Assert.Equal(new Aer.AerOptions().SpmTimeout, options.Node.Aer.SpmTimeout); // untouched keys keep their defaults
        Assert.Equal(new[] { "tests/hosting" }, options.Groups);
    }

    [Theory]
    [InlineData("QuickSilver:AerGroups:wan:Group", "127.0.0.1:47100", "QuickSilver:AerGroups:wan:Group: QuickSilverHostOptions.AerGroups['wan']: AerGroupOptions.Group must be an IPv4 multicast address")]
    [InlineData("QuickSilver:AerGroups:wan:Source", "239.255.42.9:5000", "QuickSilver:AerGroups:wan:Source: QuickSilverHostOptions.AerGroups['wan']: AerGroupOptions.Source must be")]
    [InlineData("QuickSilver:AerGroups:wan:Children:0", "127.0.0.1:0", "QuickSilver:AerGroups:wan:Children: QuickSilverHostOptions.AerGroups['wan']: AerGroupOptions.Children must be unicast")]
    [InlineData("QuickSilver:AerGroups:wan:Session", "3", "QuickSilver:AerGroups:wan:Session: QuickSilverHostOptions.AerGroups['wan']: AER session 3 is taken by an in-node repair server")]
    [InlineData("QuickSilver:Groups:1", "wan", "QuickSilver:AerGroups:wan: QuickSilverHostOptions.AerGroups['wan']: 'wan' is also in QuickSilverHostOptions.Groups")]
    [InlineData("QuickSilver:RepairServers:0:Children:0", null, "QuickSilver:RepairServers:0:Children: QuickSilverNodeOptions.RepairServers[0]: AerRepairServerOptions.Children is empty")]
    [InlineData("QuickSilver:RepairServers:0:Group", "10.0.0.1:47100", "QuickSilver:RepairServers:0:Group: QuickSilverNodeOptions.RepairServers[0]: AerRepairServerOptions.Group must be")]
    [InlineData("QuickSilver:Aer:SpmInterval", "00:00:00", "QuickSilver:Aer:SpmInterval: AerOptions.SpmInterval must be positive")]
    public async Task A_bad_AER_option_fails_the_host_start_with_a_message_naming_the_key(string key, string? value, string expected)
    {
        var settings = Hosts.Settings(
            ("QuickSilver:AerGroups:wan:Session", "1"),
            ("QuickSilver:AerGroups:wan:Group", "239.255.42.1:47100"),
            ("QuickSilver:AerGroups:wan:Source", "127.0.0.1:5000"),
            ("QuickSilver:RepairServers:0:Session", "3"),
            ("QuickSilver:RepairServers:0:Group", "239.255.42.3:47100"),
            ("QuickSilver:RepairServers:0:Source", "127.0.0.1:5004"),
            ("QuickSilver:RepairServers:0:Children:0", "127.0.0.1:5005"));
        if (value is null)
        {
            settings.Remove(key);
        }
        else
        {
            settings[key] = value;
        }

        await Hosts.AssertStartFailsNamingAsync(settings, expected);
    }

    [Fact]
    public async Task Hosts_configured_as_AER_source_repair_server_and_receiver_deliver_every_message_in_order()
    {
        // The three hosts' addresses must be known before any starts (each names the others), so they are ports the
        // system handed out a moment earlier; another process on this shared machine may take one meanwhile (CI saw
        // "Address already in use" once). Only that bind failure is tried again, with fresh ports.
        for (int attempt = 1; ; attempt++)
        {
            try
            {
                await DeliverThroughRepairServerAsync();
                return;
            }
            catch (SocketException e) when (e.SocketErrorCode == SocketError.AddressAlreadyInUse && attempt < 3)
            {
            }
        }
    }

    private static async Task DeliverThroughRepairServerAsync()
    {
        const int Messages = 500;
        var settings = Hosts.Settings();
        string gms = settings["QuickSilver:Gms"]!;
        string source = FreeAddress(), server = FreeAddress(), receiver = FreeAddress();
        string wan = $"239.254.{Random.Shared.Next(1, 250)}.{Random.Shared.Next(1, 250)}:{Random.Shared.Next(20_000, 60_000)}";
        (string, string?)[] Group(params (string, string?)[] extra) =>
        [
            ("QuickSilver:AerGroups:wan:Session", "7"), ("QuickSilver:AerGroups:wan:Group", wan), ("QuickSilver:AerGroups:wan:Source", source), .. extra,
        ];
        QuickSilverGroup? joined = null;
        using var receiverHost = StartHost(gms, receiver, Group(("QuickSilver:InjectedLossRate", "0.02")), b => b.JoinGroup("wan", (g, _) => joined = g));
        using var serverHost = StartHost(gms, server,
        [
            ("QuickSilver:RepairServers:0:Session", "7"), ("QuickSilver:RepairServers:0:Group", wan),
            ("QuickSilver:RepairServers:0:Source", source), ("QuickSilver:RepairServers:0:Children:0", receiver),
        ]);
        using var sourceHost = StartHost(gms, source, Group(("QuickSilver:AerGroups:wan:Children:0", server)), embeddedGms: true);
        using var cts = new CancellationTokenSource(Guard);
        await sourceHost.StartAsync(cts.Token);
        await serverHost.StartAsync(cts.Token);
        await receiverHost.StartAsync(cts.Token);

        var output = sourceHost.Services.GetRequiredService<QuickSilverService>().Group("wan");
        var input = receiverHost.Services.GetRequiredService<QuickSilverService>().Group("wan");
        Assert.Same(input, joined);
        Assert.Equal(GroupTransport.Aer, output.Transport);
        Assert.Equal(GroupTransport.Aer, input.Transport);
        await Task.Delay(300, cts.Token); // the first SPMs reach the repair server and the receiver

        var read = Task.Run(async () =>
        {
            int next = 1;
            await foreach (var message in input.ReadAllAsync(cts.Token))
            {
                Assert.Equal(next, BinaryPrimitives.ReadInt32LittleEndian(message.Payload));
                Assert.Equal((ulong)next, message.Sequence);
                if (++next > Messages)
                {
                    return;
                }
            }
        }, cts.Token);
        var payload = new byte[100];
        for (int i = 1; i <= Messages; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(payload, i);
            await output.PublishAsync(payload, cts.Token);
        }

        await read;
        Assert.Equal(Messages, input.Delivered);
        string served = await serverHost.Services.GetRequiredService<QuickSilverService>().Node.DescribeAsync();
        Assert.Contains("repair server", served, StringComparison.OrdinalIgnoreCase);
        await receiverHost.StopAsync(cts.Token);
        await serverHost.StopAsync(cts.Token);
        await sourceHost.StopAsync(cts.Token);
    }

    /// <summary>A host bound to <paramref name="bind"/> whose GMS is <paramref name="gms"/> (embedded in one of them).</summary>
    private static IHost StartHost(string gms, string bind, (string, string?)[] extra, Action<QuickSilverBuilder>? configure = null, bool embeddedGms = false)
    {
        var settings = Hosts.Settings([("QuickSilver:Gms", gms), ("QuickSilver:Bind", bind), ("QuickSilver:EmbeddedGms", embeddedGms ? "true" : "false"), .. extra]);
        var builder = Hosts.Builder(settings);
        var quickSilver = builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        configure?.Invoke(quickSilver);
        return builder.Build();
    }

    /// <summary>A loopback address with a UDP port the system just handed out (free a moment ago).</summary>
    private static string FreeAddress()
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return $"127.0.0.1:{((IPEndPoint)socket.LocalEndPoint!).Port}";
    }
}
