using System.Diagnostics;
using System.Globalization;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;

namespace QuickSilver.Samples.QuickStart;

internal sealed record DemoSettings(int Receivers, int Messages, int Seconds, int Size, int GmsReplicas = 0, bool KillGmsLeader = false);

/// <summary>
/// The parent role: runs the embedded GMS and the publisher in this process, spawns the receivers, publishes
/// numbered messages in "prices/all" for at most <see cref="DemoSettings.Seconds"/>, prints each receiver's rate once a
/// second, and succeeds only if every receiver got every message exactly once, in order.
/// </summary>
internal static class Publisher
{
    private static readonly TimeSpan StartTimeout = TimeSpan.FromSeconds(30);
    private static readonly TimeSpan DrainTimeout = TimeSpan.FromSeconds(30);

    public static async Task<int> RunAsync(DemoSettings settings)
    {
        var clock = Stopwatch.StartNew();
        var gms = NetAddress.Loopback(Demo.FreeLoopbackPort());
        var secret = DatagramSecurityOptions.GenerateSecret();
        var lifetime = StartTimeout + TimeSpan.FromSeconds(settings.Seconds) + DrainTimeout + TimeSpan.FromSeconds(30);
        await using var replicas = await ReplicaSet.StartAsync(settings.GmsReplicas, lifetime, secret, StartTimeout);
        var options = Demo.NodeOptions(gms, embeddedGms: replicas.Count == 0, secret, replicas.Addresses);
        using var startCts = new CancellationTokenSource(StartTimeout);
        await using var node = await QuickSilverNode.StartAsync(options, startCts.Token);
        Say(replicas.Count == 0
            ? $"GMS at {gms}, embedded in this publisher process (pid {Environment.ProcessId}); region multicast addresses from {options.GmsServer.MulticastPoolStart}"
            : $"GMS: {replicas.Describe()}; leader {replicas.Leader?.Name ?? "not known yet"}");
        var receivers = new List<ReceiverProcess>();
        try
        {
            // The publisher joins first: a publisher that joins after receivers whose region its join does not change
            // stalls today (see docs/quickstart.md, "Known limits").
            QuickSilverGroup? published = null;
            foreach (var name in Demo.PublisherGroups)
            {
                var group = await node.JoinGroupAsync(name, startCts.Token);
                group.QueueMessages = false;
                published ??= group;
            }

            for (int i = 0; i < settings.Receivers; i++)
            {
                receivers.Add(ReceiverProcess.Start(i, gms, replicas.Addresses, lifetime, secret));
            }

            var ids = await Task.WhenAll(receivers.Select(r => r.Ready)).WaitAsync(startCts.Token);
            foreach (var r in receivers)
            {
                Say($"receiver {r.Name}: pid {r.ProcessId}, node {ids[r.Index]}, groups {string.Join(", ", Demo.GroupsOf(r.Index))}");
            }

            await WaitForViewAsync(node, published!, settings.Receivers + 1, startCts.Token);
            Say($"publisher: node {node.Id}, groups {string.Join(", ", Demo.PublisherGroups)}; {Demo.Published} has {settings.Receivers + 1} members in {published!.View?.RegionCount} regions of overlap");
            Say($"publishing up to {settings.Messages:N0} messages of {settings.Size} B in {Demo.Published} for at most {settings.Seconds} s");
            using var progress = new Progress(receivers);
            var failover = settings.KillGmsLeader ? replicas.KillLeaderAfterAsync(TimeSpan.FromMilliseconds(250), Say) : Task.CompletedTask;
            var (sent, publishTime) = await PublishAsync(published, settings, progress);
            await failover;
            Say($"the node accepted {sent:N0} messages in {publishTime.TotalSeconds:F1} s (it buffers them while rate control lets them out); waiting for delivery");
            var (complete, drained) = await DrainAsync(receivers, sent);
            progress.Dispose();
            var rate = (publishTime + drained).TotalSeconds;
            Say($"delivery took {rate:F1} s from the first publish: {sent / rate:N0} msg/s per receiver on average");
            return Summarise(receivers, sent, complete, clock.Elapsed);
        }
        catch (Exception e) when (e is OperationCanceledException or InvalidOperationException)
        {
            await Console.Error.WriteLineAsync($"FAILED: {e.Message}");
            return 1;
        }
        finally
        {
            Parallel.ForEach(receivers, r => r.Dispose());
        }
    }

    /// <summary>Waits until the publisher has installed a view of the group with <paramref name="members"/> nodes, so that
    /// every receiver gets the first message.</summary>
    private static async Task WaitForViewAsync(QuickSilverNode node, QuickSilverGroup group, int members, CancellationToken cancellationToken)
    {
        while (true)
        {
            if (await node.GetViewMemberCountAsync(group).WaitAsync(cancellationToken) >= members)
            {
                return;
            }

            await Task.Delay(20, cancellationToken);
        }
    }

    private static async Task<(long Sent, TimeSpan Elapsed)> PublishAsync(QuickSilverGroup group, DemoSettings settings, Progress progress)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(settings.Seconds));
        var payload = new byte[settings.Size];
        var clock = Stopwatch.StartNew();
        long sent = 0;
        try
        {
            for (long n = 1; n <= settings.Messages; n++)
            {
                SequenceCheck.Stamp(payload, n);
                await group.PublishAsync(payload, cts.Token);
                sent = n;
                progress.Sent = n;
            }
        }
        catch (OperationCanceledException)
        {
            Say($"--seconds {settings.Seconds} reached: stopping the publisher");
        }

        return (sent, clock.Elapsed);
    }

    /// <summary>Waits until every receiver has reported <paramref name="sent"/> messages (returning how long that took,
    /// to within a report interval), then for one more report so that late duplicates would show.</summary>
    private static async Task<(bool Complete, TimeSpan Drained)> DrainAsync(List<ReceiverProcess> receivers, long sent)
    {
        var deadline = Stopwatch.StartNew();
        while (receivers.Any(r => r.Delivered < sent && !r.HasExited) && deadline.Elapsed < DrainTimeout)
        {
            await Task.Delay(100);
        }

        var drained = deadline.Elapsed;
        var reports = receivers.Select(r => r.Reports).ToArray();
        while (receivers.Any(r => r.Reports == reports[r.Index] && !r.HasExited) && deadline.Elapsed < DrainTimeout + TimeSpan.FromSeconds(3))
        {
            await Task.Delay(100);
        }

        return (receivers.All(r => r.Delivered == sent), drained);
    }

    private static int Summarise(List<ReceiverProcess> receivers, long sent, bool complete, TimeSpan total)
    {
        Console.WriteLine();
        bool ok = complete;
        foreach (var r in receivers)
        {
            bool good = r.Delivered == sent && r.Anomalies == 0;
            ok &= good;
            string order = r.Anomalies == 0 ? "in order, exactly once" : $"{r.Anomalies:N0} out of order or duplicated";
            Say($"receiver {r.Name}: {r.Delivered,10:N0} / {sent:N0} delivered, {order}");
        }

        Say(ok
            ? $"OK: every receiver got all {sent:N0} messages exactly once, in order ({total.TotalSeconds:F1} s in all)."
            : $"FAILED: some receiver missed, duplicated or reordered messages ({total.TotalSeconds:F1} s in all).");
        return ok ? 0 : 1;
    }

    private static void Say(string line) => Console.WriteLine(line);
}
