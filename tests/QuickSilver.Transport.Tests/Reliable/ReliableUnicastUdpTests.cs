using QuickSilver.Core;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Transport.Tests.Reliable;

/// <summary>The simulation's reliable-transfer test, over real loopback UDP between two cores, with received
/// datagrams dropped on purpose at each end (10 % per end, so about 19 % of round trips lose a datagram). Checks delivery, never speed (generous hang guard only).</summary>
public sealed class ReliableUnicastUdpTests
{
    [Fact]
    public async Task Hundred_thousand_messages_arrive_once_and_in_order_over_real_udp_with_injected_loss()
    {
        using var coreA = QuickSilverCore.Start(new CoreOptions { Name = "reliable-a" });
        using var coreB = QuickSilverCore.Start(new CoreOptions { Name = "reliable-b" });
        var udpA = coreA.OpenUdp(new UdpEndpointOptions { InjectedLossRate = 0.1, InjectedLossSeed = 1 });
        var udpB = coreB.OpenUdp(new UdpEndpointOptions { InjectedLossRate = 0.1, InjectedLossSeed = 2 });
        var a = await coreA.InvokeAsync(() => Attach(udpA, coreA, 1));
        var b = await coreB.InvokeAsync(() => Attach(udpB, coreB, 2));
        ReliableTransferScenario? scenario = null;

        // The scenario subscribes to both endpoints' events: create it where neither core is delivering yet.
        coreA.Invoke(() => coreB.Invoke(() => scenario = new ReliableTransferScenario(a, b, 100_000)));
        coreA.Invoke(() => scenario!.Pump());

        var deadline = DateTime.UtcNow + TimeSpan.FromMinutes(5);
        while (!scenario!.Done && scenario.Violation is null && DateTime.UtcNow < deadline)
        {
            await Task.Delay(20);
        }

        Assert.Null(scenario.Violation);
        Assert.Equal(100_000, scenario.Received);
        Assert.True(coreA.Counters.Drops[DropReason.InjectedLoss] + coreB.Counters.Drops[DropReason.InjectedLoss] > 5_000,
            "the injected loss did not happen");
    }

    private static TestEndpoint Attach(UdpEndpoint udp, QuickSilverCore core, uint epoch) => new(udp, core, epoch);
}
