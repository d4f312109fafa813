using System.CommandLine;
using System.Globalization;
using QuickSilver.Core;
using QuickSilver.Transport.Probe;
using Serilog;

// The core demo: one sender core and several receiver cores in this process exchange datagrams over loopback
// IP multicast (flow-controlled, no loss recovery), printing live per-receiver rates and a final count.
var receivers = new Option<int>("--receivers") { Description = "Receiver cores (each joins the multicast group).", DefaultValueFactory = _ => 3 };
var datagrams = new Option<int>("--datagrams") { Description = "Datagrams the sender multicasts.", DefaultValueFactory = _ => 1_000_000 };
var size = new Option<int>("--size") { Description = "Datagram size in bytes (28..1472).", DefaultValueFactory = _ => 100 };
var seconds = new Option<int>("--seconds") { Description = "Give up after this many seconds.", DefaultValueFactory = _ => 60 };
var backend = new Option<IoBackendKind>("--backend") { Description = "I/O backend: Auto, Epoll or Portable.", DefaultValueFactory = _ => IoBackendKind.Auto };

var root = new RootCommand("QuickSilver core demo: cores exchanging datagrams over loopback IP multicast.")
{
    receivers, datagrams, size, seconds, backend,
};

root.SetAction(parse =>
{
    Log.Logger = new LoggerConfiguration().WriteTo.Console(formatProvider: CultureInfo.InvariantCulture).CreateLogger();
    var options = new MulticastProbeOptions
    {
        Receivers = parse.GetValue(receivers),
        Datagrams = parse.GetValue(datagrams),
        DatagramBytes = parse.GetValue(size),
        Timeout = TimeSpan.FromSeconds(parse.GetValue(seconds)),
        Backend = parse.GetValue(backend),
    };
    try
    {
        options.Validate();
    }
    catch (ArgumentException e)
    {
        Console.Error.WriteLine(e.Message);
        return 2;
    }

    Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
        $"1 sender + {options.Receivers} receiver cores, {options.Datagrams:N0} datagrams of {options.DatagramBytes} B over loopback IP multicast"));
    long[] last = new long[options.Receivers];
    var lastTime = TimeSpan.Zero;
    var result = MulticastProbeRun.Execute(options, (counts, elapsed) =>
    {
        double dt = (elapsed - lastTime).TotalSeconds;
        var rates = counts.Select((c, i) => string.Create(CultureInfo.InvariantCulture, $"r{i}: {(c - last[i]) / dt,10:N0}/s"));
        Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"[{elapsed.TotalSeconds,5:F1}s] ") + string.Join("  ", rates));
        counts.ToArray().CopyTo(last, 0);
        lastTime = elapsed;
    });

    Console.WriteLine();
    Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
        $"backend {result.Backend}, window {result.Window} datagrams, ack every {result.AckEvery}, {result.Elapsed.TotalSeconds:F2} s"));
    for (int i = 0; i < result.ReceivedPerReceiver.Count; i++)
    {
        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"receiver {i}: {result.ReceivedPerReceiver[i]:N0} / {result.Datagrams:N0} received, {result.MissingPerReceiver[i]:N0} missing"));
    }

    double mbps = result.DatagramsPerSecond * result.DatagramBytes * 8 / 1e6;
    Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
        $"rate per receiver: {result.DatagramsPerSecond:N0} datagrams/s ({mbps:F1} Mbit/s)"));
    Console.WriteLine(result.Complete ? "OK: every receiver got every datagram." : "INCOMPLETE: some datagrams did not arrive.");
    Log.CloseAndFlush();
    return result.Complete ? 0 : 1;
});

return root.Parse(args).Invoke();
