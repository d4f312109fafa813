using System.Globalization;

namespace QuickSilver.Compare.Passes;

/// <summary>JGroups: the Java harness (benchmarks/jgroups) as one sender and N receiver processes over udp.xml on loopback.</summary>
internal static class JGroupsPass
{
    public static async Task<PassResult> RunAsync(PassContext context, string classPath)
    {
        var p = context.Point;
        var (port, tag) = PassContext.FreshAddress();
        string[] common = [.. JavaHarness.JvmArgs(classPath), .. RoleArgs.Make(("receivers", p.Receivers), ("messages", p.Messages), ("warmup", p.Warmup), ("size", p.Size),
            ("groups", p.Groups), ("timeout", (int)context.Timeout.TotalSeconds), ("port", port), ("mcast", string.Create(CultureInfo.InvariantCulture, $"228.9.{tag}.1")),
            ("cluster", $"cmp{port}"))];
        var children = new List<ChildProcess> { ChildProcess.Start("java", [.. common, "role=sender"]) };
        try
        {
            if (!await context.AllSayAsync(children, "READY"))
            {
                return PassResult.Failed(Systems.JGroups, p, "the sender did not connect");
            }

            // One receiver at a time: each prints READY once all its channels are connected (in the views). Started
            // together, 2 × 256 channels joining at once did not converge within 240 s in a full run.
            for (int i = 0; i < p.Receivers; i++)
            {
                var receiver = ChildProcess.Start("java", [.. common, "role=receiver"]);
                children.Add(receiver);
                if (!await context.AllSayAsync([receiver], "READY"))
                {
                    return PassResult.Failed(Systems.JGroups, p, $"receiver {i + 1} did not connect");
                }
            }

            var results = await context.ResultsAsync(children);
            var sender = results.Find(r => r.GetValueOrDefault("role") == "sender");
            if (sender is null || sender.GetValueOrDefault("members") != "true")
            {
                return PassResult.Failed(Systems.JGroups, p, "the sender did not see every receiver join");
            }

            return PassResult.From(Systems.JGroups, p, sender.Long("measured_start_us"), results.Where(r => r.GetValueOrDefault("role") == "receiver").ToList(), "");
        }
        finally
        {
            await PassContext.EndAllAsync(children);
        }
    }
}
