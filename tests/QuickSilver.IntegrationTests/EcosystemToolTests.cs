using System.Text.Json;

namespace QuickSilver.IntegrationTests;

/// <summary>Issue 14's programs as separate processes: qs --json, --log-level and stats; the hosted-service sample.
/// The timeouts are hang guards.</summary>
public sealed class EcosystemToolTests
{
    [Fact]
    public async Task Qs_stats_reads_a_running_nodes_counters_and_json_and_log_level_shape_the_output()
    {
        string gms = $"127.0.0.1:{Tool.FreeUdpPort()}";
        string pool = $"239.255.{Random.Shared.Next(100, 200)}.0:{Tool.FreeUdpPort()}";
        using var server = Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", "60", "--json", "--log-level", "Information");
        Assert.True(await server.WaitForLineAsync("{\"event\":\"listening\"", TimeSpan.FromSeconds(30)), server.Stderr);
        using var node = Tool.Qs("node", "--gms", gms, "--join", "stats/a", "--publish", "100000000", "--seconds", "60", "--json");
        Assert.True(await node.WaitForLineAsync("{\"event\":\"ready\"", TimeSpan.FromSeconds(30)), node.Stderr);
        using var ready = JsonDocument.Parse(node.Stdout.Split('\n').First(l => l.StartsWith("{\"event\":\"ready\"", StringComparison.Ordinal)));
        int pid = ready.RootElement.GetProperty("pid").GetInt32();

        using var stats = Tool.Qs("stats", "--pid", pid.ToString(System.Globalization.CultureInfo.InvariantCulture), "--seconds", "2", "--json");
        Assert.True(await stats.WaitAsync(TimeSpan.FromSeconds(60)), "qs stats did not exit");
        Assert.True(stats.ExitCode == 0, stats.Stderr);
        using var readings = JsonDocument.Parse(stats.Stdout);
        var packetsOut = readings.RootElement.EnumerateArray().Single(r => r.GetProperty("instrument").GetString() == "qs.packets.out");
        Assert.Equal("QuickSilver.Core", packetsOut.GetProperty("meter").GetString());
        Assert.True(packetsOut.GetProperty("value").GetDouble() > 0);
        Assert.Contains(readings.RootElement.EnumerateArray(), r => r.GetProperty("meter").GetString() == "QuickSilver.Qsm");

        // The node's counts lines are JSON too, and the GMS logged at Information (its default is Warning).
        Assert.True(await node.WaitForLineAsync("{\"event\":\"counts\"", TimeSpan.FromSeconds(30)));
        Assert.Contains("registered", server.Stderr, StringComparison.Ordinal);
        Assert.DoesNotContain("registered", node.Stderr, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_bad_log_level_is_a_bad_option_naming_the_flag()
    {
        using var tool = Tool.Qs("gms", "--log-level", "Loud");
        Assert.True(await tool.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, tool.ExitCode);
        Assert.Contains("--log-level", tool.Stderr, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_worker_service_sample_publishes_subscribes_exports_to_OpenTelemetry_and_exits_0_by_itself()
    {
        using var worker = Tool.WorkerService("--messages", "5000", "--seconds", "60", "--otel", "true",
            "--QuickSilver:Gms", $"127.0.0.1:{Tool.FreeUdpPort()}",
            "--QuickSilver:GmsServer:MulticastPoolStart", $"239.255.{Random.Shared.Next(100, 200)}.0:{Tool.FreeUdpPort()}");
        Assert.True(await worker.WaitAsync(TimeSpan.FromSeconds(90)), "did not exit");
        Assert.True(worker.ExitCode == 0, worker.Stdout + worker.Stderr);
        Assert.Contains("Published 5000 and received 5000 back in order", worker.Stdout, StringComparison.Ordinal);
        Assert.Contains("Metric Name: qs.packets.out", worker.Stdout, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_worker_service_sample_exits_2_naming_the_key_of_a_bad_option()
    {
        using var worker = Tool.WorkerService("--QuickSilver:PublishBuffer", "0");
        Assert.True(await worker.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, worker.ExitCode);
        Assert.Contains("QuickSilver:PublishBuffer", worker.Stderr, StringComparison.Ordinal);
    }
}
