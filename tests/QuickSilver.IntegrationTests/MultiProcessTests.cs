using System.Diagnostics;
using System.Globalization;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>Separate processes on this machine over loopback UDP and IP multicast: a standalone GMS, a publisher and
/// three receivers, all the built <c>qs</c> tool. Correctness only; the timeouts are hang guards.</summary>
public sealed class MultiProcessTests(ITestOutputHelper output)
{
    private const int Messages = 100_000;
    private const int Receivers = 3;
    private static readonly TimeSpan Guard = TimeSpan.FromMinutes(10);

    [Fact]
    public async Task A_gms_and_four_node_processes_deliver_every_message_to_every_receiver_in_order()
    {
        string gms = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{Tool.FreeUdpPort()}");
        string pool = string.Create(CultureInfo.InvariantCulture, $"239.254.{Random.Shared.Next(1, 250)}.0:{Random.Shared.Next(20_000, 60_000)}");
        string guard = ((int)Guard.TotalSeconds).ToString(CultureInfo.InvariantCulture);
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();
        var server = tools.Start(Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", guard));
        var (_, receivers) = await tools.StartLoadAsync(gms, Messages, Receivers, (int)Guard.TotalSeconds);

        await ToolSet.AssertReceiversGotEverythingAsync(receivers, "load", Messages, Guard, clock, output);

        Assert.False(server.HasLine("Unhandled"), server.Stderr);
        output.WriteLine($"{Messages:N0} messages to {Receivers} receiver processes in {clock.Elapsed.TotalSeconds:F1} s");
    }
}
