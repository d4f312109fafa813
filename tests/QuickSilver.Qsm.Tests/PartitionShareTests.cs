using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// <see cref="RegionOptions.PartitionShare"/> (issue 11, item 3; docs/qsm.md, "Partition share"): after delivery a member
/// keeps only its partition's class (seq mod p), and a view change that redraws the partitions strands nothing. All on
/// the simulated network, virtual time, seeded.
/// </summary>
public sealed class PartitionShareTests(ITestOutputHelper output)
{
    private static RegionOptions Options(bool share, RegionFlowControl flow = RegionFlowControl.ReceiverWindow) => new()
    {
        ReplicationFactor = 3,
        TokenInterval = TimeSpan.FromMilliseconds(50),
        PartitionShare = share,
        FlowControl = flow,
    };

    private static LinkOptions Loss(double rate) => new() { BandwidthBitsPerSecond = 100_000_000, LossRate = rate };

    /// <summary>Runs 12 members (R = 3: 4 partitions) and one sender outside the region; returns each member's peak held
    /// packets and bytes.</summary>
    private (long[] Packets, long[] Bytes, long Released, TimeSpan Took) RunTwelve(int seed, bool share, RegionFlowControl flow, double loss, int messages)
    {
        var cluster = new RegionCluster(seed, 12, 1, new RegionClusterOptions { Link = Loss(loss), Region = Options(share, flow), PayloadBytes = 1000 });
        Assert.Equal(4, cluster.Nodes[0].Member!.Partitions);
        cluster.SendFromAll(messages);
        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(messages), TimeSpan.FromMinutes(5));
        Assert.True(done, $"seed {seed}, share {share}, {flow}: {cluster.CheckDelivery(messages)}");
        Assert.Null(cluster.CheckDelivery(messages));
        var members = cluster.LiveMembers.Select(n => n.Member!).ToArray();
        return ([.. members.Select(m => m.PeakHeldPackets)], [.. members.Select(m => m.PeakHeldBytes)], members.Sum(m => m.ReleasedAtDelivery), cluster.Network.Now);
    }

    /// <summary>(a) The memory the share saves: each member's peak of held packets, with the share and without, in a
    /// 12-member region of 4 partitions, both flow-control modes (receivers' windows: the sender's <c>settled</c> purges
    /// within a round trip; the paper's rate control: only the token's purge, once a round). The figures print
    /// (rerun: <c>dotnet test tests/QuickSilver.Qsm.Tests --filter "FullyQualifiedName~PartitionShareTests.Each_member" --logger "console;verbosity=detailed"</c>).</summary>
    [Theory]
    [InlineData(RegionFlowControl.ReceiverWindow, 1101)]
    [InlineData(RegionFlowControl.PaperRate, 1102)]
    public void Each_member_holds_about_a_quarter_of_the_packets_with_four_partitions(RegionFlowControl flow, int seed)
    {
        const int Messages = 4_000;
        var off = RunTwelve(seed, share: false, flow, loss: 0, Messages);
        var on = RunTwelve(seed, share: true, flow, loss: 0, Messages);
        double ratio = on.Packets.Average() / off.Packets.Average();
        double bytesRatio = on.Bytes.Average() / (double)off.Bytes.Average();
        output.WriteLine($"{flow}, seed {seed}, 12 members, 4 partitions, {Messages} packets of 1,000 B, no loss:");
        output.WriteLine($"  without the share: peak held per member {off.Packets.Min()}..{off.Packets.Max()} packets (mean {off.Packets.Average():F0}), " +
                         $"{off.Bytes.Min():N0}..{off.Bytes.Max():N0} B (mean {off.Bytes.Average():N0}); delivered in {off.Took.TotalSeconds:F3} s");
        output.WriteLine($"  with the share:    peak held per member {on.Packets.Min()}..{on.Packets.Max()} packets (mean {on.Packets.Average():F0}), " +
                         $"{on.Bytes.Min():N0}..{on.Bytes.Max():N0} B (mean {on.Bytes.Average():N0}); delivered in {on.Took.TotalSeconds:F3} s; released at delivery {on.Released:N0}");
        output.WriteLine($"  ratio: packets {ratio:F3}, bytes {bytesRatio:F3}");
        Assert.Equal(0, off.Released);
        Assert.True(on.Released > Messages * 12 / 2, $"only {on.Released} packets released at delivery");
        Assert.True(ratio < 0.5, $"with the share each member held {ratio:F3} of what it held without");
        Assert.True(bytesRatio < 0.5, $"bytes: {bytesRatio:F3}");
    }

    /// <summary>(b) 2 % and 5 % random loss on every link with the share: every member gets every message once, in order.</summary>
    [Theory]
    [InlineData(0.02, 1111, RegionFlowControl.ReceiverWindow)]
    [InlineData(0.05, 1112, RegionFlowControl.ReceiverWindow)]
    [InlineData(0.02, 1113, RegionFlowControl.PaperRate)]
    [InlineData(0.05, 1114, RegionFlowControl.PaperRate)]
    public void Under_loss_every_member_gets_every_message_once_in_order(double loss, int seed, RegionFlowControl flow)
    {
        var result = RunTwelve(seed, share: true, flow, loss, messages: 3_000);
        output.WriteLine($"loss {loss:P0}, {flow}, seed {seed}: delivered in {result.Took.TotalSeconds:F3} s, peak held {result.Packets.Min()}..{result.Packets.Max()}, released {result.Released:N0}");
        Assert.True(result.Released > 0);
    }

    /// <summary>(c) View changes mid-stream under 2 % loss, with the share: a caching member crashes, one leaves, one joins,
    /// then four more at once (p goes 4 → 3 → 3 → 4 → 5, and each change shifts members between partitions). Nothing is lost:
    /// every live member gets every message it is owed once, in order; the old classes kept across the changes settle
    /// once the region has purged past them, and then every member holds nothing.</summary>
    [Theory]
    [InlineData(1121, RegionFlowControl.ReceiverWindow)]
    [InlineData(1122, RegionFlowControl.ReceiverWindow)]
    [InlineData(1123, RegionFlowControl.PaperRate)]
    [InlineData(1124, RegionFlowControl.PaperRate)]
    public void View_changes_that_redraw_the_partitions_mid_stream_lose_nothing(int seed, RegionFlowControl flow)
    {
        const int Messages = 6_000;
        var cluster = new RegionCluster(seed, 12, 1, new RegionClusterOptions { Link = Loss(0.02), Region = Options(true, flow), PayloadBytes = 200 });
        cluster.SendFromAll(Messages);
        var random = new Random(seed);
        RegionClusterNode ByIndex(int index) => cluster.Nodes.Single(n => n.Id == cluster.View.Members[index].Node.Value);

        // Each change happens once the slowest live member has a random share of the stream, so all land mid-stream.
        void RunToShare(double share) => Assert.True(cluster.Network.RunUntil(
            () => cluster.LiveMembers.Where(n => !n.Joiner).Min(n => n.DeliveredFrom(cluster.Senders[0].Id)) >= (long)(share * Messages), TimeSpan.FromMinutes(1)));

        RunToShare(0.05 + (random.NextDouble() * 0.1));
        var crashed = ByIndex(1 + random.Next(10)); // a caching member (every member caches its partition's class)
        crashed.Sim.Crash();
        cluster.Network.RunFor(TimeSpan.FromMilliseconds(20)); // failure detection
        cluster.Exclude(crashed);

        RunToShare(0.2 + (random.NextDouble() * 0.1));
        cluster.Leave(ByIndex(1 + random.Next(9)));

        RunToShare(0.35 + (random.NextDouble() * 0.1));
        cluster.Admit();

        RunToShare(0.5 + (random.NextDouble() * 0.1));
        for (int i = 0; i < 4; i++)
        {
            cluster.Admit();
        }

        Assert.Equal(5, cluster.Nodes[0].Member!.Partitions);

        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(5));
        var members = cluster.LiveMembers.Select(n => n.Member!).ToArray();
        output.WriteLine($"seed {seed}, {flow}: delivered in {cluster.Network.Now.TotalSeconds:F3} s; released {members.Sum(m => m.ReleasedAtDelivery):N0}, " +
                         $"restored {members.Sum(m => m.Restored)}, old-share pulls {members.Sum(m => m.Recovery.OldSharePullsSent)}, " +
                         $"old classes settled {members.Sum(m => m.Share.OldSharesSettled)}, forgotten {members.Sum(m => m.Share.OldSharesForgotten)}; " +
                         $"sender resent on NAK {cluster.Senders[0].Sender!.RetransmittedOnNak}, on timeout {cluster.Senders[0].Sender!.RetransmittedOnTimeout}");
        Assert.True(done, $"seed {seed}: {cluster.CheckDelivery(Messages)}; {string.Join(" | ", members.Select(m => m.Describe()))}");
        Assert.Null(cluster.CheckDelivery(Messages));
        Assert.True(members.Sum(m => m.Share.OldSharesSettled) > 0, "no member's class changed: the test proves nothing");

        bool settled = cluster.Network.RunUntil(() => members.All(m => m.Share.OldShares.Count == 0 && m.HeldPackets == 0), TimeSpan.FromSeconds(10));
        Assert.True(settled, string.Join(" | ", members.Select(m => $"old {m.Share.OldShares.Count}: {m.Describe()}")));
        Assert.Equal(0, members.Sum(m => m.Share.OldSharesForgotten));
        Assert.All(members, m => Assert.Equal(0, m.Drops[DropReason.ReceiveBufferFull]));
    }

    /// <summary>(c, randomised) Each seed draws a region (6–25 members, R 2–5, 0–5 % loss, either flow control, one or two
    /// senders inside or outside the region, 2,000–6,000 messages) and 2–6 view changes at random points of the stream
    /// (a crash, a leave, or one to three joins). Every live member gets every message it is owed once, in order (a
    /// joiner admitted after a sender numbered its last packet is owed nothing of it), and afterwards the old shares
    /// settle and nothing is held. Seeds 3000–3399 passed when this was written; CI runs a sample.</summary>
    [Theory]
    [InlineData(3000)]
    [InlineData(3010)]
    [InlineData(3016)]
    [InlineData(3036)]
    [InlineData(3066)]
    [InlineData(3090)]
    public void Random_regions_with_random_view_changes_lose_nothing(int seed)
    {
        var r = new Random(seed);
        int members = r.Next(6, 26);
        int replication = r.Next(2, 6);
        double loss = r.NextDouble() * 0.05;
        var flow = r.Next(2) == 0 ? RegionFlowControl.ReceiverWindow : RegionFlowControl.PaperRate;
        bool inside = r.Next(2) == 0;
        int senders = r.Next(1, 3);
        int messages = r.Next(2000, 6000);
        string described = $"seed {seed}: {members} members, R {replication}, loss {loss:P1}, {flow}, {senders} sender(s) {(inside ? "inside" : "outside")}, {messages} messages";
        var cluster = new RegionCluster(seed, members, senders, new RegionClusterOptions
        {
            Link = Loss(loss),
            Region = Options(true, flow) with { ReplicationFactor = replication },
            SendersAreMembers = inside,
            PayloadBytes = 200,
        });
        cluster.SendFromAll(messages);
        var owedNothing = new Dictionary<RegionClusterNode, HashSet<uint>>();
        bool Done() => cluster.LiveMembers.All(n => cluster.Senders.All(s =>
            (owedNothing.TryGetValue(n, out var none) && none.Contains(s.Id)) || (n.DeliveredFrom(s.Id) == messages && n.FirstOutOfOrder(s.Id) < 0)));
        var kept = cluster.Senders.Select(s => s.Id).Append(cluster.View.Members[0].Node.Value).ToHashSet(); // senders and the first leader stay

        int events = r.Next(2, 7);
        for (int e = 0; e < events; e++)
        {
            double share = (e + 1.0) / (events + 2);
            Assert.True(cluster.Network.RunUntil(
                () => cluster.LiveMembers.Where(n => !n.Joiner).Min(n => cluster.Senders.Min(s => n.DeliveredFrom(s.Id))) >= (long)(share * messages),
                TimeSpan.FromMinutes(1)), $"{described}: stalled before change {e}: {cluster.CheckDelivery(messages)}");
            var candidates = cluster.LiveMembers.Where(n => !kept.Contains(n.Id)).ToList();
            int kind = r.Next(3);
            if (kind == 0 && candidates.Count > 3)
            {
                var victim = candidates[r.Next(candidates.Count)];
                victim.Sim.Crash();
                cluster.Network.RunFor(TimeSpan.FromMilliseconds(20)); // failure detection
                cluster.Exclude(victim);
            }
            else if (kind == 1 && candidates.Count > 3)
            {
                cluster.Leave(candidates[r.Next(candidates.Count)]);
            }
            else
            {
                for (int i = r.Next(1, 4); i > 0; i--)
                {
                    var joiner = cluster.Admit();
                    owedNothing[joiner] = [.. cluster.Senders.Where(s => (long)s.Sender!.LastSequence >= messages).Select(s => s.Id)];
                }
            }
        }

        var live = cluster.LiveMembers.Select(n => n.Member!).ToArray();
        Assert.True(cluster.Network.RunUntil(Done, TimeSpan.FromMinutes(3)), $"{described}: {cluster.CheckDelivery(messages)}");
        bool settled = cluster.Network.RunUntil(() => live.All(m => m.Share.OldShares.Count == 0 && m.HeldPackets == 0), TimeSpan.FromSeconds(20));
        output.WriteLine($"{described}: {events} view changes; restored {live.Sum(m => m.Restored)}, old-share pulls {live.Sum(m => m.Recovery.OldSharePullsSent)}");
        Assert.True(settled, $"{described}: " + string.Join(" | ", live.Where(m => m.Share.OldShares.Count > 0 || m.HeldPackets > 0).Take(3).Select(m => m.Describe())));
    }
}
