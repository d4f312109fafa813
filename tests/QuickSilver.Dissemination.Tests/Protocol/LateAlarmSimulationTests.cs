using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Dissemination.Tests.Protocol;

/// <summary>A client whose core is held up (a loaded machine deschedules the process): its NAK alarm fires late, and
/// the packets that arrived meanwhile are still queued behind it. <see cref="ClientOptions.LateAlarm"/>: a late alarm
/// is put off once, so the queue is read before the client decides what it lacks; once only, so a core late at every
/// alarm still NAKs. Seeded simulated network, virtual time (<see cref="BusyCore.Stall"/>).</summary>
public class LateAlarmSimulationTests
{
    private const int FileBytes = 600_000; // 20 pages of 30,000 B at 400,000 B/s: 75 ms a page

    private static (DisseminationSim Sim, SimClient Client, string[] Names) Start(int seed, ClientOptions options, LinkOptions? link = null)
    {
        var serverOptions = SimFixtures.FastServer(1);
        var files = SimFixtures.Files(serverOptions, seed, FileBytes);
        var sim = new DisseminationSim(seed, serverOptions, files);
        var names = SimFixtures.Names(files);
        var client = sim.AddClient(names, options, link, costPerDatagram: TimeSpan.Zero);

        // Reading a datagram costs the client 0.5 ms (it keeps up with 800 a second): after a stall its queue takes a
        // while to drain, as a real core's quantum-bounded I/O rounds do, so a late alarm fires before the queue is read.
        client.Node.ProcessingCostPerPacket = TimeSpan.FromMilliseconds(0.5);
        client.Start();
        return (sim, client, names);
    }

    /// <summary>Stalls the client's core for 150 ms part way through a page: its NAK time falls in the stall.</summary>
    private static void StallMidStream(DisseminationSim sim, SimClient client)
    {
        // Until a few pages are held and the client is part way through the next one.
        while (client.Client!.Counters.PagesDecoded < 3 && sim.Network.Now < TimeSpan.FromSeconds(10))
        {
            sim.Network.RunFor(TimeSpan.FromMilliseconds(1));
        }

        sim.Network.RunFor(TimeSpan.FromMilliseconds(30));
        client.Core!.Stall(TimeSpan.FromMilliseconds(150));
    }

    [Theory]
    [InlineData(61)]
    [InlineData(62)]
    [InlineData(63)]
    public void A_late_alarm_is_put_off_so_the_packets_queued_behind_it_are_read_first(int seed)
    {
        var (sim, client, names) = Start(seed, SimFixtures.FastClient());
        StallMidStream(sim, client);
        Assert.True(sim.RunUntilComplete(TimeSpan.FromSeconds(30)), $"seed {seed}: incomplete");
        SimFixtures.AssertIdentical(sim, client, names);
        var c = client.Client!.Counters;
        Assert.True(c.LateAlarms >= 1, $"seed {seed}: no late alarm seen");
        Assert.Equal(0, c.NaksSent); // no link loss: every packet was queued, none lost
        Assert.Equal(0, sim.Server.Counters.NaksAccepted);
    }

    /// <summary>The control: the same stall with the rule switched off (an alarm is never "late"): the client NAKs
    /// pages whose packets were only waiting in its queue. What the test above guards.</summary>
    [Theory]
    [InlineData(61)]
    [InlineData(62)]
    [InlineData(63)]
    public void Without_putting_off_a_late_alarm_the_client_naks_packets_it_has_queued(int seed)
    {
        var (sim, client, names) = Start(seed, SimFixtures.FastClient() with { LateAlarm = TimeSpan.FromMinutes(1) });
        StallMidStream(sim, client);
        Assert.True(sim.RunUntilComplete(TimeSpan.FromSeconds(30)), $"seed {seed}: incomplete");
        SimFixtures.AssertIdentical(sim, client, names);
        Assert.Equal(0, client.Client!.Counters.LateAlarms);
        Assert.True(client.Client.Counters.NaksSent > 0, $"seed {seed}: no NAK sent");
    }

    /// <summary>A core late at every alarm (stalled again each time it puts one off) with packets really lost: the
    /// alarm is put off once, then the client NAKs and completes. Put off every time, it would never NAK.</summary>
    [Theory]
    [InlineData(71)]
    [InlineData(72)]
    public void A_core_late_at_every_alarm_still_naks_what_is_lost(int seed)
    {
        var (sim, client, names) = Start(seed, SimFixtures.FastClient(), SimFixtures.Lossy(0.05));
        StallMidStream(sim, client);
        long seen = 0;
        while (!client.Client!.IsComplete && sim.Network.Now < TimeSpan.FromSeconds(60))
        {
            sim.Network.RunFor(TimeSpan.FromMilliseconds(1));
            if (client.Client.Counters.LateAlarms > seen)
            {
                // It just put an alarm off: hold the core up past that alarm too.
                seen = client.Client.Counters.LateAlarms;
                client.Core!.Stall(TimeSpan.FromMilliseconds(50));
            }
        }

        Assert.True(client.Client.IsComplete, $"seed {seed}: incomplete at {sim.Network.Now}");
        SimFixtures.AssertIdentical(sim, client, names);
        Assert.True(client.Client.Counters.LateAlarms >= 1, $"seed {seed}: no late alarm seen");
        Assert.True(client.Client.Counters.NaksSent > 0, $"seed {seed}: lost packets but no NAK");
    }
}
