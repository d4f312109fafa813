using System.Globalization;
using QuickSilver.Core.Io;

namespace QuickSilver.Samples.QuickStart;

/// <summary>
/// The child role: a node that joins its groups, prints "ready &lt;node id&gt;" and then, once a second,
/// "report &lt;delivered&gt; &lt;anomalies&gt; &lt;messages per second&gt;" for the published group on stdout, which the parent parses. It exits when its
/// stdin closes (the parent stopped or died) or after <c>lifetime</c>, whichever comes first.
/// </summary>
internal static class Receiver
{
    public static async Task<int> RunAsync(NetAddress gms, IReadOnlyList<NetAddress> replicas, int index, TimeSpan lifetime)
    {
        using var stop = new CancellationTokenSource(lifetime);
        ChildProcess.CancelWhenStdinCloses(stop);
        try
        {
            await using var node = await QuickSilverNode.StartAsync(Demo.NodeOptions(gms, embeddedGms: false, Demo.SecretFromPublisher(), replicas), stop.Token);
            var check = new SequenceCheck();
            foreach (var name in Demo.GroupsOf(index))
            {
                var group = await node.JoinGroupAsync(name, stop.Token);
                group.QueueMessages = false;
                if (name == Demo.Published)
                {
                    group.OnMessage = check.Observe;
                }
            }

            Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"ready {node.Id}"));
            var clock = System.Diagnostics.Stopwatch.StartNew();
            var (lastTime, lastCount) = (TimeSpan.Zero, 0L);
            while (!stop.IsCancellationRequested)
            {
                await Task.Delay(TimeSpan.FromSeconds(1), stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
                var (now, delivered) = (clock.Elapsed, check.Delivered);
                long rate = (long)((delivered - lastCount) / Math.Max((now - lastTime).TotalSeconds, 1e-3));
                (lastTime, lastCount) = (now, delivered);
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"report {delivered} {check.Anomalies} {rate}"));
            }

            return 0;
        }
        catch (OperationCanceledException)
        {
            await Console.Error.WriteLineAsync("stopped before joining its groups");
            return 1;
        }
    }
}
