using QuickSilver.Core.Io;

namespace QuickSilver.Compare;

/// <summary>
/// A QuickSilver receiver process: joins groups cmp/0..G-1, prints READY, then PROBED once a probe (first byte 1)
/// arrived in every group, counts data messages (first byte 0) over all groups, prints its RESULT line once it has
/// them all (or time ran out), and stays a member until its stdin closes, so repairs keep flowing to slower peers.
/// </summary>
internal static class QsReceiverRole
{
    public const byte Data = 0;
    public const byte Probe = 1;

    public static string GroupName(int index) => $"cmp/{index}";

    public static async Task<int> RunAsync(RoleArgs a)
    {
        int groups = a.Int("groups", 1);
        long messages = a.Long("messages", 1000);
        using var deadline = new CancellationTokenSource(TimeSpan.FromSeconds(a.Int("timeout", 30)));
        await using var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions
        {
            Gms = NetAddress.Loopback((ushort)a.Int("gms", 47001)),
            InjectedLossRate = a.Double("loss", 0),
        }, deadline.Token);
        var joined = await Task.WhenAll(Enumerable.Range(0, groups).Select(g => node.JoinGroupAsync(GroupName(g), deadline.Token)));
        long received = 0, first = 0, last = 0;
        int probed = 0;
        var seen = new bool[groups];
        for (int g = 0; g < groups; g++)
        {
            int index = g;
            joined[g].QueueMessages = false;
            joined[g].OnMessage = m => // on the node's core thread
            {
                if (m.Payload.Length > 0 && m.Payload[0] == Probe)
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
                if (Interlocked.Increment(ref received) == 1)
                {
                    Volatile.Write(ref first, now);
                }

                Volatile.Write(ref last, now);
            };
        }

        Console.WriteLine("READY");
        while (Interlocked.Read(ref received) < messages && !deadline.IsCancellationRequested)
        {
            await Task.Delay(5, CancellationToken.None);
        }

        Console.WriteLine(ResultLine.Format("receiver", ("received", Interlocked.Read(ref received)), ("expected", messages),
            ("first_us", Volatile.Read(ref first)), ("last_us", Volatile.Read(ref last))));
        await Console.In.ReadToEndAsync(CancellationToken.None).WaitAsync(TimeSpan.FromSeconds(30)).ContinueWith(_ => { }, TaskScheduler.Default);
        return 0;
    }
}
