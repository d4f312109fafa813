namespace QuickSilver.IntegrationTests;

/// <summary>AER as separate processes over loopback IP multicast (docs/aer.md): <c>qs aer-send</c>, <c>qs repair-server</c>
/// and <c>qs aer-receive</c>, with loss injected at the receivers' sockets; the repair server is killed mid-stream and
/// the receivers still get everything (from the source); and <c>qs node</c> processes in an AER group by flags.</summary>
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

    [Fact]
    public async Task Qs_node_processes_join_an_AER_group_by_flags_and_every_receiver_gets_every_message_in_order()
    {
        const int messages = 3000;
        var random = new Random();
        string wan = $"239.255.{random.Next(43, 250)}.{random.Next(1, 250)}:{random.Next(40_000, 60_000)}";
        string pool = $"239.254.{random.Next(1, 250)}.0:{random.Next(20_000, 60_000)}";
        string Address() => $"127.0.0.1:{Tool.FreeUdpPort()}";
        string gms = Address(), source = Address(), r1 = Address(), r2 = Address();
        string[] Aer(string listen) => ["node", "--gms", gms, "--listen", listen, "--transport", "aer", "--aer-session", "5", "--aer-group", wan, "--aer-source", source];
        using var server = Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", "120");
        // The first receiver is in a QSM group as well (the first --join is the AER one); both drop 3 % of what arrives.
        using var receiver1 = Tool.Qs([.. Aer(r1), "--join", "wan", "--join", "lan", "--expect", $"{messages}", "--loss-percent", "3", "--seconds", "90"]);
        using var receiver2 = Tool.Qs([.. Aer(r2), "--join", "wan", "--expect", $"{messages}", "--loss-percent", "3", "--seconds", "90"]);
        Assert.True(await receiver1.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), receiver1.Stderr);
        Assert.True(await receiver2.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), receiver2.Stderr);
        using var sender = Tool.Qs([.. Aer(source), "--join", "wan", "--aer-children", $"{r1},{r2}", "--publish", $"{messages}", "--size", "200", "--linger", "5", "--seconds", "90"]);

        Assert.True(await receiver1.WaitAsync(TimeSpan.FromSeconds(100)), receiver1.Tail(5));
        Assert.True(await receiver2.WaitAsync(TimeSpan.FromSeconds(30)), receiver2.Tail(5));
        Assert.True(await sender.WaitAsync(TimeSpan.FromSeconds(60)), sender.Tail(5));
        Assert.True(receiver1.ExitCode == 0, receiver1.Tail(5));
        Assert.True(receiver2.ExitCode == 0, receiver2.Tail(5));
        Assert.True(sender.ExitCode == 0, sender.Tail(5));
        Assert.True(receiver1.HasLine($"final wan delivered={messages} anomalies=0"), receiver1.Tail(5));
        Assert.True(receiver2.HasLine($"final wan delivered={messages} anomalies=0"), receiver2.Tail(5));
        Assert.True(sender.HasLine($"final wan delivered=0 anomalies=0 skipped=0 sent={messages}"), sender.Tail(5)); // a source does not deliver to itself
    }

    [Fact]
    public async Task Aer_receive_json_reports_every_message_and_the_delays_of_the_repaired_ones()
    {
        const int messages = 3000;
        var random = new Random();
        string group = $"239.255.{random.Next(43, 250)}.{random.Next(1, 250)}:{random.Next(40_000, 60_000)}";
        string source = $"127.0.0.1:{Tool.FreeUdpPort()}", r1 = $"127.0.0.1:{Tool.FreeUdpPort()}";
        using var receiver = Tool.Qs("aer-receive", "--listen", r1, "--group", group, "--source", source, "--expect", $"{messages}", "--loss-percent", "2", "--json", "--seconds", "60");
        Assert.True(await receiver.WaitForLineAsync("receiver", TimeSpan.FromSeconds(30)), receiver.Stderr);
        using var sender = Tool.Qs("aer-send", "--listen", source, "--group", group, "--messages", $"{messages}", "--linger", "10", "--seconds", "60");
        Assert.True(await receiver.WaitAsync(TimeSpan.FromSeconds(60)), receiver.Tail(5));
        Assert.True(receiver.ExitCode == 0, receiver.Tail(5));

        using var summary = System.Text.Json.JsonDocument.Parse(receiver.Stdout.Split('\n').Last(l => l.StartsWith('{')));
        var root = summary.RootElement;
        Assert.Equal(messages, root.GetProperty("delivered").GetInt32());
        Assert.True(root.GetProperty("in_order").GetBoolean());
        Assert.True(root.GetProperty("span_s").GetDouble() > 0);
        // 2 % of 3,000 are lost and repaired after a random NAK wait of up to 20 ms: some messages wait past the margin.
        Assert.True(root.GetProperty("repaired").GetInt32() > 0, receiver.Tail(3));
        Assert.True(root.GetProperty("late").GetInt32() > 0, receiver.Tail(3));
        Assert.InRange(root.GetProperty("extra_p50_ms").GetDouble(), 5, root.GetProperty("extra_max_ms").GetDouble());
        Assert.InRange(root.GetProperty("delay_p50_ms").GetDouble(), 0, root.GetProperty("delay_max_ms").GetDouble());
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
    [InlineData(new[] { "aer-receive", "--listen", "127.0.0.1:5000", "--source", "127.0.0.1:5001", "--json", "--margin-ms", "-1" }, "--margin-ms")]
    [InlineData(new[] { "aer-receive", "--listen", "127.0.0.1:5000", "--source", "127.0.0.1:5001", "--json", "--floor-window-ms", "0" }, "--floor-window-ms")]
    [InlineData(new[] { "aer-send", "--listen", "127.0.0.1:5000", "--children", "239.1.1.1:5" }, "--children")]
    [InlineData(new[] { "node", "--join", "g", "--transport", "aer" }, "--aer-source")]
    [InlineData(new[] { "node", "--join", "g", "--transport", "wan" }, "--transport")]
    [InlineData(new[] { "node", "--join", "g", "--aer-session", "3" }, "--aer-session")]
    [InlineData(new[] { "node", "--join", "g", "--transport", "aer", "--aer-source", "127.0.0.1:5000", "--aer-group", "127.0.0.1:5002" }, "--aer-group")]
    [InlineData(new[] { "node", "--join", "g", "--transport", "aer", "--aer-source", "127.0.0.1:5000", "--publish", "10" }, "--publish")]
    [InlineData(new[] { "node", "--join", "g", "--transport", "aer", "--aer-source", "127.0.0.1:5000", "--aer-children", "127.0.0.1:5001" }, "--aer-children")]
    public async Task A_bad_aer_option_exits_with_code_2_and_names_it(string[] args, string option)
    {
        using var tool = Tool.Qs(args);
        Assert.True(await tool.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, tool.ExitCode);
        Assert.Contains(option, tool.Stderr, StringComparison.Ordinal);
    }
}
