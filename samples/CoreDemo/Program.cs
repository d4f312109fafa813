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
var backend = new Option<IoBackendKind>("--backend") { Description = "I/O backend: Auto, Epoll, Completion or Portable.", DefaultValueFactory = _ => IoBackendKind.Auto };
var compare = new Option<IoBackendKind[]>("--compare")
{
    Description = "Compare backends side by side in one run (e.g. --compare Epoll Completion): each round runs each backend once, in turn; prints the median rate of each and its ratio to the first.",
    AllowMultipleArgumentsPerToken = true,
};
var rounds = new Option<int>("--rounds") { Description = "Rounds for --compare (1..20).", DefaultValueFactory = _ => 3 };

var root = new RootCommand("QuickSilver core demo: cores exchanging datagrams over loopback IP multicast.")
{
    receivers, datagrams, size, seconds, backend, compare, rounds,
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

    var backends = parse.GetValue(compare);
    if (backends is { Length: > 0 })
    {
        int roundCount = parse.GetValue(rounds);
        if (roundCount is < 1 or > 20)
        {
            Console.Error.WriteLine($"--rounds must be in 1..20, got {roundCount}.");
            return 2;
        }

        return Compare(options, backends, roundCount);
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

// Alternates the backends round by round, so a noisy neighbour on a shared machine hits each about equally.
static int Compare(MulticastProbeOptions options, IoBackendKind[] backends, int rounds)
{
    Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
        $"compare {string.Join(" vs ", backends)}: {rounds} rounds, 1 sender + {options.Receivers} receiver cores, {options.Datagrams:N0} datagrams of {options.DatagramBytes} B over loopback IP multicast"));
    var rates = backends.Select(_ => new List<double>()).ToArray();
    bool complete = true;
    for (int round = 0; round < rounds; round++)
    {
        for (int b = 0; b < backends.Length; b++)
        {
            var result = MulticastProbeRun.Execute(options with { Backend = backends[b] });
            complete &= result.Complete;
            rates[b].Add(result.DatagramsPerSecond);
            Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                $"round {round + 1} {result.Backend,-10} {result.DatagramsPerSecond,12:N0} datagrams/s {(result.Complete ? "complete" : "INCOMPLETE")}"));
        }
    }

    double baseline = Median(rates[0]);
    for (int b = 0; b < backends.Length; b++)
    {
        double median = Median(rates[b]);
        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"median {backends[b],-10} {median,12:N0} datagrams/s  ratio to {backends[0]}: {median / baseline:F2}"));
    }

    Log.CloseAndFlush();
    return complete ? 0 : 1;
}

static double Median(List<double> values)
{
    var sorted = values.Order().ToArray();
    return sorted.Length % 2 == 1 ? sorted[sorted.Length / 2] : (sorted[(sorted.Length / 2) - 1] + sorted[sorted.Length / 2]) / 2;
}
