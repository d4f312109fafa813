using System.Diagnostics;
using System.Globalization;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>The processes one test started; disposing kills whichever still run.</summary>
internal sealed class ToolSet : IDisposable
{
    private readonly List<Tool> _tools = new();

    public Tool Start(Tool tool)
    {
        _tools.Add(tool);
        return tool;
    }

    /// <summary>A <c>qs node</c> publisher of <paramref name="messages"/> numbered messages in group "load" and
    /// <paramref name="receivers"/> receivers expecting them all, on the GMS at <paramref name="gms"/>, each stopped after
    /// <paramref name="guardSeconds"/>. The publisher joins first and waits until "load" spans 1 + receivers regions (each
    /// receiver is in a group of its own too): one that joins after the receivers stalls today (docs/quickstart.md,
    /// "Known limits").</summary>
    public async Task<(Tool Publisher, List<Tool> Receivers)> StartLoadAsync(string gms, int messages, int receivers, int guardSeconds, string gmsOption = "--gms")
    {
        string count = messages.ToString(CultureInfo.InvariantCulture);
        string guard = guardSeconds.ToString(CultureInfo.InvariantCulture);
        var publisher = Start(Tool.Qs("node", gmsOption, gms, "--join", "load", "--publish", count,
            "--wait-regions", (receivers + 1).ToString(CultureInfo.InvariantCulture), "--seconds", guard, "--linger", guard));
        Assert.True(await publisher.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"publisher not ready: {publisher.Stderr}");
        var started = Enumerable.Range(0, receivers).Select(i => Start(Tool.Qs("node", gmsOption, gms, "--join", "load",
            "--join", string.Create(CultureInfo.InvariantCulture, $"solo/{i}"), "--expect", count, "--seconds", guard))).ToList();
        return (publisher, started);
    }

    /// <summary>Waits for each <c>qs node --expect</c> receiver to exit, within <paramref name="guard"/> of
    /// <paramref name="clock"/>'s start (a hang guard), and asserts it exited 0 having got exactly
    /// <paramref name="messages"/> in <paramref name="group"/>, in order.</summary>
    public static async Task AssertReceiversGotEverythingAsync(IReadOnlyList<Tool> receivers, string group, int messages, TimeSpan guard,
        Stopwatch clock, ITestOutputHelper output)
    {
        for (int i = 0; i < receivers.Count; i++)
        {
            var receiver = receivers[i];
            bool exited = await receiver.WaitAsync(guard - clock.Elapsed + TimeSpan.FromSeconds(30));
            output.WriteLine($"receiver {i} after {clock.Elapsed.TotalSeconds:F1} s: {receiver.Tail(2)}");
            Assert.True(exited, $"receiver {i} did not finish within {guard}: {receiver.Tail(3)}");
            Assert.True(receiver.ExitCode == 0, $"receiver {i} exited with {receiver.ExitCode}: {receiver.Tail(3)}\n{receiver.Stderr}");
            Assert.Contains($"final {group} delivered={messages} anomalies=0", receiver.Stdout, StringComparison.Ordinal);
        }
    }

    public void Dispose()
    {
        foreach (var tool in _tools)
        {
            tool.Dispose();
        }
    }
}
