using System.CommandLine;
using System.Diagnostics;
using System.Globalization;
using QuickSilver.BenchmarkOutput;
using QuickSilver.Figures;

// The QSM simulation figures: the paper's evaluation (§3) re-run on the simulated network in virtual time.
var quick = new Option<bool>("--quick") { Description = "Short windows and a subset of each sweep (about 2 minutes)." };
var output = new Option<string>("--out") { Description = "Folder for the CSV and PNG files.", DefaultValueFactory = _ => "docs/figures" };
var plotOnly = new Option<bool>("--plot-only") { Description = "Run nothing: redraw the PNG of every experiment CSV already in the --out folder." };
var only = new Option<string?>("--only") { Description = "Run only the experiments whose CSV file names start with these comma-separated prefixes, in that order (e.g. groups, or recovery,ack)." };
var maxNodes = new Option<int>("--max-nodes") { Description = "Largest region (250 by default; 1000 adds 1,000-node runs, which need far more memory and time).", DefaultValueFactory = _ => 250 };
var flow = new Option<string>("--flow")
{
    Description = "What paces the senders: paper (the paper's rate controller, the default: these are the paper's figures) or receivers (the receivers' windows, QuickSilver's default).",
    DefaultValueFactory = _ => "paper",
};
flow.AcceptOnlyFromAmong("paper", "receivers");
var receiveWindow = new Option<int?>("--receive-window") { Description = "With --flow receivers: each receiver's window in bytes (default: what its 1,000-datagram receive queue holds, 144,000)." };
var congestion = new Option<string>("--congestion-control")
{
    Description = "With --flow receivers: on (the library's default) or off: senders keep a congestion window cut on receive-queue overflow (RegionOptions.CongestionControl).",
    DefaultValueFactory = _ => "on",
};
congestion.AcceptOnlyFromAmong("on", "off");
var share = new Option<string>("--partition-share")
{
    Description = "on or off (the library's default): after delivery members keep only their partition's share (RegionOptions.PartitionShare); the throughput table reports each member's peak of held packets.",
    DefaultValueFactory = _ => "on",
};
share.AcceptOnlyFromAmong("on", "off");
var leaderRepair = new Option<string>("--leader-repair")
{
    Description = "With --flow receivers: on (the library's default) or off: partition leaders send their members the packets their reports name missing, and the sender resends only the rest (RegionOptions.LeaderRepair).",
    DefaultValueFactory = _ => "on",
};
leaderRepair.AcceptOnlyFromAmong("on", "off");
var fixedRate = new Option<int?>("--fixed-rate") { Description = "With --flow paper: send at this many packets/s throughout (μ_min = this, λ = 0), below what the receivers take, to measure recovery without overload." };
var seed = new Option<int?>("--seed") { Description = "The simulated network's seed (its losses and jitter; default 2006): one seed is one sample, rerun with others to see the spread." };
var gapPackets = new Option<int?>("--gap-report-packets") { Description = "With --flow receivers: the packets a flow report's gap map covers (RegionOptions.GapReportPackets: 64 to 1,024, a multiple of 64; default 1,024; 64 was the map before the tail fix)." };
var nodes = new Option<string?>("--nodes") { Description = "Run only the region sizes in this comma-separated list (e.g. 250: the 250-member point of each sweep alone)." };
var wallBudget = new Option<int?>("--wall-budget") { Description = "Seconds of wall time after which one run is cut (default 60 quick, 240 full)." };

var root = new RootCommand("QuickSilver QSM figures: throughput, partitioning, token rate, senders, recovery and ACK latency in simulation.")
{
    quick, output, maxNodes, only, plotOnly, wallBudget, flow, receiveWindow, congestion, share, leaderRepair, fixedRate, seed, gapPackets, nodes,
};

root.SetAction(parse =>
{
    Testbed.FlowControl = parse.GetValue(flow) == "receivers" ? QuickSilver.Qsm.Region.RegionFlowControl.ReceiverWindow : QuickSilver.Qsm.Region.RegionFlowControl.PaperRate;
    if (parse.GetValue(seed) is { } seeded)
    {
        if (seeded < 0)
        {
            Console.Error.WriteLine("--seed must be 0 or more");
            return 2;
        }

        Testbed.Seed = seeded;
    }

    if (parse.GetValue(gapPackets) is { } packets)
    {
        if (packets < 64 || packets > 1024 || packets % 64 != 0)
        {
            Console.Error.WriteLine("--gap-report-packets must be a multiple of 64 from 64 to 1,024");
            return 2;
        }

        Testbed.GapReportPackets = packets;
    }

    if (parse.GetValue(receiveWindow) is { } window)
    {
        if (window < 65_536 || window > 1 << 30)
        {
            Console.Error.WriteLine("--receive-window must be between 65,536 and 1,073,741,824 bytes");
            return 2;
        }

        Testbed.ReceiveWindowBytes = window;
    }

    if (parse.GetValue(fixedRate) is { } rate)
    {
        if (rate < 1 || rate > 1_000_000 || Testbed.FlowControl != QuickSilver.Qsm.Region.RegionFlowControl.PaperRate)
        {
            Console.Error.WriteLine("--fixed-rate must be between 1 and 1,000,000 packets/s, with --flow paper");
            return 2;
        }

        Testbed.FixedRate = rate;
    }

    Testbed.CongestionControl = parse.GetValue(congestion) == "on";
    Testbed.PartitionShare = parse.GetValue(share) == "on";
    Testbed.LeaderRepair = parse.GetValue(leaderRepair) == "on";
    var mode = parse.GetValue(quick) ? FigureMode.Quick(parse.GetValue(maxNodes)) : FigureMode.Full(parse.GetValue(maxNodes));
    if (parse.GetValue(wallBudget) is { } budget)
    {
        if (budget < 1)
        {
            Console.Error.WriteLine("--wall-budget must be at least 1 second");
            return 2;
        }

        mode = mode with { Length = mode.Length with { WallBudget = TimeSpan.FromSeconds(budget) } };
    }

    if (parse.GetValue(nodes) is { } sizes)
    {
        var wanted = new HashSet<int>();
        foreach (string size in sizes.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
        {
            if (!int.TryParse(size, NumberStyles.None, CultureInfo.InvariantCulture, out int n) || n < 1)
            {
                Console.Error.WriteLine($"--nodes must be a comma-separated list of region sizes (1 or more), not '{size}'");
                return 2;
            }

            wanted.Add(n);
        }

        mode = mode.OnlySizes(wanted);
    }

    string folder = parse.GetValue(output)!;
    if (parse.GetValue(plotOnly))
    {
        var drawn = FigurePlots.RedrawAll(folder);
        foreach (var png in drawn)
        {
            Console.WriteLine(png);
        }

        Console.WriteLine($"{drawn.Count} plot(s) redrawn from the CSVs in {folder}");
        return drawn.Count > 0 ? 0 : 1;
    }

    Directory.CreateDirectory(folder);
    var c = CultureInfo.InvariantCulture;
    Console.WriteLine($"# QSM in simulation ({mode.Name} mode)");
    Console.WriteLine();
    foreach (var line in Testbed.Describe())
    {
        Console.WriteLine("- " + line);
    }

    Console.WriteLine(string.Create(c, $"- runs: {mode.Length.Warmup.TotalSeconds:F0} s warm-up + {mode.Length.Window.TotalSeconds:F0} s measured (virtual), stopped after {mode.Length.WallBudget.TotalSeconds:F0} s of wall time; sender window {RunSpec.DefaultWindow}; 1 s token unless stated; R = 5 unless stated"));
    Console.WriteLine();
    var wall = Stopwatch.StartNew();
    string? filter = parse.GetValue(only);
    foreach (var (file, table) in new Experiments(mode, Console.Error.WriteLine).All(filter))
    {
        var csv = new CsvTable(table.Columns);
        foreach (var row in table.Rows)
        {
            csv.Add(row);
        }

        csv.Write(Path.Combine(folder, file));
        FigurePlots.Write(folder, file, csv);

        Console.WriteLine($"## {table.Title}");
        Console.WriteLine();
        Console.Write(table.Rows.Count <= 40 ? table.ToMarkdown() : string.Create(c, $"{table.Rows.Count} rows: see the CSV file.\n"));
        Console.WriteLine();
        Console.WriteLine(string.Create(c, $"({file} and its PNG; {wall.Elapsed.TotalSeconds:F0} s wall so far)"));
        Console.WriteLine();
    }

    return 0;
});

// The seed sweep of one lossy region, leader repair off and on side by side (docs/qsm.md, "Leader repair"):
//   dotnet benchmarks/QuickSilver.Figures/bin/Release/net10.0/QuickSilver.Figures.dll sweep --members 25 --seeds 1-12 --loss 0.01 [--model fast]
var sweepMembers = new Option<int>("--members") { Description = "Region members (2 to 1,000).", DefaultValueFactory = _ => 25 };
sweepMembers.Validators.Add(r =>
{
    if (r.GetValue(sweepMembers) is < 2 or > 1000)
    {
        r.AddError("--members must be between 2 and 1,000");
    }
});
var sweepSeeds = new Option<string>("--seeds") { Description = "Seeds: a range (1-12) or a comma-separated list.", DefaultValueFactory = _ => "1-12" };
var sweepLoss = new Option<double>("--loss") { Description = "Loss on every link, 0 to 0.5.", DefaultValueFactory = _ => 0.01 };
sweepLoss.Validators.Add(r =>
{
    if (r.GetValue(sweepLoss) is < 0 or > 0.5 or double.NaN)
    {
        r.AddError("--loss must be between 0 and 0.5");
    }
});
var sweepWarmup = new Option<double>("--warmup") { Description = "Virtual seconds before the window (0.1 to 600).", DefaultValueFactory = _ => 3 };
var sweepWindow = new Option<double>("--window") { Description = "Virtual seconds measured (0.1 to 600).", DefaultValueFactory = _ => 3 };
foreach (var seconds in new[] { sweepWarmup, sweepWindow })
{
    seconds.Validators.Add(r =>
    {
        if (r.GetValue(seconds) is < 0.1 or > 600 or double.NaN)
        {
            r.AddError($"{seconds.Name} must be between 0.1 and 600 seconds");
        }
    });
}

var sweepModel = new Option<string>("--model")
{
    Description = "paper (the paper's cost model: 100 Mbit/s, 100-byte packets, 100 µs of receive CPU per datagram) or fast (10 Gbit/s, 16,000-byte packets, no receive CPU cost).",
    DefaultValueFactory = _ => "paper",
};
sweepModel.AcceptOnlyFromAmong("paper", "fast");
var sweep = new Command("sweep", "One lossy region per seed, leader repair off and on side by side (receivers' windows).")
{
    sweepMembers, sweepSeeds, sweepLoss, sweepWarmup, sweepWindow, sweepModel,
};
sweep.SetAction(parse =>
{
    string text = parse.GetValue(sweepSeeds)!;
    var seeds = new List<int>();
    var range = text.Split('-', StringSplitOptions.TrimEntries);
    if (range.Length == 2 && int.TryParse(range[0], NumberStyles.None, CultureInfo.InvariantCulture, out int first)
        && int.TryParse(range[1], NumberStyles.None, CultureInfo.InvariantCulture, out int last) && first <= last && last - first < 10_000)
    {
        seeds.AddRange(Enumerable.Range(first, last - first + 1));
    }
    else
    {
        foreach (string one in text.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
        {
            if (!int.TryParse(one, NumberStyles.None, CultureInfo.InvariantCulture, out int seedValue))
            {
                Console.Error.WriteLine($"--seeds must be a range (1-12) or a comma-separated list of seeds, not '{text}'");
                return 2;
            }

            seeds.Add(seedValue);
        }
    }

    if (seeds.Count == 0)
    {
        Console.Error.WriteLine("--seeds names no seed");
        return 2;
    }

    LossSweep.Run(parse.GetValue(sweepMembers), seeds, parse.GetValue(sweepLoss), TimeSpan.FromSeconds(parse.GetValue(sweepWarmup)),
        TimeSpan.FromSeconds(parse.GetValue(sweepWindow)), parse.GetValue(sweepModel) == "fast", Console.Out);
    return 0;
});
root.Subcommands.Add(sweep);

return root.Parse(args).Invoke();
