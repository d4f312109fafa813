namespace QuickSilver.IntegrationTests;

/// <summary>AER as separate processes over loopback IP multicast (docs/aer.md): <c>qs aer-send</c>, <c>qs repair-server</c>
/// and <c>qs aer-receive</c>, with loss injected at the receivers' sockets; the repair server is killed mid-stream and
/// the receivers still get everything (from the source).</summary>
public sealed class AerProcessTests
{
    [Fact]
    public async Task Source_repair_server_and_receivers_as_processes_survive_the_repair_server_being_killed()
    {
        const int messages = 15000;
        var random = new Random();
        string group = $"239.255.{random.Next(43, 250)}.{random.Next(1, 250)}:{random.Next(40_000, 60_000)}";
        string Address() => $"127.0.0.1:{Tool.FreeUdpPort()}";
        string source = Address(), server = Address(), r1 = Address(), r2 = Address();
        using var repairServer = Tool.Qs("repair-server", "--listen", server, "--group", group, "--source", source, "--children", $"{r1},{r2}", "--seconds", "60");
        using var receiver1 = Tool.Qs("aer-receive", "--listen", r1, "--group", group, "--source", source, "--expect", $"{messages}", "--loss-percent", "3", "--seconds", "90");
        using var receiver2 = Tool.Qs("aer-receive", "--listen", r2, "--group", group, "--source", source, "--expect", $"{messages}", "--loss-percent", "3", "--seconds", "90");
        Assert.True(await receiver1.WaitForLineAsync("receiver", TimeSpan.FromSeconds(30)), receiver1.Stderr);
        Assert.True(await receiver2.WaitForLineAsync("receiver", TimeSpan.FromSeconds(30)), receiver2.Stderr);
        Assert.True(await repairServer.WaitForLineAsync("repair server", TimeSpan.FromSeconds(30)), repairServer.Stderr);
        using var sender = Tool.Qs("aer-send", "--listen", source, "--group", group, "--children", server, "--messages", $"{messages}", "--linger", "10", "--seconds", "90");

        // Kill the repair server once the stream is under way, before it ends.
        long seen = 0;
        var until = DateTime.UtcNow + TimeSpan.FromSeconds(30);
        while (seen == 0 && DateTime.UtcNow < until)
        {
            await Task.Delay(20);
            seen = Delivered(receiver1);
        }

        repairServer.Dispose();
        Assert.InRange(seen, 1, messages - 1);

        Assert.True(await receiver1.WaitAsync(TimeSpan.FromSeconds(90)), receiver1.Tail(5));
        Assert.True(await receiver2.WaitAsync(TimeSpan.FromSeconds(30)), receiver2.Tail(5));
        Assert.True(receiver1.ExitCode == 0, receiver1.Tail(5));
        Assert.True(receiver2.ExitCode == 0, receiver2.Tail(5));
        Assert.True(receiver1.HasLine($"received all {messages} in order"));
        Assert.True(receiver2.HasLine($"received all {messages} in order"));
    }

    /// <summary>The count in the receiver's latest "delivered N, …" status line.</summary>
    private static long Delivered(Tool receiver)
    {
        var line = receiver.Stdout.Split('\n').LastOrDefault(l => l.StartsWith("delivered ", StringComparison.Ordinal));
        return line is null ? 0 : long.Parse(line.AsSpan(10, line.IndexOf(',', StringComparison.Ordinal) - 10), System.Globalization.CultureInfo.InvariantCulture);
    }

    [Theory]
    [InlineData(new[] { "repair-server", "--listen", "127.0.0.1:5000", "--source", "127.0.0.1:5001" }, "--children")]
    [InlineData(new[] { "aer-receive", "--listen", "127.0.0.1:5000", "--source", "127.0.0.1:5001", "--group", "127.0.0.1:5002" }, "--group")]
    [InlineData(new[] { "aer-send", "--listen", "127.0.0.1:5000", "--size", "4" }, "--size")]
    [InlineData(new[] { "aer-send", "--listen", "127.0.0.1:5000", "--children", "239.1.1.1:5" }, "--children")]
    public async Task A_bad_aer_option_exits_with_code_2_and_names_it(string[] args, string option)
    {
        using var tool = Tool.Qs(args);
        Assert.True(await tool.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, tool.ExitCode);
        Assert.Contains(option, tool.Stderr, StringComparison.Ordinal);
    }
}
