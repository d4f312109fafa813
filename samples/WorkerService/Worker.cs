using System.Buffers.Binary;
using System.Diagnostics;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using OpenTelemetry.Metrics;
using QuickSilver.Hosting;

namespace QuickSilver.Samples.WorkerService;

/// <summary>Publishes numbered messages in the group the host joined and reads them back (the node is a member of its
/// own group, so it receives what it sends), then stops the application: a bounded run.</summary>
internal sealed partial class Worker(QuickSilverService quickSilver, HealthCheckService health, IConfiguration configuration,
    IHostApplicationLifetime lifetime, IServiceProvider services, ILogger<Worker> log) : BackgroundService
{
    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        int messages = configuration.GetValue("Demo:Messages", 20_000);
        int size = Math.Max(4, configuration.GetValue("Demo:Size", 100));
        var bound = TimeSpan.FromSeconds(configuration.GetValue("Demo:Seconds", 30));
        using var run = CancellationTokenSource.CreateLinkedTokenSource(stoppingToken);
        run.CancelAfter(bound);
        Environment.ExitCode = 1;
        try
        {
            var node = await quickSilver.GetNodeAsync(run.Token);
            var group = quickSilver.Group("demo/ticks");
            var report = await health.CheckHealthAsync(run.Token);
            Started(log, node.Id, node.Address, report.Status);

            var clock = Stopwatch.StartNew();
            var reader = Task.Run(() => ReadAsync(group, messages, run.Token), run.Token);
            var payload = new byte[size];
            for (int i = 0; i < messages; i++)
            {
                BinaryPrimitives.WriteInt32LittleEndian(payload, i);
                await group.PublishAsync(payload, run.Token);
            }

            int received = await reader;
            Finished(log, messages, received, clock.Elapsed.TotalSeconds, messages / clock.Elapsed.TotalSeconds);
            Environment.ExitCode = received == messages ? 0 : 1;

            // With --otel true: export the meters now, while the node still reports (a stopped node's instruments report nothing).
            (services.GetService(typeof(MeterProvider)) as MeterProvider)?.ForceFlush(5_000);
        }
        catch (OperationCanceledException) when (!stoppingToken.IsCancellationRequested)
        {
            TimedOut(log, bound.TotalSeconds);
        }
        finally
        {
            lifetime.StopApplication();
        }
    }

    private async Task<int> ReadAsync(QuickSilverGroup group, int messages, CancellationToken cancellationToken)
    {
        int next = 0;
        await foreach (var message in group.ReadAllAsync(cancellationToken))
        {
            int value = BinaryPrimitives.ReadInt32LittleEndian(message.Payload);
            if (value != next)
            {
                OutOfOrder(log, next, value);
                return next;
            }

            if (++next == messages)
            {
                break;
            }
        }

        return next;
    }

    [LoggerMessage(Level = LogLevel.Information, Message = "Node {Id} at {Address} started; health {Health}; publishing")]
    private static partial void Started(ILogger log, uint id, QuickSilver.Core.Io.NetAddress address, HealthStatus health);

    [LoggerMessage(Level = LogLevel.Information, Message = "Published {Messages} and received {Received} back in order in {Seconds:F2} s ({Rate:F0} msg/s)")]
    private static partial void Finished(ILogger log, int messages, int received, double seconds, double rate);

    [LoggerMessage(Level = LogLevel.Error, Message = "Expected message {Expected}, got {Got}")]
    private static partial void OutOfOrder(ILogger log, int expected, int got);

    [LoggerMessage(Level = LogLevel.Error, Message = "Not done within {Seconds} s")]
    private static partial void TimedOut(ILogger log, double seconds);
}
