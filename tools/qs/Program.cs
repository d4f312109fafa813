using System.CommandLine;
using System.Globalization;
using QuickSilver.Samples;
using QuickSilver.Tools;
using Serilog;

// qs: the QuickSilver command-line tool. "qs gms" runs a standalone GMS; "qs node" runs a node that joins groups,
// optionally publishes numbered messages and prints delivered counts. Exit code 2 means bad options.
Log.Logger = new LoggerConfiguration()
    .MinimumLevel.Warning()
    .WriteTo.Console(formatProvider: CultureInfo.InvariantCulture, standardErrorFromLevel: Serilog.Events.LogEventLevel.Verbose)
    .CreateLogger();
try
{
    var root = new RootCommand("qs: the QuickSilver command-line tool.") { GmsVerb.Create(), NodeVerb.Create(), FilesVerb.Create() };
    return await Cli.RunAsync(root, args);
}
finally
{
    await Log.CloseAndFlushAsync();
}
