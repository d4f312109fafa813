using QuickSilver.Aer.Simulation;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using Xunit.Abstractions;

namespace QuickSilver.Aer.Tests;

/// <summary>Whole AER sessions on a simulated wide-area tree (virtual time, seeded loss per link): delivery, repair
/// servers crashing or missing, NAK suppression and aggregation, bounded caches, NCA nominee choice and failover,
/// hostile input. A failing run prints its seed and every node's state.</summary>
public sealed class AerScenarioTests(ITestOutputHelper output)
{
    private AerScenarioResult Run(AerScenarioOptions options, Action<AerScenario>? setup = null)
    {
        var scenario = new AerScenario(options);
        setup?.Invoke(scenario);
        var result = scenario.Run();
        output.WriteLine($"seed {options.Seed}: done {result.AllDelivered} at {result.Finished.TotalSeconds:0.00} s, naks at source {result.NaksAtSource}, " +
            $"repair latency {result.MeanRepairLatencyMs:0.0} ms over {result.RepairSamples}, max cache {result.MaxRepairCacheBytes} B, nominees {string.Join(" ", result.NomineeHistory)}");
        output.WriteLine(result.Totals.ToString());
        if (!result.AllDelivered || result.OrderViolations != 0)
        {
            output.WriteLine(result.Describe);
        }

        return result;
    }

    private static void AssertEveryoneGotEverything(AerScenarioResult result, int messages)
    {
        Assert.True(result.AllDelivered, "not every live receiver got every message within the time limit");
        Assert.All(result.DeliveredPerReceiver, d => Assert.Equal(messages, d));
        Assert.Equal(0, result.OrderViolations);
        Assert.Equal(0, result.Totals.Unrecoverable);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Every_receiver_gets_every_message_once_in_order_under_correlated_loss(int seed)
    {
        var result = Run(new AerScenarioOptions { Seed = seed, Messages = 1000 });
        AssertEveryoneGotEverything(result, 1000);
        Assert.True(result.Totals.RepairsReceived > 50); // the loss was real
    }

    [Fact]
    public void Repair_servers_crashing_mid_stream_lose_nothing_and_receivers_fall_back_to_the_source()
    {
        var options = new AerScenarioOptions
        {
            Seed = 4,
            Messages = 1500,
            CrashRepairServers = new HashSet<int> { 0, 2 },
            CrashAt = TimeSpan.FromSeconds(2),
        };
        AerScenario? scenario = null;
        var result = Run(options, s => scenario = s);
        AssertEveryoneGotEverything(result, 1500);
        var source = scenario!.SourceAddress;
        var site0 = scenario.Receivers.Where((_, i) => i < options.ReceiversPerSite);
        Assert.All(site0, r => Assert.Equal(source, r.CurrentUpstream));
        var site1 = scenario.Receivers.Skip(options.ReceiversPerSite).Take(options.ReceiversPerSite);
        Assert.All(site1, r => Assert.NotEqual(source, r.CurrentUpstream)); // its repair server is alive
    }

    [Fact]
    public void Works_with_repair_servers_in_some_sites_only_and_with_none()
    {
        AssertEveryoneGotEverything(Run(new AerScenarioOptions { Seed = 5, Messages = 800, SitesWithoutRepairServer = new HashSet<int> { 1 } }), 800);
        AssertEveryoneGotEverything(Run(new AerScenarioOptions { Seed = 5, Messages = 800, RepairServers = false }), 800);
    }

    [Fact]
    public void Repair_servers_aggregate_naks_and_subcast_naks_suppress_them()
    {
        var baseline = new AerScenarioOptions { Seed = 6, Sites = 3, ReceiversPerSite = 8, Messages = 1000 };
        var withServers = Run(baseline);
        var without = Run(baseline with { RepairServers = false });
        var noSuppression = Run(baseline with { Aer = new AerOptions { NakSuppression = false } });
        AssertEveryoneGotEverything(withServers, 1000);
        AssertEveryoneGotEverything(without, 1000);
        AssertEveryoneGotEverything(noSuppression, 1000);

        // Aggregation: the source hears one NAK per site per loss, not one per receiver.
        Assert.True(withServers.NaksAtSource * 4 < without.NaksAtSource, $"{withServers.NaksAtSource} vs {without.NaksAtSource} NAKs at the source");

        // Suppression: receivers that heard their repair server's NAK subcast kept theirs.
        Assert.True(withServers.Totals.NaksSuppressed > 100);
        Assert.Equal(0, noSuppression.Totals.NaksSuppressed);
        Assert.True(withServers.Totals.NaksSent * 10 < noSuppression.Totals.NaksSent * 8,
            $"{withServers.Totals.NaksSent} NAKs sent with suppression vs {noSuppression.Totals.NaksSent} without");
    }

    [Fact]
    public void Repair_servers_cut_repair_latency()
    {
        var baseline = new AerScenarioOptions { Seed = 7, Messages = 1000 };
        var with = Run(baseline);
        var without = Run(baseline with { RepairServers = false });
        Assert.True(with.MeanRepairLatencyMs < without.MeanRepairLatencyMs * 0.8, $"{with.MeanRepairLatencyMs:0.0} ms vs {without.MeanRepairLatencyMs:0.0} ms");
    }

    [Fact]
    public void A_repair_server_forwards_what_it_fetched_to_the_children_it_suppressed()
    {
        // Loss only on the backbone, above the repair servers: every loss is fetched from the source by the repair
        // server, whose NAK subcast suppressed its receivers; they get the repair when it passes, without NAKing again.
        var result = Run(new AerScenarioOptions
        {
            Seed = 14,
            Messages = 1000,
            AccessLink = new TreeLink { Latency = TimeSpan.FromMilliseconds(2), BandwidthBitsPerSecond = 100_000_000 },
        });
        AssertEveryoneGotEverything(result, 1000);
        Assert.True(result.Totals.RepairsForwarded > 30, $"{result.Totals.RepairsForwarded} repairs forwarded");
        Assert.True(result.Totals.NakTimeouts * 10 < result.Totals.RepairsReceived, $"{result.Totals.NakTimeouts} NAK timers expired for {result.Totals.RepairsReceived} repairs");
        Assert.True(result.MeanRepairLatencyMs < 1.5 * 86, $"mean repair latency {result.MeanRepairLatencyMs:0.0} ms for a round trip of 86 ms");
    }

    [Fact]
    public void Repair_caches_stay_within_their_byte_bound_and_evicted_packets_are_fetched_again()
    {
        const long bound = 40_000; // about 38 packets of 1,032 bytes
        var result = Run(new AerScenarioOptions { Seed = 8, Messages = 1500, Aer = new AerOptions { RepairCacheBytes = bound } });
        AssertEveryoneGotEverything(result, 1500);
        Assert.InRange(result.MaxRepairCacheBytes, bound / 2, bound);
        Assert.True(result.Totals.CacheEvictions > 1000);
    }

    [Fact]
    public void The_nominee_is_the_worst_receiver()
    {
        // Site 1's backbone link is longer and lossier: its receivers have the highest g = T·√p.
        var samples = new List<NetAddress?>();
        var result = Run(new AerScenarioOptions
        {
            Seed = 9,
            Messages = 1500,
            SiteBackboneLinks = new Dictionary<int, TreeLink> { [1] = new() { Latency = TimeSpan.FromMilliseconds(60), LossRate = 0.08 } },
        }, s => s.Tick += () => samples.Add(s.Sender.Nominee));
        AssertEveryoneGotEverything(result, 1500);
        var nominated = samples.Where(n => n is not null).Select(n => result.SiteOf[n!.Value]).ToList();
        double inSite1 = nominated.Count(site => site == 1) / (double)nominated.Count;
        output.WriteLine($"nominee in site 1 for {inSite1:P0} of the run");
        Assert.True(inSite1 > 0.8, $"the nominee was in the worst site for {inSite1:P0} of the run");
    }

    [Fact]
    public void A_crashed_nominee_is_replaced_and_the_others_get_everything()
    {
        var result = Run(new AerScenarioOptions { Seed = 10, Messages = 1500, CrashNomineeAt = TimeSpan.FromSeconds(3) });
        AssertEveryoneGotEverything(result, 1500);
        Assert.NotNull(result.RemovedNominee);
        Assert.NotEqual(result.RemovedNominee, result.NomineeHistory[^1]);
    }

    [Fact]
    public void A_leaving_nominee_is_replaced()
    {
        var result = Run(new AerScenarioOptions { Seed = 11, Messages = 1500, LeaveNomineeAt = TimeSpan.FromSeconds(3) });
        AssertEveryoneGotEverything(result, 1500);
        Assert.NotNull(result.RemovedNominee);
        Assert.NotEqual(result.RemovedNominee, result.NomineeHistory[^1]);
    }

    [Fact]
    public void Malformed_and_hostile_datagrams_are_dropped_and_counted()
    {
        AerScenario? scenario = null;
        TreeTransport? attacker = null;
        var random = new Random(12);
        var buffer = new byte[1400];
        var result = Run(new AerScenarioOptions { Seed = 12, Messages = 800 }, s =>
        {
            scenario = s;
            attacker = s.Tree.Attach(s.Network.AddNode(), 0, new TreeLink());
            var targets = s.Layers.Count();
            s.Tick += () =>
            {
                for (int i = 0; i < 5; i++)
                {
                    var to = i == 0 ? AerScenario.Group : new NetAddress(0x7F010000u | (uint)random.Next(targets), 7000);
                    attacker.TrySend(to, Hostile(random, buffer, s.SourceAddress));
                }
            };
        });
        AssertEveryoneGotEverything(result, 800);
        var drops = new DropCounters();
        long malformed = scenario!.Layers.Sum(l => l.Counters.Drops[DropReason.Malformed]);
        long notAMember = scenario.Layers.Sum(l => l.Counters.Drops[DropReason.NotAMember]);
        long wrongSession = scenario.Layers.Sum(l => l.Counters.Drops[DropReason.NotForThisNode]);
        output.WriteLine($"malformed {malformed}, not a member {notAMember}, other session {wrongSession}");
        Assert.True(malformed > 100 && notAMember > 100 && wrongSession > 10);
    }

    /// <summary>One hostile datagram: random bytes under a valid header, a forged data packet or SPM, an absurd NAK, a
    /// packet for another session.</summary>
    private static ReadOnlySpan<byte> Hostile(Random random, byte[] buffer, NetAddress source)
    {
        int kind = random.Next(5);
        switch (kind)
        {
            case 0:
            {
                int length = random.Next(16, 80);
                random.NextBytes(buffer.AsSpan(0, length));
                new PacketHeader((PacketType)(7 + random.Next(7)), 0, (ushort)length, (ushort)random.Next(4)).Write(buffer);
                System.Buffers.Binary.BinaryPrimitives.WriteUInt32LittleEndian(buffer.AsSpan(PacketHeader.Size), AerScenario.Session);
                return buffer.AsSpan(0, length);
            }

            case 1:
                return buffer.AsSpan(0, AerWire.WriteDataHeader(buffer, new AerData(AerScenario.Session, random.Next(1, 5000), 0, false), 100));
            case 2:
                return buffer.AsSpan(0, AerWire.WriteSpm(buffer, new SourcePathMessage(AerScenario.Session, source, new NetAddress(1, 1), 1, 1, 1_000_000, 1, 0)));
            case 3:
                return buffer.AsSpan(0, AerWire.WriteNak(buffer, new AerNak(AerScenario.Session, long.MaxValue / 2, false)));
            default:
                return buffer.AsSpan(0, AerWire.WriteNak(buffer, new AerNak(AerScenario.Session + 1, 5, false)));
        }
    }

    [Fact]
    public void A_seed_replays_the_same_run()
    {
        var a = Run(new AerScenarioOptions { Seed = 13, Messages = 500 });
        var b = Run(new AerScenarioOptions { Seed = 13, Messages = 500 });
        Assert.Equal(a.Finished, b.Finished);
        Assert.Equal(a.Totals.ToString(), b.Totals.ToString());
    }
}
