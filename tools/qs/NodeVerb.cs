using QuickSilver.Qsm.Region;
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

    /// <summary>Read the first group at most this many messages a second through its bounded queue (--read-rate), a slow
    /// application; 0: on the core thread, as fast as they come.</summary>
    public int ReadRate { get; init; }

    /// <summary>What the node's senders do about a member far slower than the others (--slow-receivers).</summary>
    public SlowReceiverPolicy SlowReceivers { get; init; } = SlowReceiverPolicy.BackPressure;

    /// <summary>--laggard-timeout-ms.</summary>
    public TimeSpan LaggardTimeout { get; init; } = new RegionOptions().LaggardTimeout;

    /// <summary>The node's unicast address (--listen); port 0: any.</summary>
    public NetAddress Listen { get; init; } = NetAddress.Loopback(0);

    /// <summary>The fraction of received datagrams dropped on purpose (--loss-percent / 100; tests).</summary>
    public double InjectedLoss { get; init; }

    /// <summary>The first group's options (--transport aer and the --aer-* flags); null: a QSM group.</summary>
    public GroupOptions? MainGroup { get; init; }
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
        var readRate = Cli.Int("--read-rate", "Read the first group through its bounded queue at most this many messages a second (a slow application); 0: on the core thread, as they come", 0, 0, 100_000_000);
        var slowReceivers = new Option<string>("--slow-receivers")
        {
            Description = "What this node's senders do about a member far slower than the others: back-pressure (wait for it) or skip-ahead (tell it to skip after --laggard-timeout-ms); docs/qsm.md, \"Slow receivers\"",
            DefaultValueFactory = _ => "back-pressure",
        };
        slowReceivers.AcceptOnlyFromAmong("back-pressure", "skip-ahead");
        var laggardTimeout = Cli.Int("--laggard-timeout-ms", "With --slow-receivers skip-ahead: how long one laggard may hold a sender back", 2_000, 40, 600_000);
        var listen = Cli.Address("--listen", "This node's unicast address (as qs aer-send --listen); port 0: any free port", loopbackOnly: false, NetAddress.Loopback(0));
        var lossPercent = Cli.Int("--loss-percent", "Drop this percentage of received datagrams on purpose (tests)", 0, 0, 50);
        var security = SecurityFlags.Create();
        var aer = AerNodeFlags.Create();
        var command = new Command("node", "Run a node: join groups, optionally publish, print delivered counts once a second.")
        {
            gms, replicas, join, publish, size, waitRegions, expect, seconds, linger, describe, readRate, slowReceivers, laggardTimeout, security.SecretFile, security.Mode, security.Cipher,
            listen, lossPercent,
        };
        foreach (var option in aer.All)
        {
            command.Options.Add(option);
        }

        command.SetAction((parse, cancellationToken) => security.TryRead(parse, out var datagrams)
                                                        && aer.TryRead(parse, parse.GetValue(listen), parse.GetValue(publish), out var mainGroup)
            ? NodeRun.RunAsync(new NodeSettings(
                parse.GetValue(gms), parse.GetValue(join)!, parse.GetValue(publish), parse.GetValue(size), parse.GetValue(waitRegions),
                parse.GetValue(expect), parse.GetValue(seconds), parse.GetValue(linger), datagrams, parse.GetValue(json)) 
                {
                    GmsReplicas = parse.GetValue(replicas) ?? [],
                    DescribeEvery = parse.GetValue(describe),
                    ReadRate = parse.GetValue(readRate),
                    SlowReceivers = parse.GetValue(slowReceivers) == "skip-ahead" ? SlowReceiverPolicy.SkipAhead : SlowReceiverPolicy.BackPressure,
                    LaggardTimeout = TimeSpan.FromMilliseconds(parse.GetValue(laggardTimeout)),
                    Listen = parse.GetValue(listen),
                    InjectedLoss = parse.GetValue(lossPercent) / 100.0,
                    MainGroup = mainGroup,
                }, cancellationToken)
            : Task.FromResult(Cli.BadOptions));
        return command;
    }
}
