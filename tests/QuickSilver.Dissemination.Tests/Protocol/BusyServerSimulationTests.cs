using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Simulation;

namespace QuickSilver.Dissemination.Tests.Protocol;

/// <summary>A server asked for more than its core can send (an uncapped `qs files serve` on a busy machine), on the
/// seeded simulated network: a <c>BusyCore</c> makes each datagram cost virtual time, so the server cannot keep the
/// rate it was given. The pacer must keep the schedule it announces what the core really does: no client NAKs a page
/// still queued at the server, and no page goes out twice.</summary>
public class BusyServerSimulationTests
{
    private const int Clients = 4;

    private static ServerOptions Uncapped() => new()
    {
        Pages = new PageOptions { PacketPayload = Wire.MaxPacketPayload, PageSize = 39 * Wire.MaxPacketPayload },
        DataChannels = 4,
        ChannelBytesPerSecond = 100_000_000, // 400 MB/s asked of the server
        StartWhenClients = Clients,
    };

    private static DisseminationSim Run(int seed, ServerOptions options, TimeSpan costPerDatagram, int files = 4, int fileBytes = 10_000_000)
    {
        var source = SimFixtures.Files(options, seed, Enumerable.Repeat(fileBytes, files).ToArray());
        var names = SimFixtures.Names(source);
        var sim = new DisseminationSim(seed, options, source, serverCostPerDatagram: costPerDatagram);
        for (int i = 0; i < Clients; i++)
        {
            sim.AddClient(names).Start();
        }

        Assert.True(sim.RunUntilComplete(TimeSpan.FromMinutes(5)), $"seed {seed}: incomplete");
        foreach (var c in sim.Clients)
        {
            SimFixtures.AssertIdentical(sim, c, names);
        }

        return sim;
    }

    private static double BytesSent(DisseminationSim sim) =>
        sim.Server.Counters.DataBytesSent / (double)sim.Files.Catalog.Files.Sum(f => f.Size);

    /// <summary>1,472-byte datagrams at 36.8 µs (a core that sends 40 MB/s, a tenth of what is asked) and at 147 µs
    /// (10 MB/s): the pacer slips, re-times its queue, and every page goes out once.</summary>
    [Theory]
    [InlineData(1, 368)]
    [InlineData(2, 368)]
    [InlineData(3, 1472)]
    public void APacedServerKeepsTheScheduleItAnnounces(int seed, long costTicks)
    {
        var cost = TimeSpan.FromTicks(costTicks);
        var sim = Run(seed, Uncapped(), cost);
        var c = sim.Server.Counters;
        Assert.True(c.PacingSlips > 0, $"seed {seed}: the pacer never slipped");
        Assert.Equal(0, c.EarlyNaks);
        Assert.Equal(0, c.NaksAccepted);
        Assert.All(sim.Clients, x => Assert.Equal(0, x.Client!.Counters.NaksSent)); // withdrawn pages are not NAKed either
        Assert.Equal(sim.Files.Catalog.ItemCount, c.Transmissions);
        Assert.True(BytesSent(sim) < 1.02, $"seed {seed}: {BytesSent(sim):F3} x the files sent");

        // The debt stays near MaxSendLag (the clients' NAK timers are not outrun), and the core is not left idle long:
        // the run takes at most 20 % longer than the core needs for the datagrams it sent.
        Assert.True(sim.ServerCore!.MaxAlarmDelay < TimeSpan.FromMilliseconds(200), $"seed {seed}: an alarm waited {sim.ServerCore.MaxAlarmDelay.TotalMilliseconds:F0} ms");
        var busy = cost * sim.ServerCore.Datagrams;
        var took = sim.Clients.Max(x => x.Client!.CompletedAt);
        Assert.True(took < busy * 1.2 + TimeSpan.FromSeconds(1), $"seed {seed}: took {took.TotalSeconds:F2} s for {busy.TotalSeconds:F2} s of sending");
    }

    /// <summary>The same run without pacing (a send lag allowed up to a minute, as before the pacer): the server falls
    /// seconds behind its announced schedule and clients NAK pages still queued at it. What the test above guards.</summary>
    [Fact]
    public void WithoutPacingClientsNakPagesStillQueued()
    {
        var sim = Run(1, Uncapped() with { MaxSendLag = TimeSpan.FromMinutes(1) }, TimeSpan.FromTicks(1472));
        var c = sim.Server.Counters;
        Assert.Equal(0, c.PacingSlips);
        Assert.True(c.EarlyNaks > 100, $"{c.EarlyNaks} early NAKs");
        Assert.True(sim.ServerCore!.MaxAlarmDelay > TimeSpan.FromSeconds(2));
    }

    /// <summary>A core that keeps the rate never slips: the pacer costs nothing when it is not needed.</summary>
    [Fact]
    public void ACoreThatKeepsTheRateIsNotSlowed()
    {
        var options = Uncapped() with { ChannelBytesPerSecond = 5_000_000 }; // 20 MB/s asked, 40 MB/s possible
        var sim = Run(4, options, TimeSpan.FromTicks(368), files: 2, fileBytes: 5_000_000);
        Assert.Equal(0, sim.Server.Counters.PacingSlips);
        Assert.Equal(options.PacketInterval, sim.Server.ChannelInterval);
        Assert.Equal(0, sim.Server.Counters.NaksAccepted);
    }
}
