using System.CommandLine;
using System.Globalization;
using QuickSilver.Samples;
using QuickSilver.Samples.QuickStart;
using Serilog;
using Serilog.Events;

// QuickStart: a GMS and a publisher in this process, receivers in child processes (this program again, with the
// hidden --role receiver), all on loopback IP multicast. Prints live per-receiver rates and checks that every receiver
// got every message exactly once, in order. See docs/quickstart.md.
var receivers = Cli.Int("--receivers", "Receiver processes to start", 3, 1, 16);
var messages = Cli.Int("--messages", "Messages to publish at most", 500_000, 1, 100_000_000);
var seconds = Cli.Int("--seconds", "Stop publishing after this many seconds", 10, 1, 3_600);
var size = Cli.Int("--size", "Message size in bytes; the first 8 carry the message number", 100, 8, 8_192);
var role = new Option<string>("--role") { Hidden = true, DefaultValueFactory = _ => "publisher" };
role.AcceptOnlyFromAmong("publisher", "receiver");
var gms = Cli.Address("--gms", "GMS address (receiver role)", loopbackOnly: true, NetAddressDefault());
gms.Hidden = true;
var index = Cli.Int("--index", "Receiver index (receiver role)", 0, 0, 1_000);
index.Hidden = true;
var lifetime = Cli.Int("--lifetime", "Seconds after which a receiver exits regardless", 600, 1, 86_400);
lifetime.Hidden = true;

var root = new RootCommand("QuickSilver QuickStart: one publisher and several receiver processes in overlapping groups over loopback IP multicast.")
{
    receivers, messages, seconds, size, role, gms, index, lifetime,
};

root.SetAction(async parse =>
{
    bool child = parse.GetValue(role) == "receiver";
    Log.Logger = new LoggerConfiguration()
        .MinimumLevel.Warning()
        .WriteTo.Console(formatProvider: CultureInfo.InvariantCulture, standardErrorFromLevel: child ? LogEventLevel.Verbose : null)
        .CreateLogger();
    try
    {
        return child
            ? await Receiver.RunAsync(parse.GetValue(gms), parse.GetValue(index), TimeSpan.FromSeconds(parse.GetValue(lifetime)))
            : await Publisher.RunAsync(new DemoSettings(parse.GetValue(receivers), parse.GetValue(messages), parse.GetValue(seconds), parse.GetValue(size)));
    }
    finally
    {
        await Log.CloseAndFlushAsync();
    }
});

return await Cli.RunAsync(root, args);

static QuickSilver.Core.Io.NetAddress NetAddressDefault() => QuickSilver.Core.Io.NetAddress.Loopback(47001);
