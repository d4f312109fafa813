using System.Text.Json;

namespace QuickSilver.Testbed.Tests;

/// <summary>
/// The NORM side of the AER/NORM comparison (docs/aer.md, "NORM comparison"): benchmarks/norm/build.sh builds
/// norm-send and norm-recv against Debian's libnorm-dev, and they deliver a stream over loopback IP multicast, every
/// message in order, with a JSON summary. Skipped, saying why, where libnorm-dev or gcc is not installed.
/// </summary>
public sealed class NormHarnessTests
{
    private static readonly Dictionary<string, string> NoEnv = [];

    /// <summary>The test's own build (not benchmarks/norm/build, which a running benchmark may be using).</summary>
    private static readonly Dictionary<string, string> BuildEnv = new() { ["NORM_BUILD_DIR"] = Path.Combine(AppContext.BaseDirectory, "norm-build") };

    [SkippableTheory]
    [InlineData(0)]
    [InlineData(2)]
    public void The_norm_harness_builds_and_delivers_every_message_in_order_over_loopback(int lossPercent)
    {
        string build = BuildOrSkip();
        const int messages = 2000;
        int port = 40_000 + Random.Shared.Next(20_000);
        string group = $"239.255.{Random.Shared.Next(82, 250)}.{Random.Shared.Next(1, 250)}";
        using var receive = Processes.Start(Path.Combine(build, "norm-recv"), ["--addr", group, "--port", $"{port}", "--iface", "lo", "--id", "2", "--expect", $"{messages}", "--seconds", "40", "--rx-loss", $"{lossPercent}"], NoEnv);
        var ready = receive.StandardOutput.ReadLineAsync();
        Assert.True(ready.Wait(TimeSpan.FromSeconds(10)), "norm-recv did not start");
        Assert.Contains("ready", ready.Result, StringComparison.Ordinal);

        // Fixed rate (20 Mbit/s, NORM-CC off): the test is about delivery, not speed. Loopback loses nothing by itself;
        // --rx-loss makes NORM drop that share of what arrives, and NORM must repair it.
        // The source answers NACKs until the receiver is done (or 40 s), then is stopped.
        using var send = Processes.Start(Path.Combine(build, "norm-send"), ["--addr", group, "--port", $"{port}", "--iface", "lo", "--loopback", "--id", "1", "--messages", $"{messages}", "--cc", "off", "--rate-mbps", "20", "--linger", "40", "--seconds", "40"], NoEnv);
        bool finished = receive.WaitForExit(TimeSpan.FromSeconds(45));
        send.Kill(entireProcessTree: true);
        Assert.True(finished, "norm-recv did not finish within its time limit");
        string output = receive.StandardOutput.ReadToEnd();
        Assert.True(receive.ExitCode == 0, output);

        using var summary = JsonDocument.Parse(output.Split('\n').Last(l => l.StartsWith('{')));
        var root = summary.RootElement;
        Assert.Equal(messages, root.GetProperty("delivered").GetInt32());
        Assert.True(root.GetProperty("in_order").GetBoolean());
        Assert.Equal(0, root.GetProperty("breaks").GetInt32());
        Assert.True(root.GetProperty("span_s").GetDouble() > 0);
        Assert.InRange(root.GetProperty("delay_p50_ms").GetDouble(), 0, root.GetProperty("delay_max_ms").GetDouble());
        if (lossPercent > 0)
        {
            // What was lost waited for a NACK and a repair: some messages are late.
            Assert.True(root.GetProperty("late").GetInt32() > 0, output);
        }
    }

    [SkippableTheory]
    [InlineData("norm-send", new[] { "--addr", "239.255.1.1", "--port", "0" }, "--port")]
    [InlineData("norm-send", new[] { "--addr", "239.255.1.1", "--port", "5000", "--cc", "maybe" }, "--cc")]
    [InlineData("norm-recv", new[] { "--addr", "239.255.1.1", "--port", "5000", "--expect", "-3" }, "--expect")]
    [InlineData("norm-recv", new[] { "--addr", "239.255.1.1", "--port", "5000", "--expect", "5", "--margin-ms", "x" }, "--margin-ms")]
    public void A_bad_harness_option_exits_with_code_2_and_names_it(string tool, string[] args, string option)
    {
        string build = BuildOrSkip();
        var run = Processes.Run(Path.Combine(build, tool), args, NoEnv, TimeSpan.FromSeconds(20));
        Assert.Equal(2, run.Code);
        Assert.Contains(option, run.Output, StringComparison.Ordinal);
    }

    /// <summary>Runs benchmarks/norm/build.sh (once per test run) and returns the build directory; skips the test where
    /// NORM's headers or gcc are missing (build.sh would try to install them, which a test must not).</summary>
    private static string BuildOrSkip()
    {
        Skip.IfNot(File.Exists("/usr/include/normApi.h"), "libnorm-dev is not installed (sudo tools/wan/install-deps.sh)");
        Skip.IfNot(File.Exists("/usr/bin/gcc"), "gcc is not installed (sudo tools/wan/install-deps.sh)");
        lock (BuildLock)
        {
            if (built is null)
            {
                var run = Processes.Run("benchmarks/norm/build.sh", [], BuildEnv, TimeSpan.FromSeconds(120));
                Assert.True(run.Code == 0, run.Output);
                built = run.Output.Trim().Split('\n')[^1];
            }

            return built;
        }
    }

    private static readonly Lock BuildLock = new();
    private static string? built;
}
