using System.Globalization;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using OpenTelemetry.Metrics;
using OpenTelemetry.Trace;
using QuickSilver;
using QuickSilver.Hosting;
using QuickSilver.Samples.WorkerService;
using Serilog;

// A worker-service application on the generic host: AddQuickSilver binds the node's options from appsettings.json
// ("QuickSilver" section), validates them at start, runs the node as a hosted service and joins "demo/ticks"; the
// Worker publishes Demo:Messages numbered messages in it, reads them back, checks order, and stops the host. Exit 0
// when every message arrived once and in order within Demo:Seconds, 1 otherwise, 2 on a bad option.
//   dotnet run -c Release --project samples/WorkerService                      (--messages N --seconds S --otel true)
// With --otel true the QuickSilver meters and the publish/deliver activities go to the OpenTelemetry console exporter.
var builder = Host.CreateApplicationBuilder(new HostApplicationBuilderSettings { Args = args, ContentRootPath = AppContext.BaseDirectory });
builder.Configuration.AddCommandLine(args, new Dictionary<string, string>
{
    ["--messages"] = "Demo:Messages",
    ["--seconds"] = "Demo:Seconds",
    ["--size"] = "Demo:Size",
    ["--otel"] = "Demo:Otel",
});
builder.Services.AddSerilog((_, log) => log
    .MinimumLevel.Information()
    .MinimumLevel.Override("Microsoft", Serilog.Events.LogEventLevel.Warning)
    .WriteTo.Console(formatProvider: CultureInfo.InvariantCulture));

bool otel = builder.Configuration.GetValue<bool>("Demo:Otel");
var section = builder.Configuration.GetSection("QuickSilver");
if (otel)
{
    section["Tracing"] = "true";
    builder.Services.AddOpenTelemetry()
        .WithMetrics(metrics => metrics
            .AddMeter([.. QuickSilverTelemetry.MeterNames])
            .AddConsoleExporter((_, reader) => reader.PeriodicExportingMetricReaderOptions.ExportIntervalMilliseconds = 2_000))
        .WithTracing(tracing => tracing
            .AddSource(QuickSilverTelemetry.ActivitySourceName)
            .SetSampler(new TraceIdRatioBasedSampler(0.0005)) // a few of the messages, not all of them
            .AddConsoleExporter());
}

builder.Services.AddQuickSilver(section);
builder.Services.AddHealthChecks().AddQuickSilver();
builder.Services.AddHostedService<Worker>();  // after AddQuickSilver: starts once the node runs and has joined its groups

try
{
    using var host = builder.Build();
    await host.RunAsync();
    return Environment.ExitCode;
}
catch (Microsoft.Extensions.Options.OptionsValidationException e)
{
    await Console.Error.WriteLineAsync($"Bad option: {e.Message}");
    return 2;
}
finally
{
    await Log.CloseAndFlushAsync();
}
