using System.CommandLine;
using System.Diagnostics;
using System.Text.Json;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Fec;
using QuickSilver.Dissemination.Hosting;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Scheduling;
using QuickSilver.Samples;
using Spectre.Console;

namespace QuickSilver.Tools;

/// <summary><c>qs files serve DIR</c> and <c>qs files get NAME... --out DIR</c>: the WebBase dissemination facility
/// (docs/dissemination.md) over a TCP request channel and loopback IP multicast.</summary>
internal static class FilesVerb
{
    /// <param name="json">The tool's --json option (recursive, on the root): JSON lines instead of status lines and progress bars.</param>
    public static Command Create(Option<bool> json) => new("files", "Distribute files to many clients over multicast (issue 17).") { Serve(json), Get(json) };

    private static Option<NetAddress> Multicast() => new("--multicast")
    {
        Description = "Announcement group address:port; data channel c uses the next addresses, port + 1.",
        DefaultValueFactory = _ => new NetAddress(0xEFFF1101, 7170),
        CustomParser = r =>
        {
            string text = r.Tokens.Count > 0 ? r.Tokens[0].Value : "";
            try
            {
                var a = NetAddress.Parse(text);
                if (!a.IsMulticast || a.Port == 0 || a.Port == ushort.MaxValue)
                {
                    r.AddError($"--multicast must be an IPv4 multicast address with a port below 65535 (e.g. 239.255.17.1:7170); got '{text}'.");
                }

                return a;
            }
            catch (FormatException e)
            {
                r.AddError($"--multicast: {e.Message}");
                return default;
            }
        },
    };

    private static Command Serve(Option<bool> json)
    {
        var dir = new Argument<string>("DIR") { Description = "Directory whose files (recursively) are served, named by relative path." };
        var listen = Cli.Address("--listen", "TCP address of the request channel.", loopbackOnly: false, NetAddress.Loopback(47170));
        var multicast = Multicast();
        var channels = Cli.Int("--channels", "Data channels (d)", 4, 1, Wire.MaxChannels);
        var rate = Cli.Int("--rate", "Bandwidth cap per data channel, bytes/s", 2_000_000, 1_000, 1_000_000_000);
        var payload = Cli.Int("--packet-payload", "Page bytes per data datagram (1,456 with the 16-byte header is a 1,472-byte datagram, what a 1,500-byte MTU carries; the seed used 500)", Wire.MaxPacketPayload, 16, Wire.MaxPacketPayload);
        var pageSize = Cli.Int("--page-size", "Page size in bytes, a multiple of --packet-payload, at most 255 packets (the seed used 30,000)", 39 * Wire.MaxPacketPayload, 16, PageOptions.MaxPageSize);
        var scheduler = new Option<string>("--scheduler") { Description = "rq or circular", DefaultValueFactory = _ => "rq" };
        scheduler.AcceptOnlyFromAmong("rq", "circular");
        var seconds = Cli.Int("--seconds", "Stop after this many seconds; 0 runs until Ctrl+C", 0, 0, 30 * 86_400);
        var redundancy = new Option<string>("--redundancy") { Description = "adaptive (proactive repair packets sized by the loss the clients report; none without loss) or paper (the seed's rule, --fec-percent per requesting client)", DefaultValueFactory = _ => "adaptive" };
        redundancy.AcceptOnlyFromAmong("adaptive", "paper");
        var fec = Cli.Int("--fec-percent", "With --redundancy paper: repair packets added per requesting client, as a percentage of the page (the seed's 1; capped at 120 % of the page); 0 sends no proactive repair", 1, 0, 100);
        var waitClients = Cli.Int("--wait-clients", "Hold the data until this many clients have asked (a batch to a known set of clients); 0 starts at the first", 0, 0, 10_000);
        var waitSeconds = Cli.Int("--wait-seconds", "The longest --wait-clients holds, from the first request", 10, 0, 3_600);
        var command = new Command("serve", "Serve the files of DIR.") { dir, listen, multicast, channels, rate, payload, pageSize, scheduler, seconds, redundancy, fec, waitClients, waitSeconds };
        command.SetAction(async (parse, cancellationToken) =>
        {
            int packet = parse.GetValue(payload), page = parse.GetValue(pageSize);
            if (page % packet != 0 || page / packet > 255)
            {
                await Console.Error.WriteLineAsync($"--page-size must be a multiple of --packet-payload ({packet}) and at most 255 packets; got {page}.");
                return Cli.BadOptions;
            }

            var group = parse.GetValue(multicast);
            var options = new ServerOptions
            {
                Pages = new PageOptions { PacketPayload = packet, PageSize = page },
                DataChannels = parse.GetValue(channels),
                ChannelBytesPerSecond = parse.GetValue(rate),
                Scheduler = parse.GetValue(scheduler) == "circular" ? SchedulerKind.Circular : SchedulerKind.RQ,
                AnnounceGroup = group,
                DataGroupBase = new NetAddress(group.Ip + 1, (ushort)(group.Port + 1)),
                AnnounceDelay = TimeSpan.FromMilliseconds(20),
                RedundancyMode = parse.GetValue(redundancy) == "paper" ? RedundancyMode.Paper : RedundancyMode.Adaptive,
                Redundancy = new RedundancyRule { PercentPerRequester = parse.GetValue(fec) },
                StartWhenClients = parse.GetValue(waitClients),
                StartWaitMax = TimeSpan.FromSeconds(parse.GetValue(waitSeconds)),
            };
            try
            {
                options.Validate();
            }
            catch (ArgumentOutOfRangeException e)
            {
                await Console.Error.WriteLineAsync(e.Message);
                return Cli.BadOptions;
            }

            using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            int limit = parse.GetValue(seconds);
            if (limit > 0)
            {
                stop.CancelAfter(TimeSpan.FromSeconds(limit));
            }

            FileServerHost host;
            try
            {
                host = await FileServerHost.StartAsync(parse.GetValue(dir)!, options, parse.GetValue(listen).ToIPEndPoint(), MulticastInterfaceFor(parse.GetValue(listen)), stop.Token);
            }
            catch (ArgumentException e)
            {
                await Console.Error.WriteLineAsync(e.Message);
                return Cli.BadOptions;
            }

            await using (host)
            {
                bool asJson = parse.GetValue(json);
                long bytes = host.Catalog.Files.Sum(f => f.Size);
                if (asJson)
                {
                    Console.WriteLine(JsonSerializer.Serialize(new { @event = "serving", listen = host.LocalEndPoint.ToString(), files = host.Catalog.Files.Count, bytes, pages = host.Catalog.ItemCount }));
                }
                else
                {
                    Console.WriteLine($"serving {host.Catalog.Files.Count} files, {bytes:N0} bytes, {host.Catalog.ItemCount:N0} pages on {host.LocalEndPoint}; announcements on {options.AnnounceGroup}, {options.DataChannels} data channels at {options.ChannelBytesPerSecond:N0} B/s");
                }

                while (!stop.IsCancellationRequested)
                {
                    await Task.Delay(TimeSpan.FromSeconds(1), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
                    var (c, clients, drops) = await host.SnapshotAsync();
                    if (asJson)
                    {
                        Console.WriteLine(JsonSerializer.Serialize(new { @event = "status", clients, transmissions = c.Transmissions, repairOnly = c.RepairOnlyTransmissions, dataBytes = c.DataBytesSent, sourcePackets = c.SourcePacketsSent, repairPackets = c.RepairPacketsSent, proactiveRepair = c.ProactiveRepairPackets, announceBytes = c.AnnounceBytes, replyBytes = c.ReplyBytesSent, requestBytes = c.RequestBytesReceived, naks = c.NaksAccepted, earlyNaks = c.EarlyNaks, pacingSlips = c.PacingSlips, untaken = c.Untaken, pacingForgivenMs = c.PacingForgiven.TotalMilliseconds, intervalUs = c.ChannelIntervalMicros, sendFailures = c.SendFailures, drops }));
                    }
                    else
                    {
                        Console.WriteLine($"{clients} clients, {c.Transmissions:N0} pages sent ({c.RepairOnlyTransmissions:N0} repair only), {c.DataBytesSent:N0} data bytes, {c.NaksAccepted:N0} NAKs, {drops.Values.Sum():N0} dropped frames ({string.Join(", ", drops.Select(d => $"{d.Key} {d.Value:N0}"))})");
                    }
                }
            }

            return 0;
        });
        return command;
    }

    private static Command Get(Option<bool> json)
    {
        var names = new Argument<string[]>("NAME") { Description = "Files to fetch (names relative to the served directory).", Arity = ArgumentArity.OneOrMore };
        var output = new Option<string>("--out") { Description = "Directory to write the files into.", Required = true };
        var server = Cli.Address("--server", "TCP address of the server's request channel.", loopbackOnly: false, NetAddress.Loopback(47170));
        var capacity = Cli.Int("--capacity", "Data channels this client receives at once", 255, 1, 255);
        var timeout = Cli.Int("--timeout", "Give up after this many seconds", 600, 1, 30 * 86_400);
        var coalesce = Cli.Int("--coalesce-us", "Microseconds the client waits after reading datagrams before it reads again, so a burst is read at once (0: wake per datagram)", 1_000, 0, 100_000);
        var command = new Command("get", "Fetch files from a server.") { names, output, server, capacity, timeout, coalesce };
        command.SetAction(async (parse, cancellationToken) =>
        {
            var requested = parse.GetValue(names)!;
            if (requested.Length > Wire.MaxNamesPerRequest)
            {
                await Console.Error.WriteLineAsync($"NAME: at most {Wire.MaxNamesPerRequest} files per request; got {requested.Length}.");
                return Cli.BadOptions;
            }

            using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            stop.CancelAfter(TimeSpan.FromSeconds(parse.GetValue(timeout)));
            FileClientHost host;
            try
            {
                host = await FileClientHost.StartAsync(parse.GetValue(server).ToIPEndPoint(), requested, parse.GetValue(output)!, new ClientOptions { Capacity = parse.GetValue(capacity), StallTimeout = TimeSpan.FromSeconds(5), ReceiveCoalescing = TimeSpan.FromMicroseconds(parse.GetValue(coalesce)) }, LocalAddressToward(parse.GetValue(server)), stop.Token);
            }
            catch (ArgumentException e)
            {
                await Console.Error.WriteLineAsync(e.Message);
                return Cli.BadOptions;
            }
            catch (System.Net.Sockets.SocketException e)
            {
                await Console.Error.WriteLineAsync($"--server {parse.GetValue(server)}: {e.Message}");
                return 1;
            }

            var clock = Stopwatch.StartNew();
            ClientProgress progress;
            await using (host)
            {
                progress = parse.GetValue(json) ? await RunJson(host, stop.Token)
                    : Console.IsOutputRedirected ? await RunLines(host, stop.Token)
                    : await RunBars(host, stop.Token);
            }

            long bytes = progress.Files.Where(f => f.Verified).Sum(f => f.Size);
            double seconds = clock.Elapsed.TotalSeconds;
            if (parse.GetValue(json))
            {
                Console.WriteLine(JsonSerializer.Serialize(new { @event = "summary", complete = progress.Complete, files = progress.Files.Count(f => f.Verified), bytes, seconds, dataSeconds = progress.DataTime?.TotalSeconds, notFound = progress.NotFound, pagesReceived = progress.PagesDecoded, repairs = progress.PagesRebuilt, naks = progress.NaksSent, dataPackets = progress.DataPackets, counters = progress.Counters }));
            }
            else
            {
                Console.WriteLine($"{(progress.Complete ? "done" : "INCOMPLETE")}: {progress.Files.Count(f => f.Verified)} of {progress.Files.Count} files verified, {bytes:N0} bytes in {seconds:N1} s ({bytes / Math.Max(seconds, 1e-3) / 1e6:N2} MB/s{(progress.DataTime is { } data ? $"; data phase {data.TotalSeconds:N2} s, {bytes / Math.Max(data.TotalSeconds, 1e-3) / 1e6:N2} MB/s" : "")}), {progress.PagesRebuilt:N0} pages rebuilt from repair packets, {progress.NaksSent:N0} NAKs");
                foreach (var name in progress.NotFound)
                {
                    Console.WriteLine($"not found on the server: {name}");
                }
            }

            return progress.Complete && progress.NotFound.Count == 0 ? 0 : 1;
        });
        return command;
    }

    private static async Task<ClientProgress> Wait(FileClientHost host, Action<ClientProgress> show, CancellationToken token)
    {
        while (true)
        {
            var p = await host.ProgressAsync();
            show(p);
            if (p.Complete || token.IsCancellationRequested || host.Disconnected)
            {
                return p;
            }

            await Task.WhenAny(Task.Delay(TimeSpan.FromMilliseconds(200), token), host.Completion).ContinueWith(_ => { }, TaskScheduler.Default);
        }
    }

    private static Task<ClientProgress> RunJson(FileClientHost host, CancellationToken token)
    {
        int tick = 0;
        return Wait(host, p =>
        {
            if (tick++ % 5 == 0)
            {
                Console.WriteLine(JsonSerializer.Serialize(new { @event = "progress", files = p.Files.Select(f => new { name = f.Name, pagesHeld = f.PagesHeld, pages = f.Pages, verified = f.Verified }), repairs = p.PagesRebuilt }));
            }
        }, token);
    }

    /// <summary>Output to a file or a pipe: a status line every 2 s, not progress bars. Spectre.Console's fallback
    /// renderer redraws every task 10 times a second, and took about a tenth of a client's CPU on the testbed (perf, a
    /// 200 MB transfer at 25,000 datagrams/s: `ProgressContext.Refresh`), a log full of repeated tables.</summary>
    private static Task<ClientProgress> RunLines(FileClientHost host, CancellationToken token)
    {
        int tick = 0;
        return Wait(host, p =>
        {
            if (tick++ % 10 == 0)
            {
                long pages = p.Files.Sum(f => (long)f.Pages), held = p.Files.Sum(f => (long)f.PagesHeld);
                Console.WriteLine($"{held:N0} of {pages:N0} pages, {p.Files.Count(f => f.Verified)} of {p.Files.Count} files verified, {p.PagesRebuilt:N0} pages rebuilt, {p.NaksSent:N0} NAKs");
            }
        }, token);
    }

    private static async Task<ClientProgress> RunBars(FileClientHost host, CancellationToken token)
    {
        ClientProgress last = await host.ProgressAsync();
        await AnsiConsole.Progress()
            .Columns(new TaskDescriptionColumn(), new ProgressBarColumn(), new PercentageColumn(), new DownloadedColumn(), new TransferSpeedColumn(), new RemainingTimeColumn())
            .StartAsync(async ctx =>
            {
                var tasks = new Dictionary<string, ProgressTask>(StringComparer.Ordinal);
                last = await Wait(host, p =>
                {
                    foreach (var f in p.Files)
                    {
                        if (!tasks.TryGetValue(f.Name, out var t))
                        {
                            tasks[f.Name] = t = ctx.AddTask(Markup.Escape(f.Name), maxValue: Math.Max(1, f.Size));
                        }

                        double held = f.Pages == 0 ? f.Size : (double)f.Size * f.PagesHeld / f.Pages;
                        t.Value = f.Verified ? f.Size : Math.Min(held, f.Size);
                        t.Description = $"{Markup.Escape(f.Name)} [grey](repairs {p.PagesRebuilt:N0})[/]";
                    }
                }, token);
            });
        return last;
    }

    /// <summary>The interface the server multicasts on: its --listen address's, or loopback when it listens on any.</summary>
    internal static NetAddress MulticastInterfaceFor(NetAddress listen) =>
        listen.Ip == 0 ? NetAddress.Loopback(0) : new NetAddress(listen.Ip, 0);

    /// <summary>The interface a client joins the server's groups on: the local address the routing table picks toward
    /// the server (loopback for a server on loopback, eth0's address in a network namespace). A connected UDP socket
    /// sends nothing; it only asks the kernel for the route.</summary>
    internal static NetAddress LocalAddressToward(NetAddress server)
    {
        if (server.IsLoopback)
        {
            return NetAddress.Loopback(0);
        }

        using var probe = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp);
        probe.Connect(server.ToIPEndPoint());
        var local = (System.Net.IPEndPoint)probe.LocalEndPoint!;
        return NetAddress.FromIPEndPoint(new System.Net.IPEndPoint(local.Address, 0));
    }
}
