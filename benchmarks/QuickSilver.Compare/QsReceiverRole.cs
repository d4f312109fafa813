using QuickSilver.Core.Io;
using QuickSilver.Core.Security;

namespace QuickSilver.Compare;

/// <summary>
/// A QuickSilver receiver process: joins groups cmp/0..G-1, prints READY, then PROBED once a probe arrived in every
/// group, counts warm-up and measured messages over all groups (the first byte is the <see cref="MessageKind"/>) with
/// their arrival times (the runner times from the sender's first measured send to the last arrival), prints its RESULT
/// line once it has them all (or time ran out),
/// and stays a member until its stdin closes, so repairs keep flowing to slower peers.
/// </summary>
internal static class QsReceiverRole
{
    public static string GroupName(int index) => $"cmp/{index}";

    public static async Task<int> RunAsync(RoleArgs a)
    {
        int groups = a.Int("groups", 1);
        long messages = a.Long("messages", 1000);
        long total = messages + a.Long("warmup", 0);
        using var deadline = new CancellationTokenSource(TimeSpan.FromSeconds(a.Int("timeout", 30)));
        await using var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions
        {
            Gms = NetAddress.Loopback((ushort)a.Int("gms", 47001)),
            InjectedLossRate = a.Double("loss", 0),
            Security = Enum.Parse<DatagramSecurity>(a.String("security", nameof(DatagramSecurity.Off))) is var mode && mode != DatagramSecurity.Off
                ? new DatagramSecurityOptions
                {
                    Mode = mode,
                    ClusterSecret = Convert.FromBase64String(a.String("secret", "")),
                    Cipher = Enum.Parse<DatagramCipherSuite>(a.String("cipher", nameof(DatagramCipherSuite.Aegis128L))),
                }
                : new DatagramSecurityOptions(),
        }, deadline.Token);
        var joined = await Task.WhenAll(Enumerable.Range(0, groups).Select(g => node.JoinGroupAsync(GroupName(g), deadline.Token)));
        var count = new ArrivalCounter();
        string timelinePath = a.String("timeline", "");
        var timeline = timelinePath.Length > 0 ? new ArrivalTimeline() : null;
        int probed = 0;
        var seen = new bool[groups];
        long cpuAtFirstMeasured = -1; // µs of process CPU when the first measured message arrived (core thread)
        long previous = 0, longestGap = 0, longestGapAt = 0; // diagnostics (QS_COMPARE_DESCRIBE): the longest pause between arrivals
        for (int g = 0; g < groups; g++)
        {
            int index = g;
            joined[g].QueueMessages = false;
            joined[g].OnMessage = (_, _, payload) => // on the node's core thread
            {
                byte kind = payload.Length > 0 ? payload[0] : MessageKind.Data;
                if (kind == MessageKind.Probe)
                {
                    if (!seen[index])
                    {
                        seen[index] = true;
                        if (++probed == groups)
                        {
                            Console.WriteLine("PROBED");
                        }
                    }

                    return;
                }

                long now = ResultLine.NowMicros();
                if (kind == MessageKind.Data && cpuAtFirstMeasured < 0)
                {
                    cpuAtFirstMeasured = ProcessCpu.Micros();
                }

                long n = count.Arrived(kind == MessageKind.Data, now);
                timeline?.Arrived(now);
                if (previous != 0 && now - previous > longestGap)
                {
                    (longestGap, longestGapAt) = (now - previous, n);
                }

                previous = now;
            };
        }

        Console.WriteLine("READY");
        while (count.Received < total && !deadline.IsCancellationRequested)
        {
            await Task.Delay(5, CancellationToken.None);
        }

        if (count.Received < total || Environment.GetEnvironmentVariable("QS_COMPARE_DESCRIBE") == "1")
        {
            Console.Error.WriteLine($"qs-recv has {count.Received} of {total}; longest pause {longestGap} µs before message {longestGapAt}: {await node.DescribeAsync()}");
        }

        if (timeline is not null)
        {
            await File.WriteAllTextAsync(timelinePath, timeline.Format(), CancellationToken.None);
        }

        long cpu = Volatile.Read(ref cpuAtFirstMeasured) is var first && first >= 0 ? ProcessCpu.Micros() - first : 0;
        Console.WriteLine(count.ResultLine(total, ("cpu_us", cpu), ("working_set_mb", Environment.WorkingSet >> 20)));
        await Console.In.ReadToEndAsync(CancellationToken.None).WaitAsync(TimeSpan.FromSeconds(30)).ContinueWith(_ => { }, TaskScheduler.Default);
        return 0;
    }
}
