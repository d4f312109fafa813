using System.Diagnostics;
using System.Globalization;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// Issue 12, item 8, "a slow receiver", as far as it can be slow: one receiver process is frozen (SIGSTOP) mid-stream
/// for longer than the GMS's failure timeout, then let go (SIGCONT). The other receiver must still get every message,
/// in order: the frozen one holds the region's purge point and the sender's window back only until the GMS declares it
/// dead (5 s without a heartbeat); then the views leave it out and the stream goes on. Let go, it is told it was dropped
/// and registers again under a new id (docs/architecture.md, "Identity"). Correctness only; the guard is a hang guard.
/// </summary>
public sealed class SlowReceiverTests(ITestOutputHelper output)
{
    private const int Messages = 6_000_000; // several seconds of stream, so the freeze lands while it flows
    private static readonly TimeSpan Guard = TimeSpan.FromMinutes(10);
    private static readonly TimeSpan Frozen = TimeSpan.FromSeconds(8);

    [Fact]
    public async Task A_receiver_frozen_past_the_failure_timeout_does_not_stop_the_others()
    {
        string gms = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{Tool.FreeUdpPort()}");
        string guard = ((int)Guard.TotalSeconds).ToString(CultureInfo.InvariantCulture);
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();
        var server = tools.Start(Tool.Qs("gms", "--listen", gms, "--seconds", guard, "--log-level", "Information"));
        var (publisher, receivers) = await tools.StartLoadAsync(gms, Messages, 2, (int)Guard.TotalSeconds);
        var (healthy, slow) = (receivers[0], receivers[1]);
        Assert.True(await slow.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"receiver not ready: {slow.Stderr}");
        await Task.Delay(300); // mid-stream

        Signal("STOP", slow.ProcessId);
        Assert.False(healthy.HasExited, "the stream ended before the freeze: the test needs more messages");
        output.WriteLine($"froze receiver pid {slow.ProcessId} at {clock.Elapsed.TotalSeconds:F1} s: {slow.Tail(1)}");
        await Task.Delay(Frozen);
        Signal("CONT", slow.ProcessId);
        output.WriteLine($"let it go at {clock.Elapsed.TotalSeconds:F1} s; the healthy one: {healthy.Tail(1)}");

        await ToolSet.AssertReceiversGotEverythingAsync([healthy], "load", Messages, Guard, clock, output);
        Assert.Contains("removed (silent)", server.Stderr, StringComparison.Ordinal); // the GMS dropped the frozen one
        Assert.False(publisher.HasLine("Unhandled"), publisher.Stderr);
        output.WriteLine(string.Join('\n', server.Stderr.Split('\n').Where(l => l.Contains("GMS:", StringComparison.Ordinal))));
    }

    private static void Signal(string signal, int pid)
    {
        using var kill = Process.Start(new ProcessStartInfo("kill", ["-" + signal, pid.ToString(CultureInfo.InvariantCulture)]) { UseShellExecute = false })!;
        kill.WaitForExit();
        Assert.Equal(0, kill.ExitCode);
    }
}
