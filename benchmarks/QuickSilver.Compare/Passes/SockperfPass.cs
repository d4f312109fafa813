using System.Globalization;
using System.Text.RegularExpressions;

namespace QuickSilver.Compare.Passes;

/// <summary>
/// The native raw-UDP baseline (issue 11): Debian's sockperf, one <c>sockperf server</c> per receiver on the point's
/// multicast group over loopback and one <c>sockperf throughput</c> client sending as fast as it can (<c>--mps max</c>)
/// for <see cref="PassContext.SockperfSeconds"/>. sockperf has no delivery guarantee: what a receiver got is what it
/// counted (its "Total N messages received", printed when it is interrupted), over the client's send time. So its
/// result is the per-receiver rate of datagrams that arrived, loss and all (the note says how many were lost).
/// </summary>
internal static partial class SockperfPass
{
    private static string? _path;

    /// <summary>Runs benchmarks/sockperf/install.sh (apt-get when missing); false when sockperf is still not there.</summary>
    public static async Task<bool> InstallAsync()
    {
        if (JavaHarness.RepoRoot() is not { } root)
        {
            return false;
        }

        var (code, lines) = await ChildProcess.RunToEndAsync("bash", [Path.Combine(root, "benchmarks", "sockperf", "install.sh")], TimeSpan.FromMinutes(10));
        _path = code == 0 && lines.Count > 0 && File.Exists(lines[^1]) ? lines[^1] : null;
        return _path is not null;
    }

    public static async Task<PassResult> RunAsync(PassContext context)
    {
        var p = context.Point;
        string sockperf = _path ?? "sockperf";
        var (port, tag) = PassContext.FreshAddress();
        string group = $"239.255.{tag}.{Random.Shared.Next(1, 250)}";
        string portText = port.ToString(CultureInfo.InvariantCulture);
        var servers = new List<ChildProcess>();
        try
        {
            for (int i = 0; i < p.Receivers; i++)
            {
                servers.Add(ChildProcess.Start(sockperf, ["server", "-i", group, "-p", portText, "--mc-rx-if", "127.0.0.1"]));
            }

            using (var ready = new CancellationTokenSource(context.Grace))
            {
                foreach (var server in servers)
                {
                    if (await server.WaitForLineAsync("sockperf: [tid", ready.Token) is null)
                    {
                        return PassResult.Failed(Systems.Sockperf, p, "a sockperf server did not start");
                    }
                }
            }

            string seconds = context.SockperfSeconds.ToString(CultureInfo.InvariantCulture);
            var (code, lines) = await ChildProcess.RunToEndAsync(sockperf,
                ["throughput", "-i", group, "-p", portText, "--mc-tx-if", "127.0.0.1", "-m", p.Size.ToString(CultureInfo.InvariantCulture), "-t", seconds, "--mps", "max"],
                context.Grace);
            var sent = lines.Select(l => SentLine().Match(l)).FirstOrDefault(m => m.Success);
            if (code != 0 || sent is null)
            {
                return PassResult.Failed(Systems.Sockperf, p, $"the sockperf client failed (exit {code})");
            }

            long sentCount = long.Parse(sent.Groups[1].Value, CultureInfo.InvariantCulture);
            double sendSeconds = double.Parse(sent.Groups[2].Value, CultureInfo.InvariantCulture);
            await Task.Delay(200); // the last datagrams in flight
            var received = new List<long>();
            using var totals = new CancellationTokenSource(context.Grace);
            foreach (var server in servers)
            {
                await server.InterruptAsync();
                var line = await server.WaitForLineAsync("sockperf: Total", totals.Token);
                var match = line is null ? null : ReceivedLine().Match(line);
                if (match is not { Success: true })
                {
                    return PassResult.Failed(Systems.Sockperf, p, "a sockperf server printed no total");
                }

                received.Add(long.Parse(match.Groups[1].Value, CultureInfo.InvariantCulture));
            }

            long worst = received.Min();
            string note = $"unlimited sender: sent {sentCount:N0} in {sendSeconds:0.###} s; the worst receiver got {worst:N0} ({100.0 * (sentCount - Math.Min(worst, sentCount)) / Math.Max(1, sentCount):0.#} % lost)";
            return new PassResult(Systems.Sockperf, p, sendSeconds, worst, received.Max(), worst, note);
        }
        finally
        {
            await PassContext.EndAllAsync(servers);
        }
    }

    [GeneratedRegex(@"Total of (\d+) messages sent in ([\d.]+) sec")]
    private static partial Regex SentLine();

    [GeneratedRegex(@"Total (\d+) messages received")]
    private static partial Regex ReceivedLine();
}
