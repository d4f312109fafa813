using System.Buffers.Binary;
using System.CommandLine;
using QuickSilver.Aer;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// AER/NCA as separate processes (docs/aer.md): <c>qs repair-server</c>, <c>qs aer-send</c> and <c>qs aer-receive</c>.
/// Each runs one core thread with one UDP endpoint and a stack of one <see cref="AerLayer"/>; the topology (which
/// repair server serves which receivers) is given on the command line (--children).
/// </summary>
internal static class AerVerbs
{
    public static IEnumerable<Command> Create()
    {
        yield return RepairServer();
        yield return Send();
        yield return Receive();
    }

    private sealed record Common(Option<NetAddress> Listen, Option<string> Group, Option<int> Session, Option<int> Seconds, Option<int> LossPercent)
    {
        public static Common Make() => new(
            Cli.Address("--listen", "Unicast address this process binds (its AER address).", loopbackOnly: false),
            MulticastOption(),
            Cli.Int("--session", "AER session number", 1, 1, int.MaxValue),
            Cli.Int("--seconds", "Stop after this many seconds whatever happens", 60, 1, 30 * 86_400),
            Cli.Int("--loss-percent", "Drop this percentage of received datagrams on purpose (tests)", 0, 0, 50));

        public IEnumerable<Option> All => [Listen, Group, Session, Seconds, LossPercent];
    }

    private static Command RepairServer()
    {
        var c = Common.Make();
        c.Listen.Required = true;
        var source = Cli.Address("--source", "The session's source.", loopbackOnly: false);
        source.Required = true;
        var children = ChildrenOption(required: true);
        var command = new Command("repair-server", "Run an AER repair server for the receivers and repair servers given by --children.");
        foreach (var o in c.All.Append(source).Append(children))
        {
            command.Options.Add(o);
        }

        command.SetAction(async (parse, cancellationToken) =>
        {
            using var host = AerHost.Start(parse, c);
            var kids = ParseChildren(parse.GetValue(children)!);
            var server = host.Invoke(() => host.Layer.AddRepairServer(host.Session, host.Group, parse.GetValue(source), kids));
            Console.WriteLine($"repair server {host.Address} for session {host.Session} on {host.Group}, {kids.Count} children");
            await host.RunAsync(parse.GetValue(c.Seconds), () => $"cache {server.Cache.Count} packets / {server.Cache.Bytes} B, {host.Layer.Counters}", () => false, cancellationToken);
            return 0;
        });
        return command;
    }

    private static Command Send()
    {
        var c = Common.Make();
        c.Listen.Required = true;
        var children = ChildrenOption(required: false);
        var messages = Cli.Int("--messages", "Numbered messages to send", 10_000, 1, 100_000_000);
        var size = Cli.Int("--size", "Payload size in bytes; the first 8 carry the message number, the next 8 (from 16 bytes) its send time (monotonic clock, ns)", 1000, 8, 1400);
        var delay = Cli.Int("--start-after-ms", "Wait this long before the first message (let SPMs set up the tree)", 500, 0, 60_000);
        var linger = Cli.Int("--linger", "After the last message, stay this many seconds to answer NAKs", 5, 0, 86_400);
        var command = new Command("aer-send", "Be the source of an AER session: multicast numbered messages under NCA.");
        foreach (var o in c.All.Append(children).Append(messages).Append(size).Append(delay).Append(linger))
        {
            command.Options.Add(o);
        }

        command.SetAction(async (parse, cancellationToken) =>
        {
            using var host = AerHost.Start(parse, c);
            int count = parse.GetValue(messages);
            var feed = new NumberedFeed(count, parse.GetValue(size));
            string? kids = parse.GetValue(children);
            await Task.Delay(parse.GetValue(delay), cancellationToken).ContinueWith(_ => { }, TaskScheduler.Default);
            var sender = host.Invoke(() => host.Layer.AddSender(host.Session, host.Group, feed, kids is null ? null : ParseChildren(kids)));
            Console.WriteLine($"source {host.Address} for session {host.Session} on {host.Group}: {count} messages");
            var doneAt = DateTime.MaxValue;
            var startedAt = DateTime.UtcNow;
            await host.RunAsync(parse.GetValue(c.Seconds), () => host.Invoke(() => $"sent {sender.HighestSent}, nominee {sender.Nominee?.ToString() ?? "none"}, W {sender.Window.W:0.0}, {host.Layer.Counters}"), () =>
            {
                if (doneAt == DateTime.MaxValue && feed.Pulled >= count)
                {
                    doneAt = DateTime.UtcNow;
                }

                return DateTime.UtcNow - doneAt > TimeSpan.FromSeconds(parse.GetValue(linger));
            }, cancellationToken);
            double elapsed = ((doneAt == DateTime.MaxValue ? DateTime.UtcNow : doneAt) - startedAt).TotalSeconds;
            host.Invoke(() =>
            {
                // What the source put on the wire while it had data to send (NCA's rate), then the totals.
                var counters = host.Layer.Counters;
                Console.WriteLine(FormattableString.Invariant(
                    $"sender summary: {sender.HighestSent} data packets in {elapsed:0.00} s = {sender.HighestSent / Math.Max(elapsed, 1e-9):0.0} packets/s, repairs {counters.RepairsSent}, naks received {counters.NaksReceived}, nominee changes {counters.NomineeChanges}"));
                return 0;
            });
            return 0;
        });
        return command;
    }

    private static Command Receive()
    {
        var c = Common.Make();
        c.Listen.Required = true;
        var source = Cli.Address("--source", "The session's source.", loopbackOnly: false);
        source.Required = true;
        var expect = Cli.Int("--expect", "Exit once this many messages arrived; exit 1 unless exactly that many, in order", 0, 0, 100_000_000);
        var json = new Option<bool>("--json") { Description = "At the end, print one JSON line: counts, throughput, per-message one-way delays from the source's send stamps and the repairs' extra delay (docs/aer.md, NORM comparison)" };
        var floorWindow = Cli.Int("--floor-window-ms", "--json: a message's delay floor is the least delay of the messages sent within this many ms of it", 2000, 1, 60_000);
        var margin = Cli.Int("--margin-ms", "--json: a message is late (waited for a repair) when its delay exceeds the floor by more than this", 5, 0, 60_000);
        var command = new Command("aer-receive", "Receive an AER session; print the count once a second.");
        foreach (var o in c.All.Append(source).Append(expect).Append(json).Append(floorWindow).Append(margin))
        {
            command.Options.Add(o);
        }

        command.SetAction(async (parse, cancellationToken) =>
        {
            using var host = AerHost.Start(parse, c);
            long delivered = 0;
            long disorder = 0;
            double latencySum = 0, latencyMax = 0;
            long repaired = 0;
            long bytes = 0;
            int want = parse.GetValue(expect);
            // Bounded: one pair of longs per expected message, at most 10 million (160 MB).
            var delays = parse.GetValue(json) ? new DelayStats(Math.Min(want > 0 ? want : 1_000_000, 10_000_000)) : null;
            host.Invoke(() => host.Layer.AddReceiver(host.Session, host.Group, parse.GetValue(source), (seq, payload) =>
            {
                if (delays is not null && payload.Length >= 16)
                {
                    delays.Add(BinaryPrimitives.ReadInt64LittleEndian(payload[8..]) / 1000, DelayStats.NowUs());
                }

                bytes += payload.Length;
                if (payload.Length < 8 || BinaryPrimitives.ReadInt64LittleEndian(payload) != seq || seq != delivered + 1)
                {
                    Interlocked.Increment(ref disorder);
                }

                Interlocked.Increment(ref delivered);
            })).RepairLatency = t =>
            {
                // Core thread: from this receiver's detection of a loss to the repair's arrival (the seed's Table 2).
                latencySum += t.TotalMilliseconds;
                latencyMax = Math.Max(latencyMax, t.TotalMilliseconds);
                repaired++;
            };
            Console.WriteLine($"receiver {host.Address} for session {host.Session} on {host.Group}");
            await host.RunAsync(parse.GetValue(c.Seconds), () => $"delivered {Interlocked.Read(ref delivered)}, {host.Layer.Counters}",
                () => want > 0 && Interlocked.Read(ref delivered) >= want, cancellationToken);
            host.Invoke(() =>
            {
                Console.WriteLine(FormattableString.Invariant($"repair latency: {repaired} repaired, mean {(repaired == 0 ? 0 : latencySum / repaired):0.00} ms, max {latencyMax:0.00} ms"));
                return 0;
            });
            bool ok = want == 0 || (Interlocked.Read(ref delivered) == want && Interlocked.Read(ref disorder) == 0);
            if (delays is not null)
            {
                host.Invoke(() =>
                {
                    double span = (delays.LastReceiveUs - delays.FirstSendUs) / 1e6;
                    Console.WriteLine(FormattableString.Invariant(
                        $"{{\"tool\":\"qs-aer-receive\",\"expect\":{want},\"delivered\":{delivered},\"in_order\":{(disorder == 0 ? "true" : "false")},\"span_s\":{span:0.000},\"mbytes_per_s\":{(span > 0 ? bytes / span / 1e6 : 0):0.000},\"repaired\":{repaired},\"repair_mean_ms\":{(repaired == 0 ? 0 : latencySum / repaired):0.00},")
                        + delays.JsonMembers(parse.GetValue(floorWindow), parse.GetValue(margin)) + "}");
                    return 0;
                });
            }

            Console.WriteLine(ok ? $"received all {want} in order" : $"FAILED: delivered {delivered} of {want}, {disorder} out of order");
            return ok ? 0 : 1;
        });
        return command;
    }

    /// <summary>A multicast "address:port" option (--group; --aer-group of <c>qs node</c>).</summary>
    internal static Option<string> MulticastOption(string name = "--group")
    {
        var group = new Option<string>(name) { Description = "The session's multicast address:port.", DefaultValueFactory = _ => "239.255.42.1:47100" };
        group.Validators.Add(r =>
        {
            string text = r.GetValueOrDefault<string>() ?? "";
            try
            {
                if (NetAddress.Parse(text) is not { IsMulticast: true, Port: > 0 })
                {
                    r.AddError($"{name} must be an IPv4 multicast address with a port (e.g. 239.255.42.1:47100); got '{text}'.");
                }
            }
            catch (FormatException)
            {
                r.AddError($"{name} must be an IPv4 multicast address with a port (e.g. 239.255.42.1:47100); got '{text}'.");
            }
        });
        return group;
    }

    /// <summary>A comma-separated list of unicast addresses (--children; --aer-children of <c>qs node</c>).</summary>
    internal static Option<string> ChildrenOption(bool required, string name = "--children")
    {
        var children = new Option<string>(name) { Description = "Comma-separated unicast addresses this node subcasts to (receivers and lower repair servers).", Required = required };
        children.Validators.Add(r =>
        {
            try
            {
                if (r.GetValueOrDefault<string>() is { } text)
                {
                    _ = ParseChildren(text);
                }
            }
            catch (FormatException e)
            {
                r.AddError($"{name}: {e.Message}");
            }
        });
        return children;
    }

    internal static List<NetAddress> ParseChildren(string text)
    {
        var list = new List<NetAddress>();
        foreach (var part in text.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
        {
            var address = NetAddress.Parse(part);
            if (address.IsMulticast || address.Port == 0)
            {
                throw new FormatException($"'{part}' is not a unicast address with a port.");
            }

            list.Add(address);
        }

        return list.Count > 0 ? list : throw new FormatException("no address given.");
    }

    /// <summary>A core, an endpoint and an AER stack, disposed together.</summary>
    private sealed class AerHost : IDisposable
    {
        private readonly QuickSilverCore _core;
        private readonly ProtocolStack _stack;

        private AerHost(QuickSilverCore core, ProtocolStack stack, AerLayer layer, uint session, NetAddress group)
        {
            _core = core;
            _stack = stack;
            Layer = layer;
            Session = session;
            Group = group;
        }

        public AerLayer Layer { get; }

        public uint Session { get; }

        public NetAddress Group { get; }

        public NetAddress Address => _stack.Transport.LocalAddress;

        public static AerHost Start(ParseResult parse, Common c)
        {
            var core = QuickSilverCore.Start(new CoreOptions { Name = "aer" });
            var listen = parse.GetValue(c.Listen);
            var endpoint = core.OpenUdp(new UdpEndpointOptions
            {
                Bind = listen,
                MulticastInterface = new NetAddress(listen.Ip, 0),
                InjectedLossRate = parse.GetValue(c.LossPercent) / 100.0,
                InjectedLossSeed = listen.Port,
            });
            var layer = new AerLayer(new AerOptions());
            ProtocolStack? stack = null;
            core.Invoke(() => stack = new StackBuilder(endpoint, core).Add(layer).Build());
            return new AerHost(core, stack!, layer, (uint)parse.GetValue(c.Session), NetAddress.Parse(parse.GetValue(c.Group)!));
        }

        public T Invoke<T>(Func<T> func)
        {
            T result = default!;
            _core.Invoke(() => result = func());
            return result;
        }

        /// <summary>Prints <paramref name="status"/> once a second until <paramref name="done"/>, the time limit or Ctrl+C.</summary>
        public async Task RunAsync(int seconds, Func<string> status, Func<bool> done, CancellationToken cancellationToken)
        {
            var end = DateTime.UtcNow + TimeSpan.FromSeconds(seconds);
            var nextPrint = DateTime.UtcNow;
            while (!cancellationToken.IsCancellationRequested && DateTime.UtcNow < end && !done())
            {
                if (DateTime.UtcNow >= nextPrint)
                {
                    Console.WriteLine(Invoke(status));
                    nextPrint = DateTime.UtcNow + TimeSpan.FromSeconds(1);
                }

                await Task.Delay(50, cancellationToken).ContinueWith(_ => { }, TaskScheduler.Default);
            }

            Console.WriteLine(Invoke(status));
        }

        public void Dispose()
        {
            _core.Invoke(_stack.Stop);
            _core.Dispose();
        }
    }

    /// <summary>Numbered payloads (the number in the first 8 bytes), read by the core thread.</summary>
    private sealed class NumberedFeed(int count, int size) : IAerFeed
    {
        private long _pulled;

        public long Pulled => Interlocked.Read(ref _pulled);

        public int Pull(Span<byte> buffer)
        {
            if (_pulled >= count)
            {
                return 0;
            }

            long n = Interlocked.Increment(ref _pulled);
            BinaryPrimitives.WriteInt64LittleEndian(buffer, n);
            int filled = 8;
            if (size >= 16)
            {
                // Stamped as the window releases it: the core writes it to the socket right after this pull.
                BinaryPrimitives.WriteInt64LittleEndian(buffer[8..], DelayStats.NowNs());
                filled = 16;
            }

            buffer[filled..size].Fill((byte)n);
            return size;
        }
    }
}
