using System.CommandLine;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Samples;

namespace QuickSilver.Tools;

/// <summary>Settings of <c>qs node</c>. The first joined group is the main one: --publish sends there and --expect counts there.</summary>
internal sealed record NodeSettings(NetAddress Gms, IReadOnlyList<string> Groups, int Publish, int Size, int WaitRegions, int Expect, int Seconds, int Linger,
    DatagramSecurityOptions Security, bool Json = false)
{
    /// <summary>The replicas of a replicated GMS (--gms-replicas); empty: the single GMS at <see cref="Gms"/>.</summary>
    public IReadOnlyList<NetAddress> GmsReplicas { get; init; } = [];

    /// <summary>Print the node's protocol state (<see cref="QuickSilverNode.DescribeAsync"/>) to stderr every this many
    /// seconds (--describe-every); 0: never.</summary>
    public int DescribeEvery { get; init; }
}

/// <summary><c>qs node</c>: option definitions and validation; the run itself is in <see cref="NodeRun"/>.</summary>
internal static class NodeVerb
{
    public static Command Create(Option<bool> json)
    {
        var gms = Cli.Address("--gms", "Address of the GMS.", loopbackOnly: false, NetAddress.Loopback(47001));
        var replicas = GmsVerb.AddressList("--gms-replicas", "Every replica of a replicated GMS, comma-separated (as given to `qs gms --peers`); replaces --gms.");
        var join = new Option<string[]>("--join") { Description = "A group to join; repeat for several. The first is where --publish sends and --expect counts.", Required = true };
        join.Validators.Add(r =>
        {
            if (r.GetValueOrDefault<string[]>() is { } groups && groups.Any(string.IsNullOrWhiteSpace))
            {
                r.AddError("--join needs a non-empty group name.");
            }
        });
        var publish = Cli.Int("--publish", "Numbered messages to publish in the first group", 0, 0, 100_000_000);
        var size = Cli.Int("--size", "Message size in bytes; the first 8 carry the message number", 100, 8, 8_192);
        var waitRegions = Cli.Int("--wait-regions", "Before publishing, wait until the first group spans this many regions", 1, 1, 10_000);
        var expect = Cli.Int("--expect", "Exit once this many messages arrived in the first group; exit 1 unless exactly that many, in order", 0, 0, 100_000_000);
        var seconds = Cli.Int("--seconds", "Stop after this many seconds whatever happens", 60, 1, 30 * 86_400);
        var linger = Cli.Int("--linger", "After publishing, stay this many seconds to answer repairs", 5, 0, 86_400);
        var describe = Cli.Int("--describe-every", "Print the node's protocol state (senders, streams, flow reports) to stderr every N seconds; 0: never", 0, 0, 86_400);
        var security = SecurityFlags.Create();
        var command = new Command("node", "Run a node: join groups, optionally publish, print delivered counts once a second.")
        {
            gms, replicas, join, publish, size, waitRegions, expect, seconds, linger, describe, security.SecretFile, security.Mode,
        };
        command.SetAction((parse, cancellationToken) => security.TryRead(parse, out var datagrams)
            ? NodeRun.RunAsync(new NodeSettings(
                parse.GetValue(gms), parse.GetValue(join)!, parse.GetValue(publish), parse.GetValue(size), parse.GetValue(waitRegions),
                parse.GetValue(expect), parse.GetValue(seconds), parse.GetValue(linger), datagrams, parse.GetValue(json)) { GmsReplicas = parse.GetValue(replicas) ?? [], DescribeEvery = parse.GetValue(describe) }, cancellationToken)
            : Task.FromResult(Cli.BadOptions));
        return command;
    }
}
