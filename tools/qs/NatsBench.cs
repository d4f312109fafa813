using System.CommandLine;
using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using System.Threading.Channels;
using NATS.Client.Core;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// <c>qs nats-bench</c>: the peer for the federation, side by side in one run. NATS: two single-server
/// clusters "A" and "B" (Debian's <c>nats-server</c>, started here on loopback and stopped at the end) joined by NATS
/// gateways; a publisher on A sends numbered messages as fast as the NATS .NET client lets it, a subscriber on B counts
/// the distinct ones (NATS core delivery is at most once; a slow subscriber's messages are dropped by the server, and
/// the client's subscription channel is bounded too). QuickSilver: the same count through two federation gateways on
/// loopback (<c>qs gateway-bench</c>'s cross-island run). Rate = distinct messages received / time from the first to
/// the last received.
/// </summary>
internal static class NatsBench
{
    private static readonly JsonSerializerOptions WebJson = new(JsonSerializerDefaults.Web);

    public static Command Create(Option<bool> json)
    {
        var count = Cli.Int("--count", "Messages per run", 100_000, 1000, 10_000_000);
        var sizes = new Option<int[]>("--sizes") { Description = "Message sizes in bytes", DefaultValueFactory = _ => [100, 1000], AllowMultipleArgumentsPerToken = true };
        var server = new Option<string>("--nats-server") { Description = "Path of the nats-server binary", DefaultValueFactory = _ => "/usr/sbin/nats-server" };
        var basePort = Cli.Int("--port-base", "First TCP port used (4 for NATS, 20 more for QuickSilver)", 45_900, 1024, 65_000);
        var command = new Command("nats-bench", "Cross-island msgs/s: NATS (two clusters joined by gateways) against two QuickSilver federation gateways, same machine, same run.") { count, sizes, server, basePort };
        command.SetAction(async (parse, cancellationToken) =>
        {
            string binary = parse.GetValue(server)!;
            if (!File.Exists(binary))
            {
                await Console.Error.WriteLineAsync($"--nats-server: no file at '{binary}' (Debian: apt-get install nats-server).");
                return Cli.BadOptions;
            }

            if (parse.GetValue(sizes)!.Any(s => s < 4 || s > 60_000))
            {
                await Console.Error.WriteLineAsync("--sizes: each size must be between 4 and 60,000 bytes.");
                return Cli.BadOptions;
            }

            int ports = parse.GetValue(basePort);
            var dir = Directory.CreateTempSubdirectory("qs-nats-");
            var a = Start(binary, dir.FullName, "A", ports, ports + 2, ports + 3);
            var b = Start(binary, dir.FullName, "B", ports + 1, ports + 3, ports + 2);
            try
            {
                var results = new List<object>();
                foreach (int size in parse.GetValue(sizes)!)
                {
                    var nats = await NatsRunAsync($"nats://127.0.0.1:{ports}", $"nats://127.0.0.1:{ports + 1}", size, parse.GetValue(count), cancellationToken);
                    var qs = await GatewayBench.CrossIslandAsync(size, parse.GetValue(count), ports + 10, cancellationToken);
                    double ratio = nats.Rate > 0 ? qs.Rate / nats.Rate : 0;
                    results.Add(new { size, nats, quickSilver = qs, ratio });
                    if (!parse.GetValue(json))
                    {
                        Console.WriteLine($"{size,6} B  NATS gateways {nats.Rate,10:N0} msg/s ({nats.Received:N0}/{nats.Sent:N0} received)   QuickSilver gateways {qs.Rate,10:N0} msg/s ({qs.Received:N0}/{qs.Sent:N0} received)   QuickSilver / NATS {ratio:F2}");
                    }
                }

                if (parse.GetValue(json))
                {
                    Console.WriteLine(JsonSerializer.Serialize(results, WebJson));
                }
            }
            finally
            {
                foreach (var p in new[] { a, b })
                {
                    if (!p.HasExited)
                    {
                        p.Kill(entireProcessTree: true);
                    }

                    await p.WaitForExitAsync(CancellationToken.None).WaitAsync(TimeSpan.FromSeconds(5), CancellationToken.None);
                    p.Dispose();
                }

                dir.Delete(recursive: true);
            }

            return 0;
        });
        return command;
    }

    private static Process Start(string binary, string dir, string name, int clientPort, int gatewayPort, int otherGatewayPort)
    {
        string config = Path.Combine(dir, $"{name}.conf");
        string other = name == "A" ? "B" : "A";
        File.WriteAllText(config, string.Create(CultureInfo.InvariantCulture, $$"""
            listen: 127.0.0.1:{{clientPort}}
            server_name: {{name}}
            max_payload: 1048576
            gateway {
              name: {{name}}
              listen: 127.0.0.1:{{gatewayPort}}
              gateways: [ { name: {{other}}, urls: [ "nats://127.0.0.1:{{otherGatewayPort}}" ] } ]
            }
            """));
        var info = new ProcessStartInfo(binary, ["-c", config]) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        var process = Process.Start(info) ?? throw new InvalidOperationException($"cannot start {binary}");
        process.OutputDataReceived += (_, _) => { };
        process.ErrorDataReceived += (_, _) => { };
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return process;
    }

    private static async Task<GatewayBench.RunResult> NatsRunAsync(string urlA, string urlB, int size, int count, CancellationToken cancellationToken)
    {
        await using var publisher = new NatsConnection(new NatsOpts { Url = urlA });
        await using var subscriber = new NatsConnection(new NatsOpts { Url = urlB, SubPendingChannelCapacity = 1 << 20, SubPendingChannelFullMode = BoundedChannelFullMode.DropNewest });
        await ConnectAsync(publisher, cancellationToken);
        await ConnectAsync(subscriber, cancellationToken);
        string subject = $"bench.{size}";
        await using var sub = await subscriber.SubscribeCoreAsync<byte[]>(subject, cancellationToken: cancellationToken);

        // The gateways propagate interest asynchronously: probe until a message crosses (bounded).
        var probe = new byte[size];
        BitConverter.TryWriteBytes(probe, -1);
        bool crossed = false;
        for (int i = 0; i < 200 && !crossed; i++)
        {
            await publisher.PublishAsync(subject, probe, cancellationToken: cancellationToken);
            using var wait = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            wait.CancelAfter(TimeSpan.FromMilliseconds(50));
            try
            {
                await sub.Msgs.WaitToReadAsync(wait.Token);
                crossed = true;
            }
            catch (OperationCanceledException) when (!cancellationToken.IsCancellationRequested)
            {
            }
        }

        if (!crossed)
        {
            throw new InvalidOperationException("no message crossed the NATS gateways within 10 s");
        }

        while (sub.Msgs.TryRead(out _))
        {
        }

        var seen = new bool[count];
        int received = 0;
        long first = 0, last = 0;
        var reader = Task.Run(async () =>
        {
            using var idle = new CancellationTokenSource();
            while (received < count)
            {
                idle.CancelAfter(TimeSpan.FromSeconds(2));
                NatsMsg<byte[]> msg;
                try
                {
                    msg = await sub.Msgs.ReadAsync(idle.Token);
                }
                catch (OperationCanceledException)
                {
                    return; // two seconds of silence: the run is over
                }

                if (msg.Data is { Length: >= 4 } data && BitConverter.ToInt32(data) is int i && i >= 0 && i < count && !seen[i])
                {
                    seen[i] = true;
                    last = Stopwatch.GetTimestamp();
                    if (received++ == 0)
                    {
                        first = last;
                    }
                }
            }
        }, cancellationToken);

        var payload = new byte[size];
        for (int i = 0; i < count; i++)
        {
            BitConverter.TryWriteBytes(payload, i);
            await publisher.PublishAsync(subject, payload, cancellationToken: cancellationToken);
        }

        await reader;
        double seconds = received > 1 ? Stopwatch.GetElapsedTime(first, last).TotalSeconds : 0;
        return new GatewayBench.RunResult(count, received, seconds, seconds > 0 ? (received - 1) / seconds : 0);
    }

    private static async Task ConnectAsync(NatsConnection connection, CancellationToken cancellationToken)
    {
        for (int i = 0; ; i++)
        {
            try
            {
                await connection.ConnectAsync();
                return;
            }
            catch (NatsException) when (i < 50)
            {
                await Task.Delay(100, cancellationToken);
            }
        }
    }
}
