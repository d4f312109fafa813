using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;
namespace QuickSilver.Qsm.Tests;
public sealed class TmpSweep(ITestOutputHelper output)
{
    [Theory]
    [InlineData(3100, 300)]
    public void Sweep(int from, int count)
    {
        var failures = new List<string>();
        for (int seed = from; seed < from + count; seed++)
        {
            var r = new Random(seed);
            int members = r.Next(6, 26);
            int rf = r.Next(2, 6);
            double loss = r.NextDouble() * 0.05;
            var flow = r.Next(2) == 0 ? RegionFlowControl.ReceiverWindow : RegionFlowControl.PaperRate;
            bool inside = r.Next(2) == 0;
            int senders = r.Next(1, 3);
            int messages = r.Next(2000, 6000);
            string desc = $"seed {seed}: n {members} R {rf} loss {loss:P1} {flow} inside {inside} senders {senders} msgs {messages}";
            try
            {
                var cluster = new RegionCluster(seed, members, senders, new RegionClusterOptions
                {
                    Link = new LinkOptions { BandwidthBitsPerSecond = 100_000_000, LossRate = loss },
                    Region = new RegionOptions { ReplicationFactor = rf, TokenInterval = TimeSpan.FromMilliseconds(50), FlowControl = flow },
                    SendersAreMembers = inside,
                    PayloadBytes = 200,
                });
                cluster.SendFromAll(messages);
                var excused = new Dictionary<RegionClusterNode, HashSet<uint>>();
                bool Done() => cluster.LiveMembers.All(n => cluster.Senders.All(s => (excused.TryGetValue(n, out var x) && x.Contains(s.Id)) || (n.DeliveredFrom(s.Id) == messages && n.FirstOutOfOrder(s.Id) < 0)));
                var protectedIds = cluster.Senders.Select(s => s.Id).Append(cluster.View.Members[0].Node.Value).ToHashSet();
                int events = r.Next(2, 7);
                for (int e = 0; e < events; e++)
                {
                    double share = (e + 1.0) / (events + 2) ;
                    bool ok = cluster.Network.RunUntil(() => cluster.LiveMembers.Where(n => !n.Joiner).Min(n => cluster.Senders.Min(s => n.DeliveredFrom(s.Id))) >= (long)(share * messages), TimeSpan.FromMinutes(1));
                    if (!ok) throw new InvalidOperationException($"stalled before event {e}: {cluster.CheckDelivery(messages)}");
                    var candidates = cluster.LiveMembers.Where(n => !protectedIds.Contains(n.Id)).ToList();
                    int kind = r.Next(3);
                    if (kind == 0 && candidates.Count > 3)
                    {
                        var v = candidates[r.Next(candidates.Count)];
                        v.Sim.Crash();
                        cluster.Network.RunFor(TimeSpan.FromMilliseconds(20));
                        cluster.Exclude(v);
                    }
                    else if (kind == 1 && candidates.Count > 3)
                    {
                        cluster.Leave(candidates[r.Next(candidates.Count)]);
                    }
                    else
                    {
                        int k = r.Next(1, 4);
                        for (int i = 0; i < k; i++) { var j = cluster.Admit(); excused[j] = cluster.Senders.Where(s => (long)s.Sender!.LastSequence >= messages).Select(s => s.Id).ToHashSet(); }
                    }
                }
                bool done = cluster.Network.RunUntil(Done, TimeSpan.FromMinutes(3));
                if (!done)
                    throw new InvalidOperationException($"not delivered: {cluster.CheckDelivery(messages)}");
                var ms = cluster.LiveMembers.Select(n => n.Member!).ToArray();
                bool settled = cluster.Network.RunUntil(() => ms.All(m => m.Share.OldShares.Count == 0 && m.HeldPackets == 0), TimeSpan.FromSeconds(20));
                if (!settled) throw new InvalidOperationException("not settled: " + string.Join(" | ", ms.Where(m => m.Share.OldShares.Count > 0 || m.HeldPackets > 0).Take(3).Select(m => $"old {m.Share.OldShares.Count} {m.Describe()}")));
                output.WriteLine($"ok {desc}: restored {ms.Sum(m => m.Restored)} oldpulls {ms.Sum(m => m.Recovery.OldSharePullsSent)}");
            }
            catch (Exception e) { failures.Add($"{desc}: {e.Message[..Math.Min(700, e.Message.Length)]}"); }
        }
        output.WriteLine($"{failures.Count} failures");
        foreach (var f in failures) output.WriteLine("FAIL " + f);
        Assert.Empty(failures);
    }
}
