using System.CommandLine;

namespace QuickSilver.Compare;

/// <summary>The runner's command line: the options of a run and the hidden <c>role</c> command of its child processes.</summary>
internal static class Cli
{
    public static RootCommand Build()
    {
        var quick = new Option<bool>("--quick")
        {
            Description = $"About 2 minutes: 1000 B experiments and one 100 B point, {Plan.QuickWarmup:N0} warm-up + {Plan.QuickMessages:N0} measured messages a point.",
        };
        var output = new Option<string>("--output") { Description = "Folder of the CSVs, PNGs and summary.md.", DefaultValueFactory = _ => "docs/compare" };
        var systems = new Option<string[]>("--systems")
        {
            Description = "Systems to measure: QuickSilver, JGroups, RawUDP, sockperf (Debian's native raw-UDP tool, unlimited sender; installed by benchmarks/sockperf/install.sh).",
            DefaultValueFactory = _ => [.. Systems.All],
            AllowMultipleArgumentsPerToken = true,
        };
        var messages = new Option<long?>("--messages") { Description = $"Measured messages per point (default {Plan.QuickMessages:N0} quick, {Plan.FullMessages:N0} full)." };
        var warmup = new Option<long?>("--warmup")
        {
            Description = $"Warm-up messages the sender sends before the measured ones at every point, for every system (delivered and checked, not timed; default {Plan.QuickWarmup:N0} quick, {Plan.FullWarmup:N0} full; 0 for none).",
        };
        var minRate = new Option<double?>("--qs-min-rate")
        {
            Description = "Override QuickSilver's starting/minimum send rate (RateControlOptions.MinRate, packets/s; default 1000) to see past rate control's warm-up.",
        };
        var auth = new Option<string[]>("--auth")
        {
            Description = "QuickSilver's datagram security, one series per mode, side by side in this run: off, authenticate, encrypt (comma- or space-separated; default off).",
            DefaultValueFactory = _ => ["off"],
            AllowMultipleArgumentsPerToken = true,
        };
        auth.Validators.Add(r =>
        {
            foreach (var mode in SplitModes(r.GetValueOrDefault<string[]>() ?? []))
            {
                if (!Enum.TryParse<QuickSilver.Core.Security.DatagramSecurity>(mode, ignoreCase: true, out _))
                {
                    r.AddError($"--auth takes off, authenticate and encrypt; got '{mode}'.");
                }
            }
        });
        var cipher = new Option<string>("--cipher")
        {
            Description = "The cipher suite of QuickSilver's secure series: aegis128l (the default) or aesgcm.",
            DefaultValueFactory = _ => "aegis128l",
        };
        cipher.Validators.Add(r =>
        {
            if (!Enum.TryParse<QuickSilver.Core.Security.DatagramCipherSuite>(r.GetValueOrDefault<string>(), ignoreCase: true, out var suite) || !Enum.IsDefined(suite))
            {
                r.AddError($"--cipher takes aegis128l or aesgcm; got '{r.GetValueOrDefault<string>()}'.");
            }
        });
        var ramp = new Option<bool>("--ramp")
        {
            Description = "Instead of the experiments: QuickSilver's ramp from a cold start (2 receivers, 1000 B, no warm-up, --messages, default 1,000,000): each receiver's rate per 10 ms from the sender's first send, ramp.csv, ramp.png and the time to 90 % of the steady rate in summary.md.",
        };
        var only = new Option<string?>("--only") { Description = "Run only the experiments whose name starts with this (e.g. groups-1000B, loss, receivers)." };
        var repeat = new Option<int>("--repeat")
        {
            Description = "Runs of every point (1 to 20); the run with the median rate is reported, with every run's rate (this machine is shared: one run a point is noise of ±15 %).",
            DefaultValueFactory = _ => 1,
        };
        repeat.Validators.Add(r =>
        {
            int v = r.GetValueOrDefault<int>();
            if (v is < 1 or > 20)
            {
                r.AddError($"--repeat must be 1 to 20; got {v}.");
            }
        });
        var timeout = new Option<int?>("--timeout") { Description = "Seconds any one process of a pass may run (default 60 in quick mode, 240 in full mode)." };
        CliChecks.AtLeast(messages, 1);
        CliChecks.AtLeast(warmup, 0);
        CliChecks.AtLeast(timeout, 1);
        minRate.Validators.Add(r =>
        {
            if (CliChecks.TryValue<double>(r) is { } v && !(v > 0 && double.IsFinite(v)))
            {
                r.AddError($"--qs-min-rate must be a positive number of packets/s; got {v}.");
            }
        });
        
        var root = new RootCommand("QuickSilver vs JGroups vs raw UDP over loopback IP multicast: a CSV, a PNG and ratios per experiment.")
        {
            quick, output, systems, messages, warmup, timeout, minRate, auth, cipher, ramp, only, repeat,
        };
        root.SetAction((parse, _) => Runner.RunAsync(new RunOptions(
            parse.GetValue(quick), parse.GetValue(output)!, parse.GetValue(systems)!, parse.GetValue(messages), parse.GetValue(warmup),
            TimeSpan.FromSeconds(parse.GetValue(timeout) ?? (parse.GetValue(quick) ? 60 : 240)), parse.GetValue(minRate),
            [.. SplitModes(parse.GetValue(auth) ?? []).Select(m => Enum.Parse<QuickSilver.Core.Security.DatagramSecurity>(m, ignoreCase: true))])
        {
            Ramp = parse.GetValue(ramp),
            Only = parse.GetValue(only),
            Repeat = parse.GetValue(repeat),
            QsCipher = Enum.Parse<QuickSilver.Core.Security.DatagramCipherSuite>(parse.GetValue(cipher)!, ignoreCase: true),
        }));
        
        var roleName = new Argument<string>("name");
        var roleArgs = new Argument<string[]>("args") { Arity = ArgumentArity.ZeroOrMore };
        var role = new Command("role", "A child process of the runner.") { Hidden = true };
        role.Arguments.Add(roleName);
        role.Arguments.Add(roleArgs);
        role.SetAction((parse, _) => Roles.RunAsync(parse.GetValue(roleName)!, parse.GetValue(roleArgs) ?? []));
        root.Subcommands.Add(role);
        return root;
    }

    private static IEnumerable<string> SplitModes(IEnumerable<string> values)
        => values.SelectMany(v => v.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries));
}
