using Serilog;
using System.CommandLine;
using System.Diagnostics;
using QuickSilver.Simulation;

// The whole-stack soak (issue 12, item 7; docs/simulation.md, "Seed sweeps"): one scenario, many seeds, random faults per
// seed. A failing seed is printed with its faults and replays with --seed.
var from = new Option<int>("--from") { Description = "First seed of the sweep.", DefaultValueFactory = _ => 1 };
var seeds = new Option<int>("--seeds") { Description = "How many seeds, from --from (1 to 1,000,000).", DefaultValueFactory = _ => 1_000 };
var one = new Option<int?>("--seed") { Description = "Replay this one seed and print what it did." };
var parallel = new Option<int>("--parallel") { Description = "Seeds run at once (1 to 64; each is single-threaded).", DefaultValueFactory = _ => Environment.ProcessorCount };
var share = new Option<string?>("--partition-share") { Description = "on or off: sets RegionOptions.PartitionShare for every seed (default: the option's default)." };
var minutes = new Option<int>("--minutes") { Description = "Stop starting new seeds after this many minutes of wall time (1 to 10,080).", DefaultValueFactory = _ => 600 };

var root = new RootCommand("QuickSilver whole-stack soak: every seed draws faults (loss up to 20 %, bursts, reordering, duplication, crashes, joins and leaves, partitions, a second publisher that crashes mid-stream, the GMS leader crashing) and checks every live member got every message once, in order, what survivors hold of a crashed publisher, and that buffers are purged after.")
{
    from, seeds, one, parallel, minutes, share,
};

root.SetAction(parse =>
{
    foreach (var (value, min, max, name) in new[] { (parse.GetValue(seeds), 1, 1_000_000, "--seeds"), (parse.GetValue(parallel), 1, 64, "--parallel"), (parse.GetValue(minutes), 1, 10_080, "--minutes") })
    {
        if (value < min || value > max)
        {
            Console.Error.WriteLine($"{name} must be between {min:N0} and {max:N0}; got {value:N0}.");
            return 2;
        }
    }

    string? shareText = parse.GetValue(share);
    if (shareText is not null and not "on" and not "off")
    {
        Console.Error.WriteLine($"--partition-share must be on or off; got '{shareText}'.");
        return 2;
    }

    bool? partitionShare = shareText is null ? null : shareText == "on";

    if (parse.GetValue(one) is { } replay)
    {
        // A replay prints what the nodes logged (registrations, removals, refusals) as it goes.
        Log.Logger = new LoggerConfiguration().MinimumLevel.Information()
            .Enrich.With(new VirtualTimeEnricher()).WriteTo.Console(outputTemplate: "[{VirtualTime} {Level:u3}] {Message:lj}{NewLine}{Exception}", formatProvider: System.Globalization.CultureInfo.InvariantCulture).CreateLogger();
        using var logging = new Serilog.Extensions.Logging.SerilogLoggerFactory(Log.Logger);
        var result = SoakScenario.Run(replay, logging.CreateLogger("GMS"), partitionShare);
        Console.WriteLine($"seed {replay}: {result.Faults}");
        Console.WriteLine(result.Passed
            ? $"delivery passed in {result.VirtualTime.TotalSeconds:F2} s of virtual time, {result.Datagrams:N0} datagrams"
            : $"FAILED: {result.Failure}");
        if (result.Unpurged is { } note)
        {
            Console.WriteLine($"UNPURGED: {note}");
        }

        return result.Passed && result.Unpurged is null ? 0 : 1;
    }

    int first = parse.GetValue(from), count = parse.GetValue(seeds);
    var deadline = Stopwatch.StartNew();
    var budget = TimeSpan.FromMinutes(parse.GetValue(minutes));
    int passed = 0, failed = 0, skipped = 0, unpurged = 0, senderCrashes = 0, gmsFailovers = 0;
    var failures = new List<SoakResult>();
    var gate = new object();
    Parallel.For(first, first + count, new ParallelOptions { MaxDegreeOfParallelism = parse.GetValue(parallel) }, seed =>
    {
        if (deadline.Elapsed > budget)
        {
            Interlocked.Increment(ref skipped);
            return;
        }

        var result = SoakScenario.Run(seed, partitionShare: partitionShare);
        lock (gate)
        {
            senderCrashes += result.Faults.SenderCrash ? 1 : 0;
            gmsFailovers += result.Faults.GmsFailover ? 1 : 0;
            if (result.Passed)
            {
                passed++;
                if (result.Unpurged is not null)
                {
                    unpurged++;
                    Console.WriteLine($"seed {seed} unpurged ({result.Faults}): {result.Unpurged[..Math.Min(result.Unpurged.Length, 300)]}");
                }
            }
            else
            {
                failed++;
                failures.Add(result);
                Console.WriteLine($"seed {seed} FAILED ({result.Faults}): {result.Failure}");
            }

            if ((passed + failed) % 50 == 0)
            {
                Console.WriteLine($"{passed + failed} seeds run, {failed} failed, {deadline.Elapsed.TotalMinutes:F1} min");
            }
        }
    });

    Console.WriteLine($"soak: seeds {first}..{first + count - 1}: delivery {passed} passed, {failed} failed, {skipped} not run (time budget); " +
                      $"{unpurged} of the passed left packets unpurged 5 s after the stream; {deadline.Elapsed.TotalMinutes:F1} min; " +
                      $"{senderCrashes} seeds with a publisher crash, {gmsFailovers} with a GMS leader crash");
    foreach (var failure in failures.OrderBy(f => f.Seed))
    {
        Console.WriteLine($"replay: dotnet run -c Release --project benchmarks/QuickSilver.Soak -- --seed {failure.Seed}{(partitionShare is { } on ? $" --partition-share {(on ? "on" : "off")}" : "")}");
    }

    return failed == 0 && skipped == 0 && unpurged == 0 ? 0 : 1;
});

return root.Parse(args).Invoke();

/// <summary>Stamps a replay's log lines with the seed's virtual time (seconds) instead of the wall clock.</summary>
internal sealed class VirtualTimeEnricher : Serilog.Core.ILogEventEnricher
{
    public void Enrich(Serilog.Events.LogEvent logEvent, Serilog.Core.ILogEventPropertyFactory propertyFactory)
        => logEvent.AddPropertyIfAbsent(propertyFactory.CreateProperty("VirtualTime",
            SoakScenario.VirtualNow is { } now ? now().TotalSeconds.ToString("F3", System.Globalization.CultureInfo.InvariantCulture) + " s" : "-"));
}
