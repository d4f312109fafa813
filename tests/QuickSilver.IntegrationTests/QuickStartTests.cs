namespace QuickSilver.IntegrationTests;

/// <summary>The QuickStart sample end to end: it spawns its own receiver processes and exits 0 only if each got every
/// message once, in order. Fewer messages than its default, to keep the suite short; the timeout is a hang guard.</summary>
public sealed class QuickStartTests
{
    [Fact]
    public async Task QuickStart_delivers_every_message_to_every_receiver_process_and_exits_0()
    {
        using var demo = Tool.QuickStart("--receivers", "3", "--messages", "3000", "--seconds", "60");
        bool exited = await demo.WaitAsync(TimeSpan.FromMinutes(5));
        Assert.True(exited, $"QuickStart did not finish:\n{demo.Stdout}");
        Assert.True(demo.ExitCode == 0, $"exit code {demo.ExitCode}:\n{demo.Stdout}\n{demo.Stderr}");
        Assert.Contains("OK: every receiver got all 3,000 messages exactly once, in order", demo.Stdout, StringComparison.Ordinal);
    }

    [Fact]
    public async Task QuickStart_with_three_GMS_replicas_survives_killing_the_leader_mid_stream()
    {
        // The second demo command (issue 13): the GMS as three replica processes on Raft; the leader's process is killed
        // 250 ms into publishing. Every receiver still gets every message, and another replica takes over.
        using var demo = Tool.QuickStart("--receivers", "3", "--messages", "200000", "--seconds", "60", "--gms-replicas", "3", "--kill-gms-leader");
        bool exited = await demo.WaitAsync(TimeSpan.FromMinutes(5));
        Assert.True(exited, $"QuickStart did not finish:\n{demo.Stdout}");
        Assert.True(demo.ExitCode == 0, $"exit code {demo.ExitCode}:\n{demo.Stdout}\n{demo.Stderr}");
        Assert.Contains("OK: every receiver got all 200,000 messages exactly once, in order", demo.Stdout, StringComparison.Ordinal);
        Assert.Matches(@"GMS failover: killed the leader gms\d", demo.Stdout);
        Assert.Matches(@"GMS failover: gms\d leads, seen \d+ ms after the kill", demo.Stdout);
    }
}
