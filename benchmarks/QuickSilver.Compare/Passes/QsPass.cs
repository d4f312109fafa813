using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using System.Globalization;
using QuickSilver.Core.Feeds;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.RateControl;

namespace QuickSilver.Compare.Passes;

/// <summary>
/// QuickSilver: the sender and an embedded GMS in this process, each receiver a child process (hidden role qs-recv,
/// with the point's injected loss). Once every receiver is in every group (probes seen), the sender registers one pull
/// feed per group, each with the group's round-robin share of all messages, and the node pulls them as fast as its
/// regions take them; the first W pulled over all feeds are the warm-up (<see cref="SendSchedule"/>).
/// </summary>
internal static class QsPass
{
    public static async Task<PassResult> RunAsync(PassContext context)
    {
        var p = context.Point;
        string system = Systems.QuickSilverWith(context.QsSecurity);
        var security = context.QsSecurity == DatagramSecurity.Off
            ? new DatagramSecurityOptions()
            : new DatagramSecurityOptions { Mode = context.QsSecurity, ClusterSecret = DatagramSecurityOptions.GenerateSecret(), Cipher = context.QsCipher };
        var (port, tag) = PassContext.FreshAddress();
        using var deadline = new CancellationTokenSource(context.Grace);
        await using var node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions
        {
            Gms = NetAddress.Loopback((ushort)port),
            EmbeddedGms = true,
            RateControl = context.QsMinRate is { } rate ? new RateControlOptions { MinRate = rate } : new RateControlOptions(),
            Security = security,
            GmsServer = new GmsOptions
            {
                BatchInterval = TimeSpan.FromMilliseconds(20),
                MulticastPoolStart = new NetAddress(0xEFFD0000u | ((uint)tag << 8), (ushort)(port + 1)),
            },
        }, deadline.Token);
        var groups = await Task.WhenAll(Enumerable.Range(0, p.Groups).Select(g => node.JoinGroupAsync(QsReceiverRole.GroupName(g), deadline.Token)));
        foreach (var g in groups)
        {
            g.QueueMessages = false;
        }

        var args = RoleArgs.Make(("gms", port), ("groups", p.Groups), ("messages", p.Messages), ("warmup", p.Warmup), ("loss", p.Loss),
            ("timeout", (int)context.Timeout.TotalSeconds), ("security", security.Mode), ("cipher", security.Cipher),
            ("secret", security.ClusterSecret is { } secret ? Convert.ToBase64String(secret) : "")); // a fresh secret per pass, on loopback
        var children = Enumerable.Range(0, p.Receivers)
            .Select(i => ChildProcess.StartSelf(Roles.QsReceive, context.TimelineFolder is { } folder
                ? [.. args, .. RoleArgs.Make(("timeline", Path.Combine(folder, $"receiver-{i}.timeline")))]
                : args))
            .ToList();
        var feeds = new List<IFeedChannel>();
        try
        {
            if (!await context.AllSayAsync(children, "READY"))
            {
                return PassResult.Failed(system, p, "a receiver did not join");
            }

            if (!await ProbeAsync(groups, children, context))
            {
                return PassResult.Failed(system, p, "a receiver did not see the sender in every group");
            }

            // As in the JGroups and raw UDP passes, the first W messages sent, over all groups, are the warm-up: the node
            // may drain one group's feed before the next, so a per-group split would put other groups' warm-up inside
            // the measured window.
            var schedule = new SendSchedule(p.Warmup);
            for (int g = 0; g < groups.Length; g++)
            {
                feeds.Add(groups[g].RegisterFeed(new CountedFeed(p.Share(g), p.Size, schedule)));
            }

            var results = await context.ResultsAsync(children);
            var notes = new List<string>();
            if (p.Loss > 0)
            {
                notes.Add(string.Create(CultureInfo.InvariantCulture, $"injected loss {p.Loss:P0} at receivers"));
            }

            if (context.QsMinRate is { } minRate)
            {
                notes.Add(string.Create(CultureInfo.InvariantCulture, $"rate control MinRate {minRate} packets/s"));
            }

            long senderCpu = schedule.CpuAtMeasuredStart is var atStart && atStart >= 0 ? ProcessCpu.Micros() - atStart : 0;
            var result = PassResult.From(system, p, schedule.MeasuredStartMicros, results, string.Join("; ", notes))
                with { FirstSendMicros = schedule.FirstSendMicros, SenderCpuMicros = senderCpu };
            if (!result.AllArrived || Environment.GetEnvironmentVariable("QS_COMPARE_DESCRIBE") == "1")
            {
                Console.Error.WriteLine($"QuickSilver sender at {p}: {await node.DescribeAsync()}"); // with the receivers' own lines: where it stalled
            }

            return result;
        }
        finally
        {
            feeds.ForEach(f => f.Dispose());
            await PassContext.EndAllAsync(children);
        }
    }

    /// <summary>Publishes a probe in every group until every receiver saw one in each: then the sender's views hold them all.</summary>
    private static async Task<bool> ProbeAsync(QuickSilverGroup[] groups, List<ChildProcess> children, PassContext context)
    {
        using var cts = new CancellationTokenSource(context.Grace);
        var probed = Task.WhenAll(children.Select(c => c.WaitForLineAsync("PROBED", cts.Token)));
        while (!probed.IsCompleted)
        {
            foreach (var g in groups)
            {
                g.TryPublish([MessageKind.Probe]);
            }

            await Task.WhenAny(probed, Task.Delay(200, CancellationToken.None));
        }

        return (await probed).All(l => l is not null);
    }

    /// <summary>Which messages are warm-up, over all of a pass's feeds: the first <c>warmup</c> pulled. Also when the node
    /// pulled the first measured one (µs since the epoch; 0 until then): the node pulls a message when it sends it, so
    /// this is the sender's first measured send. Core thread only.</summary>
    private sealed class SendSchedule(long warmup)
    {
        private long _warmupLeft = warmup;
        private long _measuredStart;
        private long _firstSend;
        private long _cpuAtMeasuredStart = -1;

        /// <summary>When the node pulled its first message, warm-up or measured (µs since the epoch).</summary>
        public long FirstSendMicros => Interlocked.Read(ref _firstSend);

        public long MeasuredStartMicros => Interlocked.Read(ref _measuredStart);

        /// <summary>The sender process's CPU time (µs) when it pulled its first measured message; -1 until then.</summary>
        public long CpuAtMeasuredStart => Interlocked.Read(ref _cpuAtMeasuredStart);

        /// <summary>True while the pass is still in its warm-up; otherwise stamps the measured start once.</summary>
        public bool NextIsWarmup()
        {
            if (_firstSend == 0)
            {
                Interlocked.CompareExchange(ref _firstSend, ResultLine.NowMicros(), 0);
            }

            if (_warmupLeft > 0)
            {
                _warmupLeft--;
                return true;
            }

            if (_measuredStart == 0 && Interlocked.CompareExchange(ref _measuredStart, ResultLine.NowMicros(), 0) == 0)
            {
                Interlocked.Exchange(ref _cpuAtMeasuredStart, ProcessCpu.Micros());
            }

            return false;
        }
    }

    /// <summary>A group's pull feed of <c>total</c> messages of <c>size</c> bytes, each a warm-up or a measured message as
    /// <paramref name="schedule"/> says (two shared, never modified payloads whose first byte is the
    /// <see cref="MessageKind"/>).</summary>
    private sealed class CountedFeed(long total, int size, SendSchedule schedule) : IFeed<ReadOnlyMemory<byte>>
    {
        private readonly byte[] _warmup = PayloadOf(MessageKind.Warmup, size);
        private readonly byte[] _data = PayloadOf(MessageKind.Data, size);
        private long _left = total;

        public bool TryPull(out ReadOnlyMemory<byte> item)
        {
            if (_left <= 0)
            {
                item = default;
                return false;
            }

            _left--;
            item = schedule.NextIsWarmup() ? _warmup : _data;
            return true;
        }

        // Every group's feed sends the same two arrays, as the one-group point does: 1,024 groups with arrays of their own
        // read 2 MB of distinct payloads a round, a cache cost of this runner's source, not of the framework.
        private static readonly Dictionary<(byte, int), byte[]> Shared = new();

        private static byte[] PayloadOf(byte kind, int size)
        {
            lock (Shared)
            {
                if (!Shared.TryGetValue((kind, size), out var payload))
                {
                    Shared[(kind, size)] = payload = Payload(kind, size);
                }

                return payload;
            }
        }

        private static byte[] Payload(byte kind, int size)
        {
            var payload = new byte[Math.Max(1, size)];
            payload[0] = kind;
            return payload;
        }
    }
}
