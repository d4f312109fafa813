using System.Diagnostics;
using System.Globalization;
using System.Security.Cryptography;
using System.Text.RegularExpressions;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>
/// Three <c>qs gms</c> replicas given one secret file run Raft over TLS keyed by it (docs/membership.md, "Replica
/// traffic"). A fourth <c>qs gms</c> process with another secret lists the three as its peers and connects to their
/// ports again and again: every replica counts refused peers, the leader and its term stay the same, the intruder never
/// gets the log (epoch 0), and a node with the cluster's secret still registers. The timeouts are hang guards.
/// </summary>
public sealed partial class ReplicatedGmsTlsProcessTests(ITestOutputHelper output) : IDisposable
{
    private readonly string _data = Directory.CreateTempSubdirectory("qs-raftgms-tls-").FullName;

    [GeneratedRegex(@"term (\d+)")]
    private static partial Regex Term();

    [GeneratedRegex(@"tls, (\d+) peers refused")]
    private static partial Regex Refused();

    public void Dispose() => Directory.Delete(_data, recursive: true);

    private string SecretFile(string name)
    {
        string path = Path.Combine(_data, name);
        File.WriteAllText(path, Convert.ToBase64String(RandomNumberGenerator.GetBytes(32)) + "\n");
        return path;
    }

    private static string? LatestStatus(Tool replica)
        => replica.Stdout.Split('\n').LastOrDefault(l => l.StartsWith("gms replica", StringComparison.Ordinal) && l.Contains("ids issued", StringComparison.Ordinal));

    private static long Number(Regex regex, string? line) => line is not null && regex.Match(line) is { Success: true } m ? long.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture) : -1;

    [Fact]
    public async Task A_replica_process_with_another_secret_is_refused_and_changes_nothing()
    {
        string cluster = SecretFile("cluster");
        string other = SecretFile("other");
        var ports = new HashSet<ushort>();
        while (ports.Count < 4)
        {
            ports.Add(Tool.FreeUdpPort());
        }

        var addresses = ports.Select(p => string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{p}")).ToList();
        string peers = string.Join(',', addresses.Take(3));
        string pool = string.Create(CultureInfo.InvariantCulture, $"239.254.{Random.Shared.Next(1, 250)}.0:{Random.Shared.Next(20_000, 60_000)}");
        using var tools = new ToolSet();
        var clock = Stopwatch.StartNew();
        var replicas = Enumerable.Range(1, 3).Select(i => tools.Start(Tool.Qs("gms", "--id", i.ToString(CultureInfo.InvariantCulture), "--peers", peers,
            "--data", Path.Combine(_data, $"r{i}"), "--multicast", pool, "--seconds", "120", "--secret-file", cluster,
            "--election-timeout", "2000"))).ToList(); // patient: parallel tests must not starve them into an election of their own
        Tool? leader = null;
        while (leader is null && clock.Elapsed < TimeSpan.FromSeconds(60))
        {
            leader = replicas.FirstOrDefault(r => LatestStatus(r)?.Contains(": leader,", StringComparison.Ordinal) == true);
            await Task.Delay(100);
        }

        Assert.True(leader is not null, $"no replica led within 60 s: {string.Join(" / ", replicas.Select(r => r.Tail(1) + r.Stderr))}");
        Assert.Contains("raft tls, 0 peers refused", LatestStatus(leader), StringComparison.Ordinal);
        long term = Number(Term(), LatestStatus(leader));

        var intruder = tools.Start(Tool.Qs("gms", "--id", "4", "--peers", string.Join(',', addresses), "--data", Path.Combine(_data, "r4"),
            "--multicast", pool, "--seconds", "120", "--secret-file", other));
        while (replicas.Sum(r => Math.Max(0, Number(Refused(), LatestStatus(r)))) < 3 && clock.Elapsed < TimeSpan.FromSeconds(90))
        {
            await Task.Delay(200);
        }

        await Task.Delay(TimeSpan.FromSeconds(3)); // several of the intruder's election timeouts, and two status lines
        var statuses = replicas.Select(LatestStatus).ToList();
        output.WriteLine(string.Join("\n", statuses.Append(LatestStatus(intruder))));
        Assert.True(statuses.Sum(s => Math.Max(0, Number(Refused(), s))) >= 3, $"the replicas did not refuse the intruder: {string.Join(" / ", statuses)}");
        Assert.Contains(": leader,", LatestStatus(leader), StringComparison.Ordinal);
        Assert.Equal(term, Number(Term(), LatestStatus(leader)));
        Assert.Contains("epoch 0,", LatestStatus(intruder), StringComparison.Ordinal);
        Assert.DoesNotContain(": leader,", intruder.Stdout, StringComparison.Ordinal);
        Assert.Contains("refused a Raft peer", string.Concat(replicas.Select(r => r.Stdout + r.Stderr)), StringComparison.Ordinal);

        using var node = tools.Start(Tool.Qs("node", "--gms-replicas", peers, "--join", "g", "--seconds", "60", "--linger", "0", "--secret-file", cluster));
        Assert.True(await node.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"a node with the secret did not register: {node.Tail(3)} {node.Stderr}");
        Assert.All(replicas.Append(intruder), r => Assert.DoesNotContain("Unhandled", r.Stderr, StringComparison.Ordinal));
    }
}
