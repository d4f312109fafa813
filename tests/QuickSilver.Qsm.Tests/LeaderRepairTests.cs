using QuickSilver.Qsm.Region;
using QuickSilver.Qsm.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// A partition leader repairs its members' gaps from what it holds before the sender hears of them
/// (<see cref="RegionOptions.LeaderRepair"/>, docs/qsm.md "Leader repair"), on virtual time: the sender resends only what
/// the leader could not give, a repair lost on the way goes again from the leader's copy after the hold-off, and a gap
/// nobody repairs is pulled from its caching partition.
/// </summary>
public sealed class LeaderRepairTests(ITestOutputHelper output)
{
    private const int Messages = 3_000;

    /// <summary>Ten members in two partitions (replication factor 5), one sender outside the region, a clean LAN but
    /// for one non-leader member whose link loses <paramref name="loss"/> of its datagrams both ways.</summary>
    private static (RegionCluster Cluster, RegionClusterNode Lossy) Region(int seed, double loss, bool leaderRepair)
    {
        var cluster = new RegionCluster(seed, 10, 1, new LinkOptions { BandwidthBitsPerSecond = 100_000_000 }, new RegionOptions
        {
            ReplicationFactor = 5,
            LeaderRepair = leaderRepair,
            TokenInterval = TimeSpan.FromMilliseconds(200),
        });
        var lossy = cluster.Nodes.First(n => n.IsMember && n.Member!.Index != n.Member.Partition);
        cluster.Network.SetLink(lossy.Sim, new LinkOptions { BandwidthBitsPerSecond = 100_000_000, LossRate = loss });
        return (cluster, lossy);
    }

    private static long LeaderRepairs(RegionCluster cluster) => cluster.LiveMembers.Sum(n => n.Member!.FlowStatus?.Repair?.Sent ?? 0);

    private static long Resent(RegionCluster cluster) => cluster.LiveMembers.Sum(n => n.Member!.FlowStatus?.Repair?.Resent ?? 0);

    [Theory]
    [InlineData(2006)]
    [InlineData(7)]
    public void A_member_missing_what_its_partition_got_is_repaired_by_its_leader_not_by_the_sender(int seed)
    {
        var results = new List<(long OnStatus, long Leader, long Resent)>();
        foreach (bool leaderRepair in new[] { false, true })
        {
            var (cluster, _) = Region(seed, 0.02, leaderRepair);
            cluster.SendFromAll(Messages);
            bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(1));
            Assert.True(done, $"seed {seed}, leader repair {leaderRepair}: {cluster.CheckDelivery(Messages)}");
            Assert.Null(cluster.CheckDelivery(Messages)); // every message, once, in order, at every member
            results.Add((cluster.Senders[0].Sender!.RetransmittedOnStatus, LeaderRepairs(cluster), Resent(cluster)));
        }

        var (off, on) = (results[0], results[1]);
        output.WriteLine($"seed {seed}: off: sender resent {off.OnStatus} on reports; on: sender resent {on.OnStatus}, leaders repaired {on.Leader} (sent again {on.Resent})");
        Assert.Equal(0, off.Leader); // off: nothing but the sender repairs
        Assert.True(off.OnStatus > 20, $"seed {seed}: {off.OnStatus} resends with the leader's repair off (2 % loss on one link)");
        Assert.True(on.Leader >= off.OnStatus / 2, $"seed {seed}: the leader repaired {on.Leader}, the sender {off.OnStatus} without it");
        // What still reaches the sender: packets the leader lost too, and the tails of the lossy member's lost reports.
        Assert.True(on.OnStatus <= off.OnStatus / 4, $"seed {seed}: the sender still resent {on.OnStatus} (against {off.OnStatus} without the leader)");
    }

    [Theory]
    [InlineData(2006)]
    [InlineData(7)]
    public void A_repair_lost_on_the_way_is_sent_again_by_the_leader_after_the_hold_off_and_nothing_is_lost(int seed)
    {
        // A link losing 20 % loses about one leader repair in five: the member names those again after the hold-off,
        // and the leader sends them again from its copy (it may have let a packet of another class go meanwhile).
        var (cluster, lossy) = Region(seed, 0.20, leaderRepair: true);
        cluster.SendFromAll(Messages);
        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(2));
        var sender = cluster.Senders[0].Sender!;
        output.WriteLine($"seed {seed}: virtual {cluster.Network.Now}, leaders repaired {LeaderRepairs(cluster)} (sent again {Resent(cluster)}), "
            + $"sender resent {sender.RetransmittedOnStatus} on reports ({sender.RepairsTooLate} asked for after it released them), lossy member delivered {lossy.DeliveredFrom(cluster.Senders[0].Id)}");
        Assert.True(done, $"seed {seed}: {cluster.CheckDelivery(Messages)}");
        Assert.Null(cluster.CheckDelivery(Messages));
        Assert.True(Resent(cluster) > LeaderRepairs(cluster) / 20, $"seed {seed}: {Resent(cluster)} of {LeaderRepairs(cluster)} leader repairs sent again (a fifth are lost)");
    }

    /// <summary>A gap neither the sender nor a leader repairs (here the sender crashed right after its last packet,
    /// and leader repair is off) is pulled straight from a replica of its caching partition once it has been open four
    /// status intervals, not at the token's next round (30 s here): <c>LossRecovery.PullGaps</c>.</summary>
    [Theory]
    [InlineData(2006)]
    [InlineData(7)]
    public void A_gap_left_open_is_pulled_from_its_caching_partition_without_waiting_for_the_token(int seed)
    {
        const int Count = 2_000;
        var cluster = new RegionCluster(seed, 10, 1, new LinkOptions { BandwidthBitsPerSecond = 100_000_000 }, new RegionOptions
        {
            ReplicationFactor = 5,
            LeaderRepair = false,
            TokenInterval = TimeSpan.FromSeconds(30),
            RetireDepartedStreamsAfter = TimeSpan.FromMinutes(2),
        });
        var lossy = cluster.Nodes.First(n => n.IsMember && n.Member!.Index != n.Member.Partition);
        cluster.Network.SetLink(lossy.Sim, new LinkOptions { BandwidthBitsPerSecond = 100_000_000, LossRate = 0.05 });
        var sender = cluster.Senders[0];
        cluster.SendFromAll(Count);
        Assert.True(cluster.Network.RunUntil(() => sender.Sender!.LastSequence >= Count, TimeSpan.FromSeconds(10)));
        sender.Sim.Crash(); // its resends are gone: only the members hold the packets now
        var stream = lossy.Member!.Streams[sender.Id];
        ulong openAtCrash = stream.MaxSeen - stream.Delivered;
        bool done = cluster.Network.RunUntil(() => cluster.AllDelivered(Count), TimeSpan.FromSeconds(3));
        long pulls = cluster.LiveMembers.Sum(n => n.Member!.Recovery.GapPullsSent);
        output.WriteLine($"seed {seed}: at the crash the lossy member held {openAtCrash} packets behind a gap; gap pulls {pulls}; all delivered {done} at {cluster.Network.Now}");
        Assert.True(openAtCrash > 0, $"seed {seed}: no gap was open when the sender crashed");
        Assert.True(done, $"seed {seed}: {cluster.CheckDelivery(Count)}");
        Assert.Null(cluster.CheckDelivery(Count));
        Assert.True(pulls > 0);
    }

    /// <summary>A region of <see cref="Region"/> (seed 2006, 2 % loss, leader repair on) after every member has every
    /// message; returns the lossy member's partition leader, and a way to offer it a report of the lossy member's
    /// (position, highest packet, the gaps after the position), as that member would send it.</summary>
    private static (RegionMember Leader, Func<ulong, ulong, GapMap, bool, bool> Offer, RegionCluster Cluster, RegionClusterNode Lossy) DeliveredToTheLossyMember()
    {
        var (cluster, lossy) = Region(2006, 0.02, leaderRepair: true);
        cluster.SendFromAll(Messages);
        Assert.True(cluster.Network.RunUntil(() => cluster.AllDelivered(Messages), TimeSpan.FromMinutes(1)));
        var member = lossy.Member!;
        var leader = cluster.LiveMembers.Single(n => n.Member!.Index == member.Partition).Member!;
        var view = cluster.View;
        uint sender = cluster.Senders[0].Id;
        return (leader, (position, highest, missing, overflowed) => leader.FlowStatus!.OnMemberReport(lossy.Address, new FlowStatus(lossy.Id,
            view.Region.Value, view.ViewNumber, sender, member.Partition, Aggregate: false, Complete: false, position, 1 << 20, missing,
            highest, lossy.Id, position, Overflowed: overflowed)), cluster, lossy);
    }

    /// <summary>A member report whose packet numbers would wrap (a position near 2^64), or whose highest packet is below
    /// its position, repairs nothing and is counted (the first is refused before leader repair sees it, as far past
    /// what the leader has seen); the same report with sane numbers is repaired from.</summary>
    [Fact]
    public void A_report_whose_numbers_would_wrap_repairs_nothing_and_is_counted()
    {
        var (leader, offer, _, _) = DeliveredToTheLossyMember();
        var repair = leader.FlowStatus!.Repair!;
        bool Offer(ulong position, ulong highest) => offer(position, highest, 1UL, false);

        long sent = repair.Sent;
        Assert.True(Offer(Messages - 2, Messages - 3)); // its highest below its position
        Assert.Equal(1, repair.Implausible);
        Assert.Equal(sent, repair.Sent);

        Assert.True(Offer(Messages - 2, Messages)); // names packet Messages − 1, which the leader still holds
        Assert.Equal(1, repair.Implausible);
        Assert.Equal(sent + 1, repair.Sent);

        Assert.True(Offer(ulong.MaxValue - 10, ulong.MaxValue)); // the packets it names would wrap to 0, 1, ...
        Assert.Equal(1, leader.FlowStatus.ImplausibleReports); // refused before leader repair sees it: far past the leader
        Assert.Equal(1, repair.Implausible);
        Assert.Equal(sent + 1, repair.Sent);
    }

    /// <summary>A member report that puts the member further past its leader than any member can be (a forged or broken
    /// position or highest packet) is dropped and counted; before, the leader stored it, took every later real report of
    /// that member as overtaken until the next view, and so neither repaired it nor passed its gaps on.</summary>
    [Fact]
    public void A_report_far_past_what_its_leader_has_seen_is_refused_and_the_real_ones_still_count()
    {
        var (leader, offer, _, _) = DeliveredToTheLossyMember();
        var status = leader.FlowStatus!;
        ulong far = Messages + (2UL * (ulong)leader.Options.MaxHeldPackets) + 1_000;
        long malformed = leader.Drops[Core.Diagnostics.DropReason.Malformed];
        Assert.Equal(0, status.ImplausibleReports); // none in the run itself

        Assert.True(offer(far, far, 0UL, false));      // a position past the bound
        Assert.True(offer(Messages - 2, far, 0UL, false)); // a sane position, a highest past the bound
        Assert.Equal(2, status.ImplausibleReports);
        Assert.Equal(malformed + 2, leader.Drops[Core.Diagnostics.DropReason.Malformed]);

        long sent = status.Repair!.Sent;
        Assert.True(offer(Messages - 2, Messages, 1UL, false)); // the member's real report, naming packet Messages − 1: repaired
        Assert.Equal(sent + 1, status.Repair.Sent);
        Assert.Equal(2, status.ImplausibleReports);
    }

    /// <summary>A member report that says the member's receive queue overflowed makes its leader count the partition as
    /// congested for eight status intervals: it repairs nothing from that report or the next ones (the gaps go on to the
    /// sender, whose resends its congestion window paces), and repairs again once that time has passed.</summary>
    [Fact]
    public void A_report_of_an_overflowing_queue_leaves_the_gaps_to_the_sender_for_a_while()
    {
        var (leader, offer, cluster, lossy) = DeliveredToTheLossyMember();
        var repair = leader.FlowStatus!.Repair!;
        long sent = repair.Sent;
        lossy.Sim.Crash(); // its own reports (at its real position, past these) would make the offered ones look old

        Assert.True(offer(Messages - 2, Messages, 1UL, true)); // names packet Messages − 1, which the leader holds
        Assert.Equal(sent, repair.Sent);
        Assert.Equal(1, repair.LeftOnOverflow);

        cluster.Network.RunFor(7 * leader.Options.StatusInterval);
        Assert.True(offer(Messages - 2, Messages, 1UL, false)); // still within the time: still the sender's
        Assert.Equal(sent, repair.Sent);
        Assert.Equal(2, repair.LeftOnOverflow);

        cluster.Network.RunFor(2 * leader.Options.StatusInterval);
        Assert.True(offer(Messages - 2, Messages, 1UL, false));
        Assert.Equal(sent + 1, repair.Sent);
        Assert.Equal(2, repair.LeftOnOverflow);
    }

    /// <summary>Five senders into a 25-member region in the paper's cost model (receivers that take at most 10,000
    /// datagrams a second into a 1,000-datagram queue): the receive queues overflow, and what the members lack is
    /// congestion, not loss, and repairs wait behind up to 100 ms of datagrams. A leader sends a repair at most twice,
    /// then leaves it to the sender. Before, it sent each again every hold-off (at most 80 ms) while the member still
    /// named it, 93 % of its repairs went again, and the region carried 2,079 messages a second against 6,423 without
    /// leader repair (since the gap pulls wait out an overflowing queue, 7,577 against 8,025). And while the queues
    /// overflow a leader repairs nothing: with two copies at most, the leaders sent 79,629 repairs, the members got 80,805
    /// repairs of packets they already had (4,696 without leader repair), the sender resent as much as without them, and
    /// the region carried 0.97 of its rate without leader repair; with the rule 5,396 repairs and 1.00 (7,835 against
    /// 7,824 messages a second), and since gap pulls wait out 160 ms of overflow too, 10,263 repairs and 8,032 against
    /// 7,365 (one run's rate swings by a few per cent with any change of timing).</summary>
    [Fact]
    public void Senders_overflowing_the_receive_queues_run_about_as_fast_with_leader_repair_as_without()
    {
        const int Seed = 2031;
        var results = new List<(double Rate, long Sent, long Resent, long LeftOnOverflow, long SenderResends, long QueueDrops)>();
        foreach (bool leaderRepair in new[] { false, true })
        {
            var cluster = new RegionCluster(Seed, 25, 5, new RegionClusterOptions
            {
                Link = new LinkOptions { BandwidthBitsPerSecond = 100_000_000, Latency = TimeSpan.FromMilliseconds(0.05) },
                Region = new RegionOptions
                {
                    SenderWindow = 65_536, MaxHeldPackets = 4 * 65_536, ReceiveWindowBytes = 144_000, LeaderRepair = leaderRepair,
                },
                ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.1),
                ReceiveQueueLimit = 1000,
                PayloadBytes = 100,
            });
            cluster.SendFromAll();
            cluster.Network.RunFor(TimeSpan.FromSeconds(2));
            long before = cluster.DeliveredToAll();
            cluster.Network.RunFor(TimeSpan.FromSeconds(3));
            double rate = (cluster.DeliveredToAll() - before) / 3.0;
            var repairs = cluster.LiveMembers.Select(n => n.Member!.FlowStatus?.Repair).Where(r => r is not null).ToList();
            long senderResends = cluster.Senders.Sum(n => n.Sender!.RetransmittedOnStatus);
            output.WriteLine($"leader repair {leaderRepair}: {rate:F0} msgs/s, sender resends {senderResends}, repairs from peers a member already had {cluster.LiveMembers.Sum(n => n.Member!.RedundantRepairs)}, resends it already had {cluster.LiveMembers.Sum(n => n.Member!.RedundantResends)}");
            results.Add((rate, repairs.Sum(r => r!.Sent), repairs.Sum(r => r!.Resent), repairs.Sum(r => r!.LeftOnOverflow), senderResends,
                cluster.Network.Drops[Core.Diagnostics.DropReason.ReceiveBufferFull]));
        }

        var (off, on) = (results[0], results[1]);
        output.WriteLine($"seed {Seed}: without leader repair {off.Rate:F0} msgs/s; with it {on.Rate:F0} msgs/s, leaders sent {on.Sent} repairs ({on.Resent} again) and left {on.LeftOnOverflow} reports to the sender on overflow, receive-queue drops {on.QueueDrops}");
        Assert.True(on.QueueDrops > 0, "no member's queue overflowed: the test tests nothing");
        Assert.True(on.LeftOnOverflow > 0, "no leader left a report to the sender while the queues overflowed");
        Assert.True(on.Sent < off.SenderResends, $"leaders sent {on.Sent} repairs into overflowing queues, the sender resent {off.SenderResends} without them");
        Assert.True(on.Resent <= on.Sent - on.Resent, $"{on.Resent} of {on.Sent} repairs went again: more than once each");
        Assert.True(on.Rate >= 0.95 * off.Rate, $"seed {Seed}: {on.Rate:F0} msgs/s with leader repair against {off.Rate:F0} without");
    }

    [Fact]
    public void Off_no_member_repairs_on_reports()
    {
        var (cluster, _) = Region(2006, 0.02, leaderRepair: false);
        Assert.All(cluster.LiveMembers, n => Assert.Null(n.Member!.FlowStatus?.Repair));
    }
}
