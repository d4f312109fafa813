using QuickSilver.Qsm.Region;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Text.Json;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>
/// Runs <c>qs node</c>. Prints "ready node=ID groups=... address=IP:PORT" once joined, a counts line each second, and at the end
/// "final GROUP delivered=N anomalies=A" for the first group (a QSM group, or with --transport aer an AER group).
/// Everything is bounded by --seconds.
/// </summary>
internal static class NodeRun
{
    public static async Task<int> RunAsync(NodeSettings settings, CancellationToken cancellationToken)
    {
        using var stop = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        stop.CancelAfter(TimeSpan.FromSeconds(settings.Seconds));
        var clock = Stopwatch.StartNew();
        QuickSilverNode node;
        try
        {
            node = await QuickSilverNode.StartAsync(new QuickSilverNodeOptions
            {
                Gms = settings.Gms,
                GmsReplicas = settings.GmsReplicas,
                Security = settings.Security,
                LoggerFactory = QsLogging.Factory,
                Region = new RegionOptions { SlowReceivers = settings.SlowReceivers, LaggardTimeout = settings.LaggardTimeout },
                Bind = settings.Listen,
                InjectedLossRate = settings.InjectedLoss,
            }, stop.Token);
        }
        catch (OperationCanceledException)
        {
            await Console.Error.WriteLineAsync($"No GMS answered at {settings.Gms} within --seconds {settings.Seconds}.");
            return 1;
        }

        await using var owned = node;
        var groups = new List<(QuickSilverGroup Group, SequenceCheck Check)>();
        foreach (var name in settings.Groups.Distinct(StringComparer.Ordinal))
        {
            var group = groups.Count == 0 && settings.MainGroup is { } mainOptions
                ? await node.JoinGroupAsync(name, mainOptions, stop.Token)
                : await node.JoinGroupAsync(name, stop.Token);
            var check = new SequenceCheck();
            if (settings.ReadRate == 0 || groups.Count > 0)
            {
                group.QueueMessages = false;
                group.OnMessage = check.Observe;
            }

            groups.Add((group, check));
        }

        var reader = settings.ReadRate > 0
            ? Task.Run(() => ReadSlowlyAsync(groups[0].Group, groups[0].Check, settings.ReadRate, stop.Token), CancellationToken.None)
            : Task.CompletedTask;

        Console.WriteLine(settings.Json
            ? JsonSerializer.Serialize(new { @event = "ready", node = node.Id, address = node.Address.ToString(), pid = Environment.ProcessId, groups = groups.Select(g => g.Group.Name) })
            : $"ready node={node.Id} groups={string.Join(',', groups.Select(g => g.Group.Name))} address={node.Address}");
        var (main, mainCheck) = groups[0];
        long sent = 0;
        var publisher = settings.Publish > 0
            ? Task.Run(() => PublishAsync(main, settings, n => Interlocked.Exchange(ref sent, n), stop.Token), CancellationToken.None)
            : Task.CompletedTask;
        var last = new long[groups.Count];
        var lingerUntil = TimeSpan.MaxValue;
        while (!stop.IsCancellationRequested)
        {
            await Task.Delay(TimeSpan.FromSeconds(1), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
            Console.WriteLine(settings.Json ? CountsJson(clock.Elapsed, Interlocked.Read(ref sent), groups) : Counts(clock.Elapsed, Interlocked.Read(ref sent), groups, last));
            if (settings.DescribeEvery > 0 && (long)clock.Elapsed.TotalSeconds % settings.DescribeEvery == 0)
            {
                await Console.Error.WriteLineAsync($"[{clock.Elapsed.TotalSeconds,6:F1}s] {await node.DescribeAsync()}");
            }
            if (settings.Expect > 0 && mainCheck.Delivered + main.SkippedMessages >= settings.Expect)
            {
                break;
            }

            // A publisher delivers its own messages as it sends them: once all are out, linger for repairs, then stop.
            // An AER source does not deliver to itself: it lingers once all are out.
            if (settings.Publish > 0 && publisher.IsCompleted && settings.Expect == 0
                && (mainCheck.Delivered >= settings.Publish || publisher.IsFaulted || main.Transport == GroupTransport.Aer))
            {
                lingerUntil = lingerUntil == TimeSpan.MaxValue ? clock.Elapsed + TimeSpan.FromSeconds(settings.Linger) : lingerUntil;
                if (clock.Elapsed >= lingerUntil)
                {
                    break;
                }
            }
        }

        await stop.CancelAsync();
        await publisher.ContinueWith(_ => { }, TaskScheduler.Default);
        await reader.ContinueWith(_ => { }, TaskScheduler.Default);
        if (publisher.Exception is { } failed)
        {
            await Console.Error.WriteLineAsync($"publishing failed: {failed.InnerException?.Message}");
        }

        Console.WriteLine(settings.Json
            ? JsonSerializer.Serialize(new { @event = "final", group = main.Name, delivered = mainCheck.Delivered, skipped = main.SkippedMessages, anomalies = mainCheck.Anomalies, sent = Interlocked.Read(ref sent) })
            : $"final {main.Name} delivered={mainCheck.Delivered} anomalies={mainCheck.Anomalies} skipped={main.SkippedMessages} sent={Interlocked.Read(ref sent)}");

        // With skips every message is delivered or skipped, and a skip shows as a gap (an anomaly) in the numbers.
        bool ok = settings.Expect == 0
                  || (mainCheck.Delivered + main.SkippedMessages == settings.Expect && (main.SkippedMessages > 0 || mainCheck.Anomalies == 0));
        return ok ? 0 : 1;
    }

    private static async Task PublishAsync(QuickSilverGroup group, NodeSettings settings, Action<long> progress, CancellationToken cancellationToken)
    {
        while (group.Transport == GroupTransport.Qsm && (group.View?.RegionCount ?? 0) < settings.WaitRegions) // an AER group has no view
        {
            await Task.Delay(20, cancellationToken);
        }

        var payload = new byte[settings.Size];
        for (long n = 1; n <= settings.Publish; n++)
        {
            SequenceCheck.Stamp(payload, n);
            await group.PublishAsync(payload, cancellationToken);
            progress(n);
        }
    }

    /// <summary>A slow application (--read-rate): reads the group's bounded queue at most <paramref name="perSecond"/>
    /// messages a second, so the queue fills and delivery pauses (back-pressure), or the senders tell this node to skip.</summary>
    private static async Task ReadSlowlyAsync(QuickSilverGroup group, SequenceCheck check, int perSecond, CancellationToken cancellationToken)
    {
        var clock = Stopwatch.StartNew();
        long read = 0;
        await foreach (var message in group.ReadAllAsync(cancellationToken))
        {
            check.Observe(message.Sender, message.Sequence, message.Payload);
            if (++read > perSecond * clock.Elapsed.TotalSeconds)
            {
                await Task.Delay(TimeSpan.FromMilliseconds(5), cancellationToken);
            }
        }
    }

    private static string CountsJson(TimeSpan elapsed, long sent, List<(QuickSilverGroup Group, SequenceCheck Check)> groups)
        => JsonSerializer.Serialize(new
        {
            @event = "counts",
            seconds = Math.Round(elapsed.TotalSeconds, 1),
            sent,
            delivered = groups.ToDictionary(g => g.Group.Name, g => g.Check.Delivered, StringComparer.Ordinal),
            skipped = groups.ToDictionary(g => g.Group.Name, g => g.Group.SkippedMessages, StringComparer.Ordinal),
            heapBytes = GC.GetTotalMemory(false),
            workingSetBytes = Environment.WorkingSet,
        });

    private static string Counts(TimeSpan elapsed, long sent, List<(QuickSilverGroup Group, SequenceCheck Check)> groups, long[] last)
    {
        var line = new StringBuilder(string.Create(CultureInfo.InvariantCulture, $"[{elapsed.TotalSeconds,6:F1}s] sent {sent,9:N0} |"));
        for (int i = 0; i < groups.Count; i++)
        {
            long delivered = groups[i].Check.Delivered;
            line.Append(CultureInfo.InvariantCulture, $" {groups[i].Group.Name} {delivered,9:N0} (+{delivered - last[i]:N0}) |");
            last[i] = delivered;
            if (groups[i].Group.SkippedMessages > 0)
            {
                line.Append(CultureInfo.InvariantCulture, $" skipped {groups[i].Group.SkippedMessages:N0} |");
            }
        }

        line.Append(CultureInfo.InvariantCulture, $" heap {GC.GetTotalMemory(false) / 1_048_576.0:F1} MiB, working set {Environment.WorkingSet / 1_048_576.0:F1} MiB");

        return line.ToString();
    }
}
