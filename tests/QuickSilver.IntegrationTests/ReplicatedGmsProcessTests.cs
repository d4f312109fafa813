using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// Three <c>qs gms</c> replicas (DotNext Raft over loopback TCP, logs on disk), a publisher and three receivers
/// streaming; the leader's process is killed by its id in the middle of the stream. Every receiver still gets every
/// message in order, a new node registers and joins through the new leader, and the new leader has issued exactly one
/// id per node (no node was renumbered) and declared nobody dead. Then the old leader restarts from its directory and
/// catches up as a follower, a follower is killed, and a further node still registers. Correctness only; the timeouts
/// are hang guards, and the time from the kill to the new node's readiness is printed, not asserted.
/// </summary>
public sealed partial class ReplicatedGmsProcessTests(ITestOutputHelper output) : IDisposable
{
    private const int Messages = 5_000_000; // several seconds of stream at today's rate, so the kill lands mid-stream
    private const int Receivers = 3;
    private static readonly TimeSpan Guard = TimeSpan.FromMinutes(5);
    private readonly string _data = Path.Combine(Path.GetTempPath(), $"qs-raftgms-mp-{Guid.NewGuid():N}");

    [GeneratedRegex(@"sent\s+([\d,]+)")]
    private static partial Regex Sent();

    [GeneratedRegex(@"pid (\d+)")]
    private static partial Regex Pid();

    public void Dispose()
    {
        if (Directory.Exists(_data))
        {
            Directory.Delete(_data, recursive: true);
        }
    }

    private static long LastSent(Tool tool)
        => Sent().Matches(tool.Stdout) is { Count: > 0 } m ? long.Parse(m[^1].Groups[1].Value, NumberStyles.AllowThousands, CultureInfo.InvariantCulture) : 0;

    [Fact]
    public async Task Killing_the_leader_replica_mid_stream_loses_no_message_renumbers_no_node_and_a_new_node_joins()
    {
        var ports = new HashSet<ushort>();
        while (ports.Count < 3)
        {
            ports.Add(Tool.FreeUdpPort());
        }

        string peers = string.Join(',', ports.Select(p => string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{p}")));
        string pool = string.Create(CultureInfo.InvariantCulture, $"239.254.{Random.Shared.Next(1, 250)}.0:{Random.Shared.Next(20_000, 60_000)}");
        string guard = ((int)Guard.TotalSeconds).ToString(CultureInfo.InvariantCulture);
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();
        var replicas = Enumerable.Range(1, 3).Select(i => tools.Start(Tool.Qs("gms", "--id", i.ToString(CultureInfo.InvariantCulture), "--peers", peers,
            "--data", Path.Combine(_data, $"r{i}"), "--multicast", pool, "--seconds", guard))).ToList();
        Tool? leader = null;
        while (leader is null && clock.Elapsed < TimeSpan.FromSeconds(60))
        {
            leader = replicas.FirstOrDefault(r => r.Stdout.Contains(": leader,", StringComparison.Ordinal));
            await Task.Delay(100);
        }

        Assert.True(leader is not null, $"no replica led within 60 s: {string.Join(" / ", replicas.Select(r => r.Tail(1) + r.Stderr))}");
        var (publisher, receivers) = await tools.StartLoadAsync(peers, Messages, Receivers, (int)Guard.TotalSeconds, "--gms-replicas");

        // In the middle of the stream, kill the leader's process by its id.
        while (LastSent(publisher) == 0 && clock.Elapsed < Guard)
        {
            await Task.Delay(20);
        }

        long sentAtKill = LastSent(publisher);
        Assert.True(sentAtKill < Messages, "the stream ended before the kill: the test needs more messages to kill the leader mid-stream");
        int pid = int.Parse(Pid().Match(leader.Stdout).Groups[1].Value, CultureInfo.InvariantCulture);
        using (var victim = Process.GetProcessById(pid))
        {
            victim.Kill();
        }

        var killedAt = clock.Elapsed;
        output.WriteLine($"killed leader pid {pid} after {sentAtKill:N0} of {Messages:N0} messages were sent");

        // A new node registers and joins through whichever replica leads now.
        var late = tools.Start(Tool.Qs("node", "--gms-replicas", peers, "--join", "late", "--seconds", guard, "--linger", "0"));
        Assert.True(await late.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"the new node did not register: {late.Tail(3)} {late.Stderr}");
        output.WriteLine($"new node ready {(clock.Elapsed - killedAt).TotalSeconds:F2} s after the kill (includes its process start)");

        await ToolSet.AssertReceiversGotEverythingAsync(receivers, "load", Messages, Guard, clock, output);

        // The new leader: five ids ever issued for the five nodes (nobody renumbered), nobody declared dead. (How many
        // nodes it has now depends on how many receivers have already said goodbye.)
        var survivors = replicas.Where(r => r != leader).ToList();
        string expected = $"{Receivers + 2} ids issued";
        string? line = null;
        var deadline = clock.Elapsed + TimeSpan.FromSeconds(30);
        while (line is null && clock.Elapsed < deadline)
        {
            line = survivors.Select(r => r.Stdout.Split('\n').LastOrDefault(l => l.Contains(": leader,", StringComparison.Ordinal)))
                .FirstOrDefault(l => l is not null && l.Contains(expected, StringComparison.Ordinal));
            await Task.Delay(200);
        }

        output.WriteLine(string.Join("\n", survivors.Select(r => r.Tail(1))));
        Assert.True(line is not null, $"no surviving leader reports '{expected}': {string.Join(" / ", survivors.Select(r => r.Tail(1)))}");
        Assert.Contains("0 failures detected", line, StringComparison.Ordinal);

        // The old leader restarts from its directory and catches up as a follower; then a follower is killed, and a
        // further node still registers (with the next id) through the leader, which keeps a majority of two.
        int killedId = replicas.IndexOf(leader) + 1;
        var restarted = tools.Start(Tool.Qs("gms", "--id", killedId.ToString(CultureInfo.InvariantCulture), "--peers", peers,
            "--data", Path.Combine(_data, $"r{killedId}"), "--multicast", pool, "--seconds", guard));
        Assert.True(await WaitForStatusAsync(restarted, l => l.Contains("follower of", StringComparison.Ordinal) && l.Contains($"{Receivers + 2} ids issued", StringComparison.Ordinal), clock),
            $"the restarted replica did not catch up: {restarted.Tail(2)} {restarted.Stderr}");
        var live = survivors.Append(restarted).ToList();
        Tool? leaderNow = null;
        Assert.True(await WaitAsync(() => (leaderNow = live.FirstOrDefault(r => LatestStatus(r)?.Contains(": leader,", StringComparison.Ordinal) == true)) is not null, clock),
            "no replica leads after the restart");
        var follower = live.First(r => r != leaderNow);
        int followerPid = int.Parse(Pid().Match(follower.Stdout).Groups[1].Value, CultureInfo.InvariantCulture);
        using (var victim = Process.GetProcessById(followerPid))
        {
            victim.Kill();
        }

        live.Remove(follower);
        var later = tools.Start(Tool.Qs("node", "--gms-replicas", peers, "--join", "later", "--seconds", guard, "--linger", "0"));
        Assert.True(await later.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"no node registered after a follower was killed: {later.Tail(3)} {later.Stderr}");
        string six = $"{Receivers + 3} ids issued";
        Assert.True(await WaitAsync(() => live.Any(r => LatestStatus(r) is { } l && l.Contains(": leader,", StringComparison.Ordinal) && l.Contains(six, StringComparison.Ordinal)), clock),
            $"no leader reports '{six}': {string.Join(" / ", live.Select(r => r.Tail(1)))}");
        Assert.All(replicas.Append(restarted), r => Assert.DoesNotContain("Unhandled", r.Stderr, StringComparison.Ordinal));
    }

    /// <summary>The replica's latest status line, if it printed one.</summary>
    private static string? LatestStatus(Tool replica)
        => replica.Stdout.Split('\n').LastOrDefault(l => l.StartsWith("gms replica", StringComparison.Ordinal) && l.Contains("ids issued", StringComparison.Ordinal));

    private static Task<bool> WaitForStatusAsync(Tool replica, Func<string, bool> done, Stopwatch clock)
        => WaitAsync(() => LatestStatus(replica) is { } last && done(last), clock);

    /// <summary>Polls <paramref name="condition"/> with a 60 s hang guard.</summary>
    private static async Task<bool> WaitAsync(Func<bool> condition, Stopwatch clock)
    {
        var deadline = clock.Elapsed + TimeSpan.FromSeconds(60);
        while (clock.Elapsed < deadline)
        {
            if (condition())
            {
                return true;
            }

            await Task.Delay(200);
        }

        return false;
    }
}
