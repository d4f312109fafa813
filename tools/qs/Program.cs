using System.CommandLine;
using System.Globalization;
using QuickSilver.Samples;
using QuickSilver.Tools;
using Serilog;
using Serilog.Core;
using Serilog.Events;

// qs: the QuickSilver command-line tool. "qs gms" runs a standalone GMS; "qs node" runs a node that joins groups,
// optionally publishes numbered messages and prints delivered counts; "qs stats" reads a running node's counters;
// "qs corecast-model" prints the CoreCast bandwidth model.
// --log-level (every verb) sets what the node logs to stderr; --json makes the output JSON. Exit code 2 means bad options.
var level = new LoggingLevelSwitch(LogEventLevel.Warning);
Log.Logger = new LoggerConfiguration()
    .MinimumLevel.ControlledBy(level)
    .WriteTo.Console(formatProvider: CultureInfo.InvariantCulture, standardErrorFromLevel: LogEventLevel.Verbose)
    .CreateLogger();
try
{
    var logLevel = new Option<LogEventLevel>("--log-level")
    {
        Description = "Least severe log events to print on stderr: Verbose, Debug, Information, Warning, Error or Fatal",
        DefaultValueFactory = _ => LogEventLevel.Warning,
        Recursive = true,
    };
    var json = new Option<bool>("--json") { Description = "Write the output as JSON (one object per line for gms and node)", Recursive = true };
    var root = new RootCommand("qs: the QuickSilver command-line tool.") { GmsVerb.Create(json), NodeVerb.Create(json), StatsVerb.Create(json), FilesVerb.Create(json), CoreCastModelVerb.Create(json), logLevel, json };
    foreach (var verb in AerVerbs.Create().Concat(GatewayVerbs.Create(json)))
    {
        root.Subcommands.Add(verb);
    }

    var parse = root.Parse(args);
    if (parse.Errors.Count == 0)
    {
        level.MinimumLevel = parse.GetValue(logLevel);
    }

    return await Cli.RunAsync(root, args);
}
finally
{
    await Log.CloseAndFlushAsync();
}
