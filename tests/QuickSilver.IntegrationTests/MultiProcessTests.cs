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
        string count = Messages.ToString(CultureInfo.InvariantCulture);
        var processes = new List<Tool>();
        var clock = Stopwatch.StartNew();
        try
        {
            var server = Start(processes, Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", guard));
            // The publisher joins first: one that joins after the receivers stalls today (docs/quickstart.md, "Known
            // limits"). Each receiver is in a group of its own too, so "load" spans 1 + 3 regions.
            var publisher = Start(processes, Tool.Qs("node", "--gms", gms, "--join", "load", "--publish", count,
                "--wait-regions", (Receivers + 1).ToString(CultureInfo.InvariantCulture), "--seconds", guard, "--linger", guard));
            Assert.True(await publisher.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"publisher not ready: {publisher.Stderr}");
            var receivers = Enumerable.Range(0, Receivers).Select(i => Start(processes, Tool.Qs("node", "--gms", gms, "--join", "load",
                "--join", string.Create(CultureInfo.InvariantCulture, $"solo/{i}"), "--expect", count, "--seconds", guard))).ToList();

            foreach (var (receiver, i) in receivers.Select((r, i) => (r, i)))
            {
                bool exited = await receiver.WaitAsync(Guard - clock.Elapsed + TimeSpan.FromSeconds(30));
                output.WriteLine($"receiver {i} after {clock.Elapsed.TotalSeconds:F1} s: {Last(receiver.Stdout, 2)}");
                Assert.True(exited, $"receiver {i} did not finish within {Guard}: {Last(receiver.Stdout, 3)}");
                Assert.True(receiver.ExitCode == 0, $"receiver {i} exited with {receiver.ExitCode}: {Last(receiver.Stdout, 3)}\n{receiver.Stderr}");
                Assert.Contains($"final load delivered={Messages} anomalies=0", receiver.Stdout, StringComparison.Ordinal);
            }

            Assert.False(server.HasLine("Unhandled"), server.Stderr);
            output.WriteLine($"{Messages:N0} messages to {Receivers} receiver processes in {clock.Elapsed.TotalSeconds:F1} s");
        }
        finally
        {
            foreach (var p in processes)
            {
                p.Dispose();
            }
        }
    }

    private static Tool Start(List<Tool> processes, Tool tool)
    {
        processes.Add(tool);
        return tool;
    }

    private static string Last(string text, int lines) => string.Join('\n', text.Split('\n').TakeLast(lines));
}
