using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Region;

namespace QuickSilver.Benchmarks;

/// <summary>
/// End-to-end cost per message over real loopback sockets (issue 10, "Show"): two <see cref="QuickSilverNode"/>s in
/// this process, one running the embedded GMS and publishing, the other receiving through the group's core-thread
/// callback (<see cref="QuickSilverGroup.QueueMessages"/> off on both). After a warm-up (not counted) of at least N/10
/// messages and at least 20 s of publishing (so rate control has ramped up and the sender's window ring and the receive
/// stores have reached their steady state, see <see cref="Run"/>), it publishes N messages with
/// <see cref="QuickSilverGroup.TryPublish"/> from one thread and prints one line: wall time from the first measured
/// publish to the receiver's last delivery, messages per second, bytes allocated per message
/// (<see cref="GC.GetTotalAllocatedBytes"/>, every thread) and process CPU time per message
/// (<see cref="Process.TotalProcessorTime"/>). Both nodes live in this process, so allocation and CPU cover the sender
/// and the receiver together (their core threads, the publishing thread, the GC and the JIT).
/// <para>Public API only, so the same file also builds against the code before Stack v2 (commit 8029bfc);
/// <see cref="Subscribe"/> is the one place the two APIs differ. benchmarks/pathcost-before-after.sh builds both and
/// runs them in turn.</para>
/// </summary>
public static class PathCost
{
    private const byte DataMarker = 1;
    private const byte ProbeMarker = 0xFF;

    private const string Usage =
        "usage: pathcost [--size BYTES (100)] [--messages N (300000)] [--warmup N (N/10)] [--warmup-seconds S (20)] " +
        "[--timeout SECONDS (120, the whole run)] [--token-interval-ms MS (the library's default)] [--alloc-sample] [--describe]";

    public static async Task<int> RunAsync(string[] args)
    {
        ArgumentNullException.ThrowIfNull(args);
        int size = 100;
        long messages = 300_000;
        long? warmup = null;
        double warmupSeconds = 20;
        int timeoutSeconds = 120;
        bool sampleAllocations = false;
        bool describe = false;
        int? tokenIntervalMs = null;
        for (int i = 0; i < args.Length; i++)
        {
            string value = i + 1 < args.Length ? args[i + 1] : "";
            try
            {
                switch (args[i])
                {
                    case "--size":
                        size = int.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    case "--messages":
                        messages = long.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    case "--warmup":
                        warmup = long.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    case "--warmup-seconds":
                        warmupSeconds = double.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    case "--token-interval-ms":
                        tokenIntervalMs = int.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    case "--describe":
                        describe = true;
                        break;
                    case "--alloc-sample":
                        sampleAllocations = true;
                        break;
                    case "--timeout":
                        timeoutSeconds = int.Parse(value, CultureInfo.InvariantCulture);
                        i++;
                        break;
                    default:
                        await Console.Error.WriteLineAsync(Usage).ConfigureAwait(false);
                        return 2;
                }
            }
            catch (Exception e) when (e is FormatException or OverflowException)
            {
                await Console.Error.WriteLineAsync($"pathcost: {args[i]} {value}: {e.Message}\n{Usage}").ConfigureAwait(false);
                return 2;
            }
        }

        if (size < 1 || messages < 1 || timeoutSeconds < 1 || warmup < 0 || warmupSeconds < 0 || tokenIntervalMs < 1)
        {
            await Console.Error.WriteLineAsync("pathcost: --size, --messages and --timeout must be positive, the warm-up not negative").ConfigureAwait(false);
            return 2;
        }

        var run = new Run(size, messages, warmup ?? Math.Max(1, messages / 10), TimeSpan.FromSeconds(warmupSeconds), TimeSpan.FromSeconds(timeoutSeconds))
        {
            SampleAllocations = sampleAllocations,
            Describe = describe,
            Region = tokenIntervalMs is { } ms ? new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(ms) } : new RegionOptions(),
        };
        int status = await run.ExecuteAsync().ConfigureAwait(false);
        return status;
    }

    /// <summary>
    /// The one place the APIs before and after Stack v2 differ: <see cref="QuickSilverGroup.OnMessage"/> is an
    /// <c>Action&lt;GroupMessage&gt;</c> before (a copy and an object per message) and a span delegate
    /// <c>(sender, sequence, payload)</c> after. The delegate is made once for whichever type the property has, so
    /// this file compiles unchanged against both; each message then costs one ordinary delegate call.
    /// </summary>
    private static void Subscribe(QuickSilverGroup group, Deliveries deliveries)
    {
        var property = typeof(QuickSilverGroup).GetProperty(nameof(QuickSilverGroup.OnMessage))
                       ?? throw new InvalidOperationException("QuickSilverGroup.OnMessage not found");
        var handlerType = property.PropertyType;
        int parameters = handlerType.GetMethod("Invoke")!.GetParameters().Length;
        string method = parameters == 1 ? nameof(Deliveries.OnGroupMessage) : nameof(Deliveries.OnSpan);
        property.SetValue(group, Delegate.CreateDelegate(handlerType, deliveries, method));
    }

    private sealed class Run(int size, long messages, long warmup, TimeSpan warmupTime, TimeSpan timeout)
    {
        private readonly Stopwatch _clock = Stopwatch.StartNew();

        /// <summary>Also print what the measured run allocated, by type, from the runtime's allocation sampling (one
        /// event per ~100 KB allocated; a diagnosis aid: it costs a little, so leave it off when measuring).</summary>
        public bool SampleAllocations { get; init; }

        /// <summary>Also print both nodes' protocol state (<see cref="QuickSilverNode.DescribeAsync"/>) before and after
        /// the measured run (diagnosis).</summary>
        public bool Describe { get; init; }

        /// <summary>Both nodes' region options. The default token interval (1 s) with the default sender window (4,096
        /// packets) bounds a sender to about one window a second on loopback (its ACKs come once a round), the same
        /// bound before and after; a shorter interval lifts it, so the run is bound by CPU instead.</summary>
        public RegionOptions Region { get; init; } = new();

        public async Task<int> ExecuteAsync()
        {
            var gms = NetAddress.Loopback(FreeUdpPort());
            QuickSilverNode? publisher = null;
            QuickSilverNode? receiver = null;
            var deliveries = new Deliveries();
            try
            {
                using var cts = new CancellationTokenSource(timeout);
                publisher = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { EmbeddedGms = true, Gms = gms, Region = Region }, cts.Token).ConfigureAwait(false);
                receiver = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions { Gms = gms, Region = Region }, cts.Token).ConfigureAwait(false);
                var published = await publisher.JoinGroupAsync("pathcost", cts.Token).ConfigureAwait(false);
                published.QueueMessages = false;
                var received = await receiver.JoinGroupAsync("pathcost", cts.Token).ConfigureAwait(false);
                received.QueueMessages = false;
                Subscribe(received, deliveries);

                // The receiver is in the group's view once a probe reaches it (every later message then reaches it too).
                var probe = new byte[size];
                probe[0] = ProbeMarker;
                while (deliveries.Probes == 0)
                {
                    Expire("waiting for the receiver to join the group's view", deliveries);
                    published.TryPublish(probe);
                    await Task.Delay(20, cts.Token).ConfigureAwait(false);
                }

                var message = new byte[size];
                message[0] = DataMarker;

                // Warm-up, not counted, in two parts with a pause after each. The first publishes at least half the
                // warm-up messages and goes on until the warm-up time has passed. A sender starts at rate control's
                // minimum rate and ramps up over many seconds (until one sender window per token round, or the CPU,
                // becomes the bound); while it ramps, more packets are in flight each round, so the
                // window ring (a buffer per slot, 4,096 slots, filled as the window first fills) and the receive stores
                // (buffers recycled once token rounds purge) keep growing: a run measured then sees
                // that growth, not the steady state. The pauses let the JIT's tiering promote the hot methods, and the
                // second part runs (and compiles) them.
                long first = warmup / 2;
                deliveries.Expect(long.MaxValue);
                var started = Stopwatch.StartNew();
                long warmed = Publish(published, message, first, deliveries, out _);
                while (started.Elapsed < warmupTime)
                {
                    warmed += Publish(published, message, Math.Max(1, Math.Min(first, 10_000)), deliveries, out _);
                }

                deliveries.Expect(warmed);
                Await(deliveries, "warm-up");
                Thread.Sleep(250);
                deliveries.Expect(warmed + (warmup - first));
                warmed += Publish(published, message, warmup - first, deliveries, out _);
                Await(deliveries, "warm-up");
                Thread.Sleep(250);

                long before = deliveries.Data;
                if (before != warmed)
                {
                    throw new InvalidOperationException($"{before} warm-up messages delivered, {warmed} published");
                }

                if (Describe)
                {
                    await DescribeAsync("before", publisher, receiver).ConfigureAwait(false);
                }

                using var sampler = SampleAllocations ? new AllocationSampler() : null;
                GC.Collect();
                GC.WaitForPendingFinalizers();
                GC.Collect();
                using var process = Process.GetCurrentProcess();
                int[] collections = [GC.CollectionCount(0), GC.CollectionCount(1), GC.CollectionCount(2)];
                process.Refresh();
                var cpu0 = process.TotalProcessorTime;
                long allocated0 = GC.GetTotalAllocatedBytes(precise: true);
                deliveries.Expect(warmed + messages);
                sampler?.Reset();
                long start = Stopwatch.GetTimestamp();

                Publish(published, message, messages, deliveries, out long waits);
                Await(deliveries, "measured run");
                sampler?.Report(messages);

                long allocated1 = GC.GetTotalAllocatedBytes(precise: true);
                process.Refresh();
                var cpu1 = process.TotalProcessorTime;
                double seconds = Stopwatch.GetElapsedTime(start, deliveries.LastTimestamp).TotalSeconds;
                string line = string.Create(
                    CultureInfo.InvariantCulture,
                    $"pathcost size={size} messages={messages} warmup_messages={warmed} seconds={seconds:F4} msgs_per_s={messages / seconds:F0} " +
                    $"alloc_bytes_per_msg={(double)(allocated1 - allocated0) / messages:F2} cpu_us_per_msg={(cpu1 - cpu0).TotalMicroseconds / messages:F3} " +
                    $"gc={GC.CollectionCount(0) - collections[0]}/{GC.CollectionCount(1) - collections[1]}/{GC.CollectionCount(2) - collections[2]} " +
                    $"publisher_waits={waits} token_interval_ms={Region.TokenInterval.TotalMilliseconds:F0} scope=sender+receiver(both-nodes-in-one-process)");
                Console.WriteLine(line);
                if (Describe)
                {
                    await DescribeAsync("after", publisher, receiver).ConfigureAwait(false);
                }

                return 0;
            }
            catch (Exception e) when (e is TimeoutException or OperationCanceledException or InvalidOperationException or ArgumentException)
            {
                await Console.Error.WriteLineAsync(
                    $"pathcost FAILED after {_clock.Elapsed.TotalSeconds:F1} s: {e.Message} (delivered {deliveries.Data} data messages, {deliveries.Probes} probes)").ConfigureAwait(false);
                return 1;
            }
            finally
            {
                await StopAsync(receiver).ConfigureAwait(false);
                await StopAsync(publisher).ConfigureAwait(false);
            }
        }

        /// <summary>Publishes <paramref name="count"/> copies of <paramref name="message"/>; while the publish buffer is
        /// full it yields once, then sleeps 1 ms at a time (the buffer holds far more than a millisecond of messages, so
        /// this costs no throughput and little CPU). Returns <paramref name="count"/>; <paramref name="waits"/> is how
        /// many times it had to wait.</summary>
        private long Publish(QuickSilverGroup group, byte[] message, long count, Deliveries deliveries, out long waits)
        {
            waits = 0;
            for (long i = 0; i < count; i++)
            {
                bool yielded = false;
                while (!group.TryPublish(message))
                {
                    waits++;
                    if (!yielded)
                    {
                        Thread.Yield();
                        yielded = true;
                    }
                    else
                    {
                        Expire($"publishing (message {i} of {count})", deliveries);
                        Thread.Sleep(1);
                    }
                }
            }

            return count;
        }

        /// <summary>Waits for the total last given to <see cref="Deliveries.Expect"/>.</summary>
        private void Await(Deliveries deliveries, string phase)
        {
            while (!deliveries.Reached.Wait(TimeSpan.FromMilliseconds(100)))
            {
                Expire($"{phase}: waiting for {deliveries.Target} deliveries", deliveries);
            }
        }

        private void Expire(string what, Deliveries deliveries)
        {
            if (_clock.Elapsed > timeout)
            {
                throw new TimeoutException($"the {timeout.TotalSeconds:F0} s limit passed while {what}; delivered {deliveries.Data}");
            }
        }

        private static async Task DescribeAsync(string when, QuickSilverNode publisher, QuickSilverNode receiver)
        {
            Console.WriteLine($"# {when} the measured run, publisher: {await publisher.DescribeAsync().ConfigureAwait(false)}");
            Console.WriteLine($"# {when} the measured run, receiver: {await receiver.DescribeAsync().ConfigureAwait(false)}");
        }

        private static async Task StopAsync(QuickSilverNode? node)
        {
            if (node is null)
            {
                return;
            }

            try
            {
                await node.DisposeAsync().AsTask().WaitAsync(TimeSpan.FromSeconds(10)).ConfigureAwait(false);
            }
            catch (TimeoutException)
            {
                await Console.Error.WriteLineAsync("pathcost: a node did not stop within 10 s").ConfigureAwait(false);
            }
        }

        private static ushort FreeUdpPort()
        {
            using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            return (ushort)((IPEndPoint)socket.LocalEndPoint!).Port;
        }
    }

    /// <summary>Counts the receiver's deliveries on its core thread; data and probe messages differ in their first byte.</summary>
    private sealed class Deliveries
    {
        private long _data;
        private long _probes;
        private long _target = long.MaxValue;

        public ManualResetEventSlim Reached { get; } = new(false);

        /// <summary>When the delivery that reached the target was counted (<see cref="Stopwatch.GetTimestamp"/>).</summary>
        public long LastTimestamp { get; private set; }

        public long Data => Volatile.Read(ref _data);

        public long Probes => Volatile.Read(ref _probes);

        public long Target => Volatile.Read(ref _target);

        /// <summary>Signals <see cref="Reached"/> when <paramref name="total"/> data messages have been delivered.</summary>
        public void Expect(long total)
        {
            Reached.Reset();
            Volatile.Write(ref _target, total);
            if (Data >= total)
            {
                LastTimestamp = Stopwatch.GetTimestamp();
                Reached.Set();
            }
        }

        /// <summary>The callback's type before Stack v2.</summary>
        public void OnGroupMessage(GroupMessage message) => Count(message.Payload);

        /// <summary>The callback's type from Stack v2 on.</summary>
        public void OnSpan(uint sender, ulong sequence, ReadOnlySpan<byte> payload) => Count(payload);

        private void Count(ReadOnlySpan<byte> payload)
        {
            if (payload[0] == ProbeMarker)
            {
                Volatile.Write(ref _probes, _probes + 1);
                return;
            }

            long data = _data + 1;
            Volatile.Write(ref _data, data);
            if (data == Volatile.Read(ref _target))
            {
                LastTimestamp = Stopwatch.GetTimestamp();
                Reached.Set();
            }
        }
    }

    /// <summary>The runtime's allocation-tick events (about one per 100 KB allocated, naming the type of the object
    /// that crossed the mark), summed by type: where the bytes of <c>alloc_bytes_per_msg</c> come from.</summary>
    private sealed class AllocationSampler : EventListener
    {
        private const EventKeywords GcKeyword = (EventKeywords)0x1;
        private readonly ConcurrentDictionary<string, long> _bytes = new(StringComparer.Ordinal);

        protected override void OnEventSourceCreated(EventSource eventSource)
        {
            if (eventSource.Name == "Microsoft-Windows-DotNETRuntime")
            {
                EnableEvents(eventSource, EventLevel.Verbose, GcKeyword);
            }
        }

        protected override void OnEventWritten(EventWrittenEventArgs eventData)
        {
            if (eventData.EventName?.StartsWith("GCAllocationTick", StringComparison.Ordinal) != true || eventData.PayloadNames is null)
            {
                return;
            }

            int type = eventData.PayloadNames.IndexOf("TypeName");
            int amount = eventData.PayloadNames.IndexOf("AllocationAmount64");
            int size = eventData.PayloadNames.IndexOf("ObjectSize");
            if (type >= 0 && amount >= 0 && eventData.Payload is { } payload)
            {
                string name = payload[type] as string ?? "?";
                if (size >= 0)
                {
                    name += string.Create(CultureInfo.InvariantCulture, $" (the sampled object: {payload[size]} B)");
                }

                _bytes.AddOrUpdate(name, Convert.ToInt64(payload[amount], CultureInfo.InvariantCulture),
                    (_, total) => total + Convert.ToInt64(payload[amount], CultureInfo.InvariantCulture));
            }
        }

        /// <summary>Forgets what was sampled so far (the listener's own start-up, the collections before the run).</summary>
        public void Reset() => _bytes.Clear();

        public void Report(long messages)
        {
            foreach (var (name, bytes) in _bytes.OrderByDescending(p => p.Value).Take(12))
            {
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"# alloc-sample {bytes / (double)messages,10:F2} B/msg  {name}"));
            }
        }
    }
}
