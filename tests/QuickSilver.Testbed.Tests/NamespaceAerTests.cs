using System.Globalization;
using System.Text.RegularExpressions;

namespace QuickSilver.Testbed.Tests;

/// <summary>
/// The wide-area testbed end to end (docs/testbed.md): two sites as network namespaces, 20 ms one way each through
/// qs-wanlink (a 40 ms round trip), 2 % nftables loss at the receiver; <c>qs aer-send</c> and <c>qs aer-receive</c> as
/// processes in them. Skipped, saying why, where namespaces cannot be made (not root, no nftables, not built).
/// </summary>
public sealed partial class NamespaceAerTests
{
    private static readonly string Root = Processes.Root;
    private static readonly string Configuration = AppContext.BaseDirectory.Contains("/Debug/", StringComparison.Ordinal) ? "Debug" : "Release";

    [SkippableFact]
    public void Aer_across_two_namespaces_with_delay_and_two_percent_loss_delivers_every_message()
    {
        string prefix = $"qswt{Environment.ProcessId % 100000}";
        var env = new Dictionary<string, string>
        {
            ["QSWAN_PREFIX"] = prefix,
            ["QSWAN_SECONDS"] = "120",
            ["QSWAN_WANLINK"] = Path.Combine(Root, "tools/wan/QuickSilver.WanLink/bin", Configuration, "net10.0/qs-wanlink"),
        };
        string qs = Path.Combine(Root, "tools/qs/bin", Configuration, "net10.0/qs");
        var check = Processes.Run("tools/wan/testbed.sh", ["check"], env, TimeSpan.FromSeconds(20));
        if (check.Code != 0 && check.Output.Contains("not installed", StringComparison.Ordinal) && Environment.UserName == "root")
        {
            // A fresh machine: the testbed's Debian packages come from the project's own script (apt-get), once.
            var install = Processes.Run("tools/wan/install-deps.sh", [], env, TimeSpan.FromMinutes(15));
            check = install.Code == 0 ? Processes.Run("tools/wan/testbed.sh", ["check"], env, TimeSpan.FromSeconds(20)) : install;
        }

        Skip.If(check.Code != 0, $"no wide-area testbed here: {check.Output.Trim()}");
        try
        {
            var up = Processes.Run("tools/wan/testbed.sh", ["up", "s=20,0,1,0", "r=20,0,1,2"], env, TimeSpan.FromSeconds(30));
            Assert.True(up.Code == 0, up.Output);
            string source = "10.77.1.1:47200", receiver = "10.77.2.1:47200", group = "239.255.79.1:47100";
            const int messages = 1000;
            using var receive = Processes.Start("ip", ["netns", "exec", $"{prefix}-r1", qs, "aer-receive", "--listen", receiver, "--group", group, "--source", source, "--expect", $"{messages}", "--seconds", "25"], env);
            using var send = Processes.Start("ip", ["netns", "exec", $"{prefix}-s1", qs, "aer-send", "--listen", source, "--group", group, "--messages", $"{messages}", "--start-after-ms", "1500", "--linger", "20", "--seconds", "25"], env);
            Assert.True(receive.WaitForExit(TimeSpan.FromSeconds(28)), "the receiver did not finish within its time limit");
            string output = receive.StandardOutput.ReadToEnd();
            Assert.True(receive.ExitCode == 0, output);
            Assert.Contains($"received all {messages} in order", output, StringComparison.Ordinal);

            // The loss was real (packets were repaired) and so was the delay: a repair from the source takes at least
            // a round trip (40 ms) after the loss is detected.
            var latency = RepairLatency().Match(output);
            Assert.True(latency.Success, output);
            int repaired = int.Parse(latency.Groups[1].Value, CultureInfo.InvariantCulture);
            double mean = double.Parse(latency.Groups[2].Value, CultureInfo.InvariantCulture);
            Assert.InRange(repaired, 3, messages / 5);
            Assert.True(mean >= 35, $"mean repair latency {mean} ms is below the 40 ms round trip: the delay relay is not delaying");
            send.Kill(entireProcessTree: true);
        }
        finally
        {
            Processes.Run("tools/wan/testbed.sh", ["down"], env, TimeSpan.FromSeconds(30));
        }
    }

    [GeneratedRegex(@"repair latency: (\d+) repaired, mean ([0-9.]+) ms")]
    private static partial Regex RepairLatency();
}
