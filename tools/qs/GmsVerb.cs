using System.CommandLine;
using System.Text.Json;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary><c>qs gms</c>: a standalone GMS (a node with an embedded GMS that joins no group) until Ctrl+C or --seconds.</summary>
internal static class GmsVerb
{
    public static Command Create(Option<bool> json)
    {
        var listen = Cli.Address("--listen", "Address the GMS listens on.", loopbackOnly: false, NetAddress.Loopback(47001));
        var pool = new Option<string>("--multicast") { Description = "First multicast address:port of the regions' pool.", DefaultValueFactory = _ => "239.255.1.0:47000" };
        pool.Validators.Add(r =>
        {
            string text = r.GetValueOrDefault<string>() ?? "";
            if (!IsMulticast(text))
            {
                r.AddError($"--multicast must be an IPv4 multicast address with a port (e.g. 239.255.1.0:47000); got '{text}'.");
            }
        });
        var seconds = Cli.Int("--seconds", "Stop after this many seconds; 0 runs until Ctrl+C", 0, 0, 30 * 86_400);
        var security = SecurityFlags.Create();
        var command = new Command("gms", "Run a standalone group membership service.") { listen, pool, seconds, security.SecretFile, security.Mode };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (!security.TryRead(parse, out var datagrams))
            {
                return Cli.BadOptions;
            }

            var options = new QuickSilverNodeOptions
            {
                Gms = parse.GetValue(listen),
                EmbeddedGms = true,
                GmsServer = new GmsOptions { MulticastPoolStart = NetAddress.Parse(parse.GetValue(pool)!) },
                Security = datagrams,
                LoggerFactory = QsLogging.Factory,
            };
            int limit = parse.GetValue(seconds);
            using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            if (limit > 0)
            {
                stop.CancelAfter(TimeSpan.FromSeconds(limit));
            }

            await using var node = await QuickSilverNode.StartAsync(options, stop.Token);
            bool asJson = parse.GetValue(json);
            Console.WriteLine(asJson
                ? JsonSerializer.Serialize(new { @event = "listening", gms = options.Gms.ToString(), multicast = options.GmsServer.MulticastPoolStart.ToString(), security = datagrams.Mode.ToString() })
                : $"gms listening on {options.Gms}, multicast pool from {options.GmsServer.MulticastPoolStart}, datagram security {datagrams.Mode}; Ctrl+C stops it");
            while (!stop.IsCancellationRequested)
            {
                await Task.Delay(TimeSpan.FromSeconds(5), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
                var snapshot = await node.GetGmsSnapshotAsync();
                var (nodes, groups, regions) = (snapshot.Nodes, snapshot.Groups, snapshot.Regions);
                Console.WriteLine(asJson
                    ? JsonSerializer.Serialize(new { @event = "snapshot", nodes = nodes - 1, groups, regions })
                    : $"gms: {nodes - 1} nodes, {groups} groups, {regions} regions");
            }

            return 0;
        });
        return command;
    }

    private static bool IsMulticast(string text)
    {
        try
        {
            return NetAddress.Parse(text) is { IsMulticast: true, Port: > 0 };
        }
        catch (FormatException)
        {
            return false;
        }
    }
}
