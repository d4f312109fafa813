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
}
