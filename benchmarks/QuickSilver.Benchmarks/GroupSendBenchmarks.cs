using BenchmarkDotNet.Attributes;

namespace QuickSilver.Benchmarks;

/// <summary>
/// The sender's core-thread cost per message with one group against many mapped to the same region (issue 11, "Groups
/// 1 → 1,024 ≥ 0.95 of the one-group rate"): <see cref="StackPathBenchmarks"/>'s <c>Send</c> harness (the real group
/// layer's region feed, the region sender, the window ring, ACKs when it fills) with <see cref="Groups"/> groups, each
/// with its application's pull feed. The feed serves the groups round robin, a packet's worth from each in turn, so with
/// 1,024 groups a group's objects (its state, outbox, feed) are touched once per 1,024 packets: 16 MB of packets later,
/// long out of the cache. The difference between the two rows is what the data path pays per group.
/// <c>Mean</c> is per message (OperationsPerInvoke); <c>Allocated</c> should be 0 B.
/// </summary>
[MemoryDiagnoser]
public class GroupSendBenchmarks
{
    private StackPathBenchmarks.SendHarness? _send;

    /// <summary>Groups mapped to the sender's one region, every one with messages to send.</summary>
    [Params(1, 1024)]
    public int Groups { get; set; }

    /// <summary>Bytes of application payload per group message.</summary>
    [Params(1000)]
    public int MessageBytes { get; set; }

    [GlobalSetup]
    public void Setup() => _send = StackPathBenchmarks.SendHarness.WithGroupLayer(MessageBytes, 16_384, Groups);

    [GlobalCleanup]
    public void Cleanup() => _send?.Check();

    [Benchmark(OperationsPerInvoke = StackPathBenchmarks.MessagesPerInvoke)]
    public long Send() => _send!.Run(StackPathBenchmarks.MessagesPerInvoke);

    /// <summary>The <c>groupsend</c> command: the same harness for <c>--messages</c> messages (default 20,000,000) in
    /// <c>--groups</c> groups (default 1) of <c>--size</c>-byte messages (default 1,000), then the time per message.
    /// A fixed amount of work in one process, so a profile's samples divide by the message count.</summary>
    public static int RunFixed(string[] args)
    {
        int groups = 1;
        int size = 1000;
        long messages = 20_000_000;
        for (int i = 0; i < args.Length; i += 2)
        {
            string option = args[i];
            if (i + 1 >= args.Length || !long.TryParse(args[i + 1], System.Globalization.CultureInfo.InvariantCulture, out long value) || value < 1)
            {
                Console.Error.WriteLine($"groupsend: {option} needs a whole number of at least 1.");
                return 2;
            }

            switch (option)
            {
                case "--groups" when value <= 100_000: groups = (int)value; break;
                case "--size" when value <= 16_000: size = (int)value; break; // one message to a 16 KiB datagram at most
                case "--messages": messages = value; break;
                default:
                    Console.Error.WriteLine($"groupsend: {option} {value}: unknown option or out of range (--groups up to 100,000, --size up to 16,000, --messages).");
                    return 2;
            }
        }

        var send = StackPathBenchmarks.SendHarness.WithGroupLayer(size, 16_384, groups);
        var clock = System.Diagnostics.Stopwatch.StartNew();
        for (long done = 0; done < messages; done += StackPathBenchmarks.MessagesPerInvoke)
        {
            send.Run(StackPathBenchmarks.MessagesPerInvoke);
        }

        Console.WriteLine($"groupsend: {groups} groups, {size} B, {messages:N0} messages, {clock.Elapsed.TotalNanoseconds / messages:F1} ns/message");
        send.Check();
        return 0;
    }
}
