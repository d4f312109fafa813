using System.Buffers.Binary;
using System.CommandLine;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text.Json;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// <c>qs gateway-bench</c>: cross-island against island-local messages per second on this machine. Two gateways
/// (g1 in island 1, g2 in island 2) run in this process on their own loop threads, peer over TCP on loopback, and
/// each island is an IP-multicast range on lo. For each message size a source blasts numbered messages at island 1's
/// native group; the island-local run counts them at a receiver on that group, the cross-island run at a receiver on
/// the group g2's mediator translated the session to (island 1 → g1 → TCP → g2 → island 2). Rate = distinct messages
/// received / time from the first to the last received. Loss is reported, not hidden: UDP on loopback drops when a
/// receiver falls behind.
/// </summary>
internal static class GatewayBench
{
    private static readonly JsonSerializerOptions WebJson = new(JsonSerializerDefaults.Web);

    public static Command Create(Option<bool> json)
    {
        var count = Cli.Int("--count", "Messages per run", 100_000, 1000, 10_000_000);
        var sizes = new Option<int[]>("--sizes") { Description = "Message sizes in bytes", DefaultValueFactory = _ => [100, 1000], AllowMultipleArgumentsPerToken = true };
        var rate = Cli.Int("--rate", "Messages per second offered by the source (0: as fast as it can)", 0, 0, 10_000_000);
        var basePort = Cli.Int("--port-base", "First UDP port used (20 ports)", 45_500, 1024, 65_000);
        var realTime = new Option<bool>("--real-time") { Description = "Make the session content=real-time: data crosses between the gateways as UDP datagrams instead of inside the TCP link" };
        var sealedLink = new Option<bool>("--sealed") { Description = "Give both gateways one random peering secret: the link is authenticated and every frame and real-time datagram sealed (AEGIS-128L)" };
        var command = new Command("gateway-bench", "Measure cross-island msgs/s through two gateways on loopback against the island-local rate.") { count, sizes, rate, basePort, realTime, sealedLink };
        command.SetAction(async (parse, cancellationToken) =>
        {
            if (parse.GetValue(sizes)!.Any(s => s < 4 || s > 60_000))
            {
                await Console.Error.WriteLineAsync("--sizes: each size must be between 4 and 60,000 bytes.");
                return Cli.BadOptions;
            }

            int ports = parse.GetValue(basePort);
            using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.81.0"), PortBase = ports, PoolSize = 4 });
            using var n2 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.82.0"), PortBase = ports + 4, PoolSize = 4 });
            var secret = parse.GetValue(sealedLink) ? System.Security.Cryptography.RandomNumberGenerator.GetBytes(32) : null;
            var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(10), secret, cancellationToken);
            await using (g1)
            await using (g2)
            {
                var results = new List<object>();
                foreach (int size in parse.GetValue(sizes)!)
                {
                    var native = new IPEndPoint(IPAddress.Parse("239.255.83.1"), ports + 10 + (results.Count % 5));
                    var local = Run(native, native, size, parse.GetValue(count), parse.GetValue(rate));
                    var session = SessionName.Parse($"bfed://1/{native.Address}/{native.Port}" + (parse.GetValue(realTime) ? "/?content=real-time" : ""));
                    var answer = new TaskCompletionSource<QuickSilver.Federation.NativeNet.MediatorReply>();
                    g2.Post(() => g2.Gateway.RecvdJoinRequest(new QuickSilver.Federation.NativeNet.JoinRequest(session, r => answer.TrySetResult(r))));
                    var translation = await answer.Task.WaitAsync(TimeSpan.FromSeconds(10), cancellationToken);
                    if (translation.Kind != QuickSilver.Federation.NativeNet.MediatorReplyKind.Translation)
                    {
                        await Console.Error.WriteLineAsync($"join failed: {translation.Kind} {translation.Reason}");
                        return 1;
                    }

                    for (int i = 0; i < 100 && (await g1.SnapshotAsync()).Sessions.Count == 0; i++)
                    {
                        await Task.Delay(50, cancellationToken);
                    }

                    var cross = Run(native, IPEndPoint.Parse(translation.Addresses[0]), size, parse.GetValue(count), parse.GetValue(rate));
                    g2.Post(() => g2.Gateway.RecvdLeaveRequest(session));
                    await Task.Delay(300, cancellationToken);
                    double ratio = local.Rate > 0 ? cross.Rate / local.Rate : 0;
                    results.Add(new { size, local, cross, ratio });
                    if (!parse.GetValue(json))
                    {
                        Console.WriteLine($"{size,6} B  local {local.Rate,10:N0} msg/s ({local.Received:N0}/{local.Sent:N0} received)   cross-island {cross.Rate,10:N0} msg/s ({cross.Received:N0}/{cross.Sent:N0} received)   ratio {ratio:F2}");
                    }
                }

                var s1 = await g1.SnapshotAsync();
                var s2 = await g2.SnapshotAsync();
                if (parse.GetValue(json))
                {
                    Console.WriteLine(JsonSerializer.Serialize(new { results, g1Dropped = n1.Dropped, g1Counters = s1.Counters, g2Counters = s2.Counters }, WebJson));
                }
                else
                {
                    Console.WriteLine($"g1: from island {s1.Counters["DataFromIsland"]:N0} ({n1.Receives.Datagrams:N0} datagrams in {n1.Receives.Calls:N0} receive calls), forwarded {s1.Counters["DataForwarded"]:N0}, PeerSendFailed {s1.Counters["PeerSendFailed"]:N0}, dropped at its inbox {n1.Dropped:N0}; g2: received {s2.Counters["DataReceived"]:N0}, delivered {s2.Counters["DataDelivered"]:N0} ({n2.Sends.Sent:N0} datagrams in {n2.Sends.Calls:N0} send calls, {n2.Sends.Failed:N0} refused)"
                        + (secret is null ? "" : $"; sealed link: g2 rejected {g2.PeeringFramesRejected:N0} frames and {g2.DatagramsUnauthenticated:N0} datagrams"));
                }
            }

            return 0;
        });
        return command;
    }

    internal sealed record RunResult(int Sent, int Received, double Seconds, double Rate);

    /// <summary>One cross-island run (island 1 → g1 → TCP → g2 → island 2) on a fresh gateway pair: what
    /// <c>qs nats-bench</c> sets beside NATS.</summary>
    internal static async Task<RunResult> CrossIslandAsync(int size, int count, int ports, CancellationToken cancellationToken)
    {
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.84.0"), PortBase = ports, PoolSize = 4 });
        using var n2 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.85.0"), PortBase = ports + 4, PoolSize = 4 });
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(10), cancellationToken: cancellationToken);
        await using (g1)
        await using (g2)
        {
            var native = new IPEndPoint(IPAddress.Parse("239.255.86.1"), ports + 10);
            var session = SessionName.Parse($"bfed://1/{native.Address}/{native.Port}");
            var answer = new TaskCompletionSource<QuickSilver.Federation.NativeNet.MediatorReply>();
            g2.Post(() => g2.Gateway.RecvdJoinRequest(new QuickSilver.Federation.NativeNet.JoinRequest(session, r => answer.TrySetResult(r))));
            var translation = await answer.Task.WaitAsync(TimeSpan.FromSeconds(10), cancellationToken);
            if (translation.Kind != QuickSilver.Federation.NativeNet.MediatorReplyKind.Translation)
            {
                throw new InvalidOperationException($"join failed: {translation.Kind} {translation.Reason}");
            }

            for (int i = 0; i < 100 && (await g1.SnapshotAsync()).Sessions.Count == 0; i++)
            {
                await Task.Delay(50, cancellationToken);
            }

            return Run(native, IPEndPoint.Parse(translation.Addresses[0]), size, count, 0);
        }
    }

    private static RunResult Run(IPEndPoint sendTo, IPEndPoint receiveOn, int size, int count, int rate)
    {
        using var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        receiver.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        receiver.ReceiveBufferSize = 8 << 20;
        receiver.Bind(receiveOn);
        receiver.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(receiveOn.Address, IPAddress.Loopback));
        receiver.ReceiveTimeout = 1000;
        var seen = new bool[count];
        int received = 0;
        long first = 0, last = 0;
        var thread = new Thread(() =>
        {
            var buffer = new byte[65_536];
            while (received < count)
            {
                int n;
                try
                {
                    n = receiver.Receive(buffer);
                }
                catch (SocketException)
                {
                    return; // a second of silence: the run is over
                }

                if (n != size)
                {
                    continue;
                }

                int i = BinaryPrimitives.ReadInt32LittleEndian(buffer);
                if (i >= 0 && i < count && !seen[i])
                {
                    seen[i] = true;
                    last = Stopwatch.GetTimestamp();
                    if (received++ == 0)
                    {
                        first = last;
                    }
                }
            }
        }) { IsBackground = true };
        thread.Start();
        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
        sender.SendBufferSize = 8 << 20;
        var packet = new byte[size];
        var clock = Stopwatch.StartNew();
        for (int i = 0; i < count; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(packet, i);
            sender.SendTo(packet, sendTo);
            if (rate > 0)
            {
                var due = TimeSpan.FromSeconds((double)(i + 1) / rate);
                while (clock.Elapsed < due)
                {
                    Thread.SpinWait(50);
                }
            }
        }

        thread.Join(TimeSpan.FromSeconds(30));
        double seconds = received > 1 ? Stopwatch.GetElapsedTime(first, last).TotalSeconds : 0;
        return new RunResult(count, received, seconds, seconds > 0 ? (received - 1) / seconds : 0);
    }
}
