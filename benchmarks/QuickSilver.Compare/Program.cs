using System.CommandLine;
using QuickSilver.Compare;

// The comparison runner: QuickSilver vs JGroups vs raw UDP over loopback IP multicast, one process per member.
// "role" is the hidden entry of the runner's own child processes.
var quick = new Option<bool>("--quick") { Description = "About 2 minutes: 1000 B experiments and one 100 B point, 20,000 messages a point." };
var output = new Option<string>("--output") { Description = "Folder of the CSVs, PNGs and summary.md.", DefaultValueFactory = _ => "docs/compare" };
var systems = new Option<string[]>("--systems")
{
    Description = "Systems to measure: QuickSilver, JGroups, RawUDP.",
    DefaultValueFactory = _ => [.. Systems.All],
    AllowMultipleArgumentsPerToken = true,
};
var messages = new Option<long?>("--messages") { Description = "Messages per point (overrides the mode's count)." };
var minRate = new Option<double?>("--qs-min-rate")
{
    Description = "Override QuickSilver's starting/minimum send rate (RateControlOptions.MinRate, packets/s; default 1000) to see past rate control's warm-up.",
};
var timeout = new Option<int?>("--timeout") { Description = "Seconds any one process of a pass may run (default 60 in quick mode, 240 in full mode)." };

var root = new RootCommand("QuickSilver vs JGroups vs raw UDP over loopback IP multicast: a CSV, a PNG and ratios per experiment.")
{
    quick, output, systems, messages, timeout, minRate,
};
root.SetAction((parse, _) => Runner.RunAsync(new RunOptions(
    parse.GetValue(quick), parse.GetValue(output)!, parse.GetValue(systems)!, parse.GetValue(messages), TimeSpan.FromSeconds(parse.GetValue(timeout) ?? (parse.GetValue(quick) ? 60 : 240)), parse.GetValue(minRate))));

var roleName = new Argument<string>("name");
var roleArgs = new Argument<string[]>("args") { Arity = ArgumentArity.ZeroOrMore };
var role = new Command("role", "A child process of the runner.") { Hidden = true };
role.Arguments.Add(roleName);
role.Arguments.Add(roleArgs);
role.SetAction((parse, _) => Roles.RunAsync(parse.GetValue(roleName)!, parse.GetValue(roleArgs) ?? []));
root.Subcommands.Add(role);

return await root.Parse(args).InvokeAsync();
