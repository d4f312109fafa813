using System.Globalization;
using QuickSilver.Compare.Output;
using QuickSilver.Compare.Passes;

namespace QuickSilver.Compare;

internal sealed record RunOptions(bool Quick, string Output, IReadOnlyList<string> Systems, long? Messages, long? Warmup, TimeSpan Timeout, double? QsMinRate,
    IReadOnlyList<QuickSilver.Core.Security.DatagramSecurity>? QsSecurity = null)
{
    /// <summary>Measure QuickSilver's ramp instead of the experiments (<see cref="RampOut"/>).</summary>
    public bool Ramp { get; init; }

    /// <summary>Run only the experiments whose name starts with this; null: all.</summary>
    public string? Only { get; init; }

    /// <summary>Runs of each point; the median-rate run is reported, with every run's rate (<see cref="PassResult.Median"/>).</summary>
    public int Repeat { get; init; } = 1;

    /// <summary>The cipher suite of QuickSilver's secure series.</summary>
    public QuickSilver.Core.Security.DatagramCipherSuite QsCipher { get; init; }
}

/// <summary>Runs every experiment's points for every system (a point shared by experiments runs once), then writes a
/// CSV, a PNG and a ratio table per experiment.</summary>
internal static class Runner
{
    public static async Task<int> RunAsync(RunOptions options)
    {
        if (options.Systems.FirstOrDefault(s => !Systems.All.Contains(s)) is { } unknown)
        {
            await Console.Error.WriteLineAsync($"--systems: unknown system '{unknown}'; choose from {string.Join(", ", Systems.All)}");
            return CliChecks.UsageError;
        }

        Directory.CreateDirectory(options.Output);
        if (options.Ramp)
        {
            return await RunRampAsync(options);
        }

        var systems = options.Systems.Distinct()
            .SelectMany(s => s == Systems.QuickSilver ? (options.QsSecurity ?? [default]).Distinct().Select(Systems.QuickSilverWith) : [s])
            .ToList();
        string? classPath = null;
        if (systems.Contains(Systems.JGroups))
        {
            Console.WriteLine("building the JGroups harness (benchmarks/jgroups/build.sh; installs libjgroups-java if missing)...");
            classPath = await JavaHarness.BuildWithScriptAsync();
            if (classPath is null)
            {
                Console.WriteLine("JGroups is unavailable: build.sh failed; JGroups is left out of this run.");
                systems.Remove(Systems.JGroups);
            }
        }

        if (systems.Contains(Systems.Sockperf) && !await SockperfPass.InstallAsync())
        {
            Console.WriteLine("sockperf is unavailable: benchmarks/sockperf/install.sh failed; sockperf is left out of this run.");
            systems.Remove(Systems.Sockperf);
        }

        var done = new Dictionary<(string, ExperimentPoint), PassResult>();
        var summary = new List<string>();
        foreach (var experiment in Plan.Create(options.Quick, options.Messages, options.Warmup)
                     .Where(e => options.Only is null || e.Name.StartsWith(options.Only, StringComparison.Ordinal)))
        {
            var passes = (from point in experiment.Points
                          from system in systems.Where(s => Plan.Runs(s, point))
                          select (System: system, Point: point)).ToList();
            var pending = passes.Where(pass => !done.ContainsKey(pass)).ToList();
            var runs = pending.ToDictionary(pass => pass, _ => new List<PassResult>());
            foreach (var (round, (system, point)) in Plan.Rounds(pending, options.Repeat))
            {
                var run = await RunPassAsync(system, new PassContext(point, options.Timeout, options.QsMinRate, SecurityOf(system), options.Quick ? 2 : 5) { QsCipher = options.QsCipher }, classPath);
                runs[(system, point)].Add(run);
                CollectGarbage();
                Console.WriteLine(options.Repeat > 1 ? $"round {round + 1} of {options.Repeat}: {Describe(experiment.Name, run)}" : Describe(experiment.Name, run));
            }

            foreach (var pass in pending)
            {
                done[pass] = options.Repeat == 1 ? runs[pass][0] : PassResult.Median(runs[pass]);
                if (options.Repeat > 1)
                {
                    Console.WriteLine(Describe(experiment.Name, done[pass])); // the median run
                }
            }

            var results = passes.Select(pass => done[pass]).ToList();
            CsvOut.Write(Path.Combine(options.Output, experiment.Name + ".csv"), experiment.Name, results);
            PlotOut.Write(Path.Combine(options.Output, experiment.Name + ".png"), experiment, results);
            summary.Add($"### {experiment.Name}\n\n{Ratios.Markdown(experiment, results)}{Ratios.Paired(experiment, [.. pending.Select(pass => done[pass])])}");
        }

        string markdown = string.Join("\n", summary);
        await File.WriteAllTextAsync(Path.Combine(options.Output, "summary.md"), markdown);
        Console.WriteLine();
        Console.WriteLine(markdown);
        return done.Values.All(r => r.AllArrived || r.System is Systems.RawUdp or Systems.Sockperf) ? 0 : 1;
    }

    /// <summary>One QuickSilver pass from a cold start with arrival timelines at every receiver: the ramp.</summary>
    private static async Task<int> RunRampAsync(RunOptions options)
    {
        var point = new ExperimentPoint(2, 1, 1000, 0, options.Messages ?? 1_000_000, options.Warmup ?? 0);
        string folder = Path.Combine(options.Output, "ramp-timelines");
        Directory.CreateDirectory(folder);
        var pass = await RunPassAsync(Systems.QuickSilver, new PassContext(point, options.Timeout, options.QsMinRate, TimelineFolder: folder), null);
        Console.WriteLine(Describe("ramp", pass));
        if (pass.FirstSendMicros == 0)
        {
            await Console.Error.WriteLineAsync("ramp: the sender never sent");
            return 1;
        }

        var series = new List<RampSeries>();
        for (int i = 0; i < point.Receivers; i++)
        {
            string file = Path.Combine(folder, $"receiver-{i}.timeline");
            if (File.Exists(file))
            {
                var (first, perMs) = ArrivalTimeline.Parse(await File.ReadAllTextAsync(file));
                series.Add(RampOut.Analyze(i, pass.FirstSendMicros, first, perMs));
            }
        }

        RampOut.Write(options.Output, series, pass);
        string markdown = RampOut.Markdown(series, pass);
        await File.WriteAllTextAsync(Path.Combine(options.Output, "summary.md"), markdown);
        Console.WriteLine(markdown);
        return pass.AllArrived && series.Count == point.Receivers ? 0 : 1;
    }

    private static async Task<PassResult> RunPassAsync(string system, PassContext context, string? classPath)
    {
        try
        {
            return system switch
            {
                _ when Systems.IsQuickSilver(system) => await QsPass.RunAsync(context),
                Systems.JGroups => await JGroupsPass.RunAsync(context, classPath!),
                Systems.Sockperf => await SockperfPass.RunAsync(context),
                _ => await UdpPass.RunAsync(context),
            };
        }
        catch (Exception e) when (e is OperationCanceledException or IOException or InvalidOperationException or System.Net.Sockets.SocketException or TimeoutException)
        {
            return PassResult.Failed(system, context.Point, $"failed: {e.GetType().Name}: {e.Message}");
        }
    }

    /// <summary>Between passes: QuickSilver's sender and GMS live in this process, so one pass's garbage (a node in 1,024
    /// groups, its views) would otherwise be collected during a later pass's measured window.</summary>
    private static void CollectGarbage()
    {
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
    }

    private static QuickSilver.Core.Security.DatagramSecurity SecurityOf(string system)
        => Enum.GetValues<QuickSilver.Core.Security.DatagramSecurity>().FirstOrDefault(m => Systems.QuickSilverWith(m) == system);

    private static string Describe(string experiment, PassResult r)
    {
        var c = CultureInfo.InvariantCulture;
        string delivery = r.System == Systems.Sockperf
            ? "(no delivery guarantee)"
            : string.Create(c, $"{r.MinReceived}/{r.Point.Total} (warm-up {r.Point.Warmup}) {(r.AllArrived ? "all arrived" : "NOT ALL ARRIVED")}");
        string cpu = r.SenderCpuMicros > 0
            ? string.Create(c, $" cpu µs/msg: sender {r.CpuMicrosPerMessage.Sender:0.000}, receiver {r.CpuMicrosPerMessage.Receiver:0.000}; receiver working set {r.ReceiverWorkingSetMb} MiB")
            : "";
        string runs = r.Runs.Count > 1 ? $" runs: {string.Join(" / ", r.Runs.Select(x => x.ToString("N0", c)))} (median shown)" : "";
        return string.Create(c,
            $"{experiment,-16} {r.System,-24} R={r.Point.Receivers} G={r.Point.Groups,-3} S={r.Point.Size,-4} loss={r.Point.Loss:P0} {r.MessagesPerSecond,10:N0} msg/s {r.MegabytesPerSecond,7:N1} MB/s  {delivery}{cpu}{runs} {r.Note}");
    }
}
