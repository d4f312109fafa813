using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// A member whose application reads at a tenth of the sender's rate (docs/qsm.md, "Slow receivers"), in the whole stack
/// on virtual time. With back-pressure (the default) everyone goes at its speed; with
/// <see cref="SlowReceiverPolicy.SkipAhead"/> the sender tells it to skip ahead once it has held the sender back for
/// <see cref="RegionOptions.LaggardTimeout"/>: the other members get every message at the sender's rate, the slow one
/// gets what it can read, in order, and is told how many it lost, and no node's memory grows.
/// </summary>
public sealed class SlowReceiverSimulationTests(ITestOutputHelper output)
{
    private const int Messages = 8_000;
    private const int Rate = 8_000;     // messages a second published
    private const int SlowDrain = 4;    // messages the slow reader takes every 5 ms: 800/s, a tenth of the rate
    private const int MaxHeld = 256;    // packets of up to 16 KiB (16 messages of 1,000 B)

    [Theory]
    [InlineData(SlowReceiverPolicy.SkipAhead, 1201)]
    [InlineData(SlowReceiverPolicy.SkipAhead, 1202)]
    [InlineData(SlowReceiverPolicy.BackPressure, 1201)]
    public void A_reader_at_a_tenth_of_the_rate_holds_the_others_back_only_under_back_pressure(SlowReceiverPolicy policy, int seed)
    {
        var cluster = NewCluster(seed, policy);
        var all = cluster.AddNodes(4);
        cluster.Join(all, "quotes");
        cluster.SettleViews("quotes", all);
        var (sender, slow) = (all[0], all[3]);
        var reader = slow.Groups["quotes"];
        reader.ReceiveBuffer = 20;

        int maxHeld = 0;
        bool draining = true;
        var tick = new Alarm(self =>
        {
            maxHeld = Math.Max(maxHeld, all.Max(n => n.Region!.Member!.HeldPackets));
            if (draining)
            {
                reader.Drain(SlowDrain, slow.GroupLayer!);
            }

            slow.Sim.ScheduleAfter(self, TimeSpan.FromMilliseconds(5));
        });
        slow.Sim.TryPost(_ => slow.Sim.ScheduleAfter(tick, TimeSpan.FromMilliseconds(5)), null);
        sender.PublishNumbered("quotes", Messages, size: 1_000, perSecond: Rate);

        // Publishing takes 1 s. The slow reader alone would need 10 s.
        var others = all.Take(3).ToList();
        bool othersDone = cluster.Network.RunUntil(() => others.All(n => n.Groups["quotes"].CountFrom(sender.Id) >= Messages), TimeSpan.FromSeconds(3));
        var regionSender = sender.Region!.Senders.Values.Single();
        output.WriteLine($"{policy}, seed {seed}, at {cluster.Network.Now}: others {string.Join(", ", others.Select(n => n.Groups["quotes"].CountFrom(sender.Id)))}; " +
            $"slow read {reader.CountFrom(sender.Id)}, skipped {reader.Skipped}, queued {reader.Queued}; skip notices {regionSender.LaggardsSkipped}; held max {maxHeld}");
        if (policy == SlowReceiverPolicy.BackPressure)
        {
            // Everyone waits for the slow reader: after 3 s of virtual time about 2,400 messages have gone, not 8,000.
            Assert.False(othersDone, $"seed {seed}: the others got every message although the slow reader held the sender back");
            Assert.Equal(0, regionSender.LaggardsSkipped);
            Assert.Equal(0, reader.Skipped);
            return;
        }

        Assert.True(othersDone, $"seed {seed}: {string.Join("; ", all.Select(n => $"node {n.Id}: {n.Groups["quotes"].CountFrom(sender.Id)} ({n.Region!.Member!.Describe()})"))}");
        Assert.True(regionSender.LaggardsSkipped > 0, $"seed {seed}: the slow member was never told to skip");

        // The slow one: once it has read what it holds, every message was either read, in order, or counted as skipped.
        bool slowDone = cluster.Network.RunUntil(() => reader.CountFrom(sender.Id) + reader.Skipped >= Messages && reader.Queued == 0, TimeSpan.FromSeconds(10));
        var got = reader.Received.GetValueOrDefault(sender.Id) ?? [];
        output.WriteLine($"{policy}, seed {seed}, at {cluster.Network.Now}: slow read {got.Count}, skipped {reader.Skipped}; held max {maxHeld}");
        Assert.True(slowDone, $"seed {seed}: slow read {got.Count}, skipped {reader.Skipped}, queued {reader.Queued}; {slow.Region!.Member!.Describe()}");
        Assert.Equal(Messages, got.Count + reader.Skipped);
        Assert.True(reader.Skipped > 0);
        Assert.Equal(got.Order(), got);                    // in order
        Assert.Equal(got.Count, got.Distinct().Count());   // and each once
        Assert.True(slow.Region!.Member!.SkipNotices > 0);

        // Everyone else got every message, in order, each once.
        foreach (var node in others)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["quotes"].Received[sender.Id]);
        }

        // Memory stayed bounded at every node, and nothing was dropped at the bound.
        Assert.True(maxHeld <= MaxHeld, $"seed {seed}: a member held {maxHeld} packets, beyond MaxHeldPackets = {MaxHeld}");
        Assert.All(all, n => Assert.Equal(0, n.Region!.Member!.Drops[DropReason.ReceiveBufferFull]));
    }

    [Theory]
    [InlineData(SlowReceiverPolicy.SkipAhead)]
    [InlineData(SlowReceiverPolicy.BackPressure)]
    public void A_laggard_alone_in_its_region_is_told_to_skip_when_the_groups_other_regions_wait_for_it(SlowReceiverPolicy policy)
    {
        // The slow reader is also in a group of its own, so its region of overlap is its own: no member of its region to be
        // compared with. The group's messages wait in the sender's outbox for that region alone while the other region's
        // sender has room: that is what singles it out.
        const int Seed = 1204;
        const int Messages = 24_000; // 3 s of publishing: past the lone region's window (4,096) and the group's outbox (4,096)
        var cluster = NewCluster(Seed, policy);
        var all = cluster.AddNodes(4);
        var (sender, slow) = (all[0], all[3]);
        cluster.Join(all.Take(3), "quotes");
        cluster.Join([slow], "quotes", "solo");
        cluster.SettleViews("quotes", all);
        var reader = ReadSlowly(slow, SlowDrain);
        sender.PublishNumbered("quotes", Messages, size: 1_000, perSecond: Rate);

        var others = all.Take(3).ToList();
        bool othersDone = cluster.Network.RunUntil(() => others.All(n => n.Groups["quotes"].CountFrom(sender.Id) >= Messages), TimeSpan.FromSeconds(4));
        var senders = sender.Region!.Senders.Values.ToList();
        output.WriteLine($"seed {Seed}, at {cluster.Network.Now}: regions {senders.Count}, others {string.Join(", ", others.Select(n => n.Groups["quotes"].CountFrom(sender.Id)))}; " +
            $"slow read {reader.CountFrom(sender.Id)}, skipped {reader.Skipped}; skip notices {string.Join("/", senders.Select(x => x.LaggardsSkipped))}");
        Assert.Equal(2, senders.Count);
        if (policy == SlowReceiverPolicy.BackPressure)
        {
            Assert.False(othersDone, $"seed {Seed}: the others were not held back by the laggard's region");
            return;
        }

        Assert.True(senders.Sum(x => x.LaggardsSkipped) > 0);
        Assert.True(othersDone, $"seed {Seed}: the others waited for the laggard alone in its region");
        Assert.True(cluster.Network.RunUntil(() => reader.CountFrom(sender.Id) + reader.Skipped >= Messages && reader.Queued == 0, TimeSpan.FromSeconds(30)));
        Assert.Equal(Messages, reader.CountFrom(sender.Id) + reader.Skipped);
        Assert.True(reader.Skipped > 0);
        foreach (var node in others)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["quotes"].Received[sender.Id]);
        }
    }

    [Fact]
    public void Equally_slow_members_are_never_told_to_skip()
    {
        // Every member reads at the same pace, slower than the sender: no one is behind the others, so none is a laggard,
        // and back-pressure paces the sender as it would without the option.
        const int Seed = 1203;
        var cluster = NewCluster(Seed, SlowReceiverPolicy.SkipAhead);
        var all = cluster.AddNodes(4);
        cluster.Join(all, "quotes");
        cluster.SettleViews("quotes", all);
        var sender = all[0];
        var readers = all.Skip(1).ToList();
        foreach (var node in readers)
        {
            ReadSlowly(node, 16); // 3,200/s each, 40 % of the rate
        }

        sender.PublishNumbered("quotes", Messages, size: 1_000, perSecond: Rate);
        bool done = cluster.Network.RunUntil(() => readers.All(n => n.Groups["quotes"].CountFrom(sender.Id) >= Messages), TimeSpan.FromSeconds(20));
        output.WriteLine($"seed {Seed}, at {cluster.Network.Now}: read {string.Join(", ", readers.Select(n => n.Groups["quotes"].CountFrom(sender.Id)))}");
        Assert.True(done, $"seed {Seed}: read {string.Join(", ", readers.Select(n => n.Groups["quotes"].CountFrom(sender.Id)))}");
        Assert.Equal(0, sender.Region!.Senders.Values.Single().LaggardsSkipped);
        Assert.All(readers, n => Assert.Equal(0, n.Groups["quotes"].Skipped));
        Assert.All(readers, n => Assert.Equal(Enumerable.Range(1, Messages), n.Groups["quotes"].Received[sender.Id]));
    }

    private static NodeCluster NewCluster(int seed, SlowReceiverPolicy policy) => new(seed, LinkOptions.LossyLan, new RegionOptions
    {
        TokenInterval = TimeSpan.FromMilliseconds(100),
        SenderWindow = 64,
        MaxHeldPackets = MaxHeld,
        SlowReceivers = policy,
        LaggardTimeout = TimeSpan.FromMilliseconds(200),
    });

    /// <summary>The node's application reads group "quotes" through a 20-message queue, <paramref name="perTick"/>
    /// messages every 5 ms.</summary>
    private static RecordingGroup ReadSlowly(NodeCluster.Node node, int perTick)
    {
        var reader = node.Groups["quotes"];
        reader.ReceiveBuffer = 20;
        var tick = new Alarm(self =>
        {
            reader.Drain(perTick, node.GroupLayer!);
            node.Sim.ScheduleAfter(self, TimeSpan.FromMilliseconds(5));
        });
        node.Sim.TryPost(_ => node.Sim.ScheduleAfter(tick, TimeSpan.FromMilliseconds(5)), null);
        return reader;
    }
}
