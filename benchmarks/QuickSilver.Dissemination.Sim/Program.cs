using System.Diagnostics;
using System.Globalization;
using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Scheduling;
using QuickSilver.Dissemination.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Dissemination.Sim;

/// <summary>
/// The WebBase dissemination seed's results (001 §4) in simulation: the real server and client state machines on
/// virtual time. Commands: <c>scale</c> (R/Q against circular as clients grow; server work per client) and
/// <c>pages</c> (the page-size sweep and control traffic). See docs/dissemination.md.
/// </summary>
internal static class Program
{
    private static int Main(string[] args)
    {
        try
        {
            var o = Options.Parse(args);
            Console.WriteLine($"# {string.Join(' ', args)}");
            Console.WriteLine($"# files {o.Files}, {o.TotalBytes:N0} B, channel {o.Rate:N0} B/s x {o.Channels}, loss {o.Loss:P1}, redundancy {o.Redundancy}, seed {o.Seed}, {RuntimeEnvironment()}");
            if (o.Command == "scale")
            {
                Console.WriteLine("| clients | scheduler | request | mean delay (s) | mean delay / full cycle | p95 delay (s) | transmissions | data MB sent | repair share | NAKs | server busy ms | server busy µs per client per virtual s | pairs read per decision | virtual s | wall s |");
                Console.WriteLine("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
                foreach (int n in o.Clients)
                {
                    foreach (var kind in o.Schedulers)
                    {
                        Run(o, n, kind, o.PageSize);
                    }
                }
            }
            else
            {
                Console.WriteLine("| page size | clients | scheduler | mean delay (s) | transmissions | announce B/s | request channel B/s | control B/s | server busy ms | server busy µs per virtual s | virtual s | wall s |");
                Console.WriteLine("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
                foreach (int size in o.PageSizes)
                {
                    foreach (int n in o.Clients)
                    {
                        foreach (var kind in o.Schedulers)
                        {
                            Run(o, n, kind, size);
                        }
                    }
                }
            }

            return 0;
        }
        catch (ArgumentException e)
        {
            Console.Error.WriteLine(e.Message);
            return 2;
        }
    }

    private static string RuntimeEnvironment() => $".NET {Environment.Version}, {Environment.ProcessorCount} CPUs";

    private static void Run(Options o, int clients, SchedulerKind kind, int pageSize)
    {
        var wall = Stopwatch.StartNew();
        var pages = new PageOptions { PageSize = pageSize };
        var server = new ServerOptions
        {
            Pages = pages,
            DataChannels = o.Channels,
            ChannelBytesPerSecond = o.Rate,
            Scheduler = kind,
            AnnounceDelay = TimeSpan.FromMilliseconds(100),
            RedundancyMode = o.Redundancy,
        };
        var files = MakeFiles(o, pages);
        var sim = new DisseminationSim(o.Seed, server, files);
        sim.Server.WorkTimer = Stopwatch.GetTimestamp;
        var random = new Random(o.Seed + 1);
        var names = files.Catalog.Files.Select(f => f.Name).ToArray();
        double cycle = (double)o.TotalBytes / (o.Rate * o.Channels);
        var arrivals = TimeSpan.FromSeconds(o.ArrivalWindow ?? cycle) / clients;
        var link = o.Loss > 0 ? new LinkOptions { LossRate = o.Loss } : null;
        var clientOptions = new ClientOptions { StallTimeout = TimeSpan.FromSeconds(60) };
        for (int i = 0; i < clients; i++)
        {
            string[] request = o.RequestAll ? names : names.OrderBy(_ => random.Next()).Take(random.Next(1, o.MaxRequestFiles + 1)).ToArray();
            var c = sim.AddClient(request, clientOptions, link, new CheckingPageStore(files));
            c.Start();
            sim.Network.RunFor(arrivals);
        }

        bool done = sim.RunUntilComplete(TimeSpan.FromSeconds(cycle * 40));
        var delays = sim.Clients.Where(c => c.Client!.IsComplete).Select(c => (c.Client!.CompletedAt - c.StartedAt).TotalSeconds).Order().ToArray();
        var sc = sim.Server.Counters;
        double virtualSeconds = sim.Network.Now.TotalSeconds;
        double busyMs = sc.BusyTicks * 1000.0 / Stopwatch.Frequency;
        long mismatches = sim.Clients.Sum(c => ((CheckingPageStore)c.Store).Mismatches);
        if (!done || mismatches > 0)
        {
            Console.WriteLine($"# INCOMPLETE: {delays.Length} of {clients} clients complete, {mismatches} page mismatches");
        }

        Console.WriteLine($"# clients in all: NAKs sent {sim.Clients.Sum(c => c.Client!.Counters.NaksSent)}, incomplete pages spilled {sim.Clients.Sum(c => c.Client!.Counters.PartialsSpilled)}, dropped {sim.Clients.Sum(c => c.Client!.Counters.PartialsEvicted)}; skipped for capacity {sim.Clients.Sum(c => c.Client!.Counters.SkippedForCapacity)}, tracking overflows {sim.Clients.Sum(c => c.Client!.Counters.TrackedOverflow)}, repair-only transmissions {sc.RepairOnlyTransmissions}, useful packets {sim.Clients.Sum(c => c.Client!.Counters.UsefulPackets)} of {sim.Clients.Sum(c => c.Client!.Counters.DataPackets)}");
        double mean = delays.Length == 0 ? double.NaN : delays.Average();
        double p95 = delays.Length == 0 ? double.NaN : delays[(int)Math.Min(delays.Length - 1, Math.Ceiling(delays.Length * 0.95) - 1)];
        string F(double v, int d = 1) => v.ToString("N" + d, CultureInfo.InvariantCulture);
        if (o.Command == "scale")
        {
            Console.WriteLine($"| {clients} | {kind} | {(o.RequestAll ? "all files" : $"1–{o.MaxRequestFiles} files")} | {F(mean)} | {F(mean / cycle, 2)} | {F(p95)} | {sc.Transmissions:N0} | {F(sc.DataBytesSent / 1e6, 2)} | {F(100.0 * sc.RepairPacketsSent / Math.Max(1, sc.SourcePacketsSent + sc.RepairPacketsSent))} % | {sc.NaksAccepted:N0} | {F(busyMs)} | {F(busyMs * 1000 / clients / virtualSeconds, 2)} | {F((double)sc.PairsExamined / Math.Max(1, sc.Decisions), 0)} | {F(virtualSeconds, 0)} | {F(wall.Elapsed.TotalSeconds)} |");
        }
        else
        {
            double announce = sc.AnnounceBytes / virtualSeconds;
            double request = sim.RequestChannelBytes / virtualSeconds;
            Console.WriteLine($"| {pageSize:N0} | {clients} | {kind} | {F(mean)} | {sc.Transmissions:N0} | {F(announce)} | {F(request)} | {F(announce + request)} | {F(busyMs)} | {F(busyMs * 1000 / virtualSeconds)} | {F(virtualSeconds, 0)} | {F(wall.Elapsed.TotalSeconds)} |");
        }
    }

    /// <summary>22 files by default whose sizes spread like the seed's Table 1 (largest about four times the smallest),
    /// scaled to the total, with seeded random content.</summary>
    private static MemoryPageSource MakeFiles(Options o, PageOptions pages)
    {
        var random = new Random(o.Seed);
        var weights = Enumerable.Range(0, o.Files).Select(_ => 462_732 + (random.NextDouble() * (1_885_394 - 462_732))).ToArray();
        double sum = weights.Sum();
        var source = new MemoryPageSource(new FileCatalog(pages));
        long left = o.TotalBytes;
        for (int i = 0; i < o.Files; i++)
        {
            long size = i == o.Files - 1 ? left : (long)(o.TotalBytes * weights[i] / sum);
            left -= size;
            var bytes = new byte[size];
            random.NextBytes(bytes);
            source.Add($"file{i:D2}.bin", bytes);
        }

        return source;
    }

    private sealed record Options
    {
        public string Command { get; init; } = "scale";
        public int Files { get; init; } = 22;
        public long TotalBytes { get; init; } = 2_053_376;
        public int Rate { get; init; } = 10_000;
        public int Channels { get; init; } = 1;
        public double Loss { get; init; }
        public int Seed { get; init; } = 1;
        public int PageSize { get; init; } = 30_000;
        public int[] Clients { get; init; } = { 10, 100, 400, 1000 };
        public int[] PageSizes { get; init; } = { 1_000, 5_000, 15_000, 30_000, 58_000 };
        public SchedulerKind[] Schedulers { get; init; } = { SchedulerKind.RQ, SchedulerKind.Circular };
        public bool RequestAll { get; init; }
        public int MaxRequestFiles { get; init; } = 4;
        public double? ArrivalWindow { get; init; }

        /// <summary>The seed's rule by default: these runs reproduce its figures.</summary>
        public RedundancyMode Redundancy { get; init; } = RedundancyMode.Paper;

        public static Options Parse(string[] args)
        {
            if (args.Length == 0 || (args[0] != "scale" && args[0] != "pages"))
            {
                throw new ArgumentException("usage: (scale | pages) [--clients 10,100,...] [--page-sizes 1000,...] [--page-size B] [--scheduler rq,circular] [--files N] [--total-bytes B] [--rate B/s] [--channels d] [--loss p] [--seed n] [--request all|N] [--arrival-window s] [--redundancy paper|adaptive]");
            }

            var o = new Options { Command = args[0] };
            if (o.Command == "pages")
            {
                o = o with { Clients = new[] { 100 }, Schedulers = new[] { SchedulerKind.RQ }, RequestAll = true, ArrivalWindow = 10 };
            }

            for (int i = 1; i < args.Length; i++)
            {
                string name = args[i];
                if (i + 1 >= args.Length)
                {
                    throw new ArgumentException($"{name} needs a value.");
                }

                string v = args[++i];
                o = name switch
                {
                    "--clients" => o with { Clients = Ints(name, v, 1, 100_000) },
                    "--page-sizes" => o with { PageSizes = Ints(name, v, 500, PageOptions.MaxPageSize) },
                    "--page-size" => o with { PageSize = Ints(name, v, 500, PageOptions.MaxPageSize)[0] },
                    "--scheduler" => o with { Schedulers = v.Split(',').Select(s => s.Trim().ToLowerInvariant() switch { "rq" => SchedulerKind.RQ, "circular" => SchedulerKind.Circular, _ => throw new ArgumentException($"--scheduler: '{s}' is not rq or circular.") }).ToArray() },
                    "--files" => o with { Files = Ints(name, v, 1, 1000)[0] },
                    "--total-bytes" => o with { TotalBytes = Ints(name, v, 1, int.MaxValue)[0] },
                    "--rate" => o with { Rate = Ints(name, v, 1000, int.MaxValue)[0] },
                    "--channels" => o with { Channels = Ints(name, v, 1, 64)[0] },
                    "--seed" => o with { Seed = Ints(name, v, 0, int.MaxValue)[0] },
                    "--loss" => o with { Loss = Double(name, v, 0, 0.5) },
                    "--redundancy" => o with { Redundancy = v switch { "paper" => RedundancyMode.Paper, "adaptive" => RedundancyMode.Adaptive, _ => throw new ArgumentException($"--redundancy: '{v}' is not paper or adaptive.") } },
                    "--arrival-window" => o with { ArrivalWindow = Double(name, v, 0.001, 1e6) },
                    "--request" => v == "all" ? o with { RequestAll = true } : o with { RequestAll = false, MaxRequestFiles = Ints(name, v, 1, 1000)[0] },
                    _ => throw new ArgumentException($"Unknown option {name}."),
                };
            }

            if (o.Files > o.TotalBytes)
            {
                throw new ArgumentException("--files must not exceed --total-bytes.");
            }

            return o;
        }

        private static int[] Ints(string name, string v, int min, int max)
        {
            var parts = v.Split(',');
            var result = new int[parts.Length];
            for (int i = 0; i < parts.Length; i++)
            {
                if (!int.TryParse(parts[i], NumberStyles.Integer, CultureInfo.InvariantCulture, out result[i]) || result[i] < min || result[i] > max)
                {
                    throw new ArgumentException($"{name}: '{parts[i]}' must be an integer between {min} and {max}.");
                }
            }

            return result;
        }

        private static double Double(string name, string v, double min, double max)
        {
            if (!double.TryParse(v, NumberStyles.Float, CultureInfo.InvariantCulture, out double d) || d < min || d > max)
            {
                throw new ArgumentException($"{name}: '{v}' must be a number between {min} and {max}.");
            }

            return d;
        }
    }
}
