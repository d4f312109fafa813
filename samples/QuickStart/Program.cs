using System.CommandLine;
using System.Globalization;
using QuickSilver.Samples;
using QuickSilver.Samples.QuickStart;
using Serilog;
using Serilog.Events;

// QuickStart: a GMS and a publisher in this process, receivers in child processes (this program again, with the
// hidden --role receiver), all on loopback IP multicast. With --gms-replicas 3 the GMS is three replica processes on
// Raft instead (--role gms), and --kill-gms-leader kills the leading one mid-stream. Prints live per-receiver rates and checks that every receiver
// got every message exactly once, in order. See docs/quickstart.md.
var receivers = Cli.Int("--receivers", "Receiver processes to start", 3, 1, 16);
var messages = Cli.Int("--messages", "Messages to publish at most", 500_000, 1, 100_000_000);
var seconds = Cli.Int("--seconds", "Stop publishing after this many seconds", 10, 1, 3_600);
var size = Cli.Int("--size", "Message size in bytes; the first 8 carry the message number", 100, 8, 8_192);
var gmsReplicas = Cli.Int("--gms-replicas", "Run the GMS as this many replica processes on Raft instead of inside the publisher: 0 (embedded), 3, 5 or 7", 0, 0, 7);
gmsReplicas.Validators.Add(result =>
{
    if (Given(result) is 1 or 2 or 4 or 6)
    {
        result.AddError("--gms-replicas must be 0 (the GMS embedded in the publisher) or an odd number of replicas: 3, 5 or 7.");
    }
});
var killLeader = new Option<bool>("--kill-gms-leader") { Description = "With --gms-replicas: kill the leading replica's process 250 ms into publishing, to show failover under load" };
killLeader.Validators.Add(result =>
{
    if (result.GetValueOrDefault<bool>() && (result.GetResult(gmsReplicas) is not { } replicasGiven || Given(replicasGiven) is null or 0))
    {
        result.AddError("--kill-gms-leader needs --gms-replicas 3 (or 5, 7): with the embedded GMS there is no other replica to take over.");
    }
});
var role = new Option<string>("--role") { Hidden = true, DefaultValueFactory = _ => "publisher" };
role.AcceptOnlyFromAmong("publisher", "receiver", "gms");
var replicaList = new Option<string>("--replicas") { Hidden = true, DefaultValueFactory = _ => "" };
var replicaId = Cli.Int("--replica-id", "Replica number (gms role)", 1, 1, 7);
replicaId.Hidden = true;
var data = new Option<string>("--data") { Hidden = true, DefaultValueFactory = _ => "" };
var pool = new Option<string>("--pool") { Hidden = true, DefaultValueFactory = _ => "" };
var gms = Cli.Address("--gms", "GMS address (receiver role)", loopbackOnly: true, NetAddressDefault());
gms.Hidden = true;
var index = Cli.Int("--index", "Receiver index (receiver role)", 0, 0, 1_000);
index.Hidden = true;
var lifetime = Cli.Int("--lifetime", "Seconds after which a receiver exits regardless", 600, 1, 86_400);
lifetime.Hidden = true;

var root = new RootCommand("QuickSilver QuickStart: one publisher and several receiver processes in overlapping groups over loopback IP multicast.")
{
    receivers, messages, seconds, size, gmsReplicas, killLeader, role, gms, index, lifetime, replicaList, replicaId, data, pool,
};

root.SetAction(async parse =>
{
    string which = parse.GetValue(role)!;
    bool child = which != "publisher";
    var replicas = parse.GetValue(replicaList)!.Split(',', StringSplitOptions.RemoveEmptyEntries).Select(QuickSilver.Core.Io.NetAddress.Parse).ToArray();
    var lifeSpan = TimeSpan.FromSeconds(parse.GetValue(lifetime));
    Log.Logger = new LoggerConfiguration()
        .MinimumLevel.Warning()
        .WriteTo.Console(formatProvider: CultureInfo.InvariantCulture, standardErrorFromLevel: child ? LogEventLevel.Verbose : null)
        .CreateLogger();
    try
    {
        return which switch
        {
            "receiver" => await Receiver.RunAsync(parse.GetValue(gms), replicas, parse.GetValue(index), lifeSpan),
            "gms" => await GmsReplica.RunAsync(parse.GetValue(replicaId), replicas, parse.GetValue(data)!, QuickSilver.Core.Io.NetAddress.Parse(parse.GetValue(pool)!), lifeSpan),
            _ => await Publisher.RunAsync(new DemoSettings(parse.GetValue(receivers), parse.GetValue(messages), parse.GetValue(seconds), parse.GetValue(size),
                parse.GetValue(gmsReplicas), parse.GetValue(killLeader))),
        };
    }
    finally
    {
        await Log.CloseAndFlushAsync();
    }
});

return await Cli.RunAsync(root, args);

// The number an option was given, or null when it was not a number (its parser reports that).
static int? Given(System.CommandLine.Parsing.OptionResult result)
    => result.Tokens.Count > 0 && int.TryParse(result.Tokens[0].Value, NumberStyles.Integer, CultureInfo.InvariantCulture, out int value) ? value : null;

static QuickSilver.Core.Io.NetAddress NetAddressDefault() => QuickSilver.Core.Io.NetAddress.Loopback(47001);
