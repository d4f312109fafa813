using System.Collections.Concurrent;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Time;

namespace QuickSilver.Hosting.Tests;

/// <summary>Logging through Microsoft.Extensions.Logging: the rate-limited drop log and the hosted node's categories.</summary>
public sealed class LoggingTests
{
    private sealed class ManualClock : IClock
    {
        public int Reads { get; private set; }

        public TimeSpan Time { get; set; }

        public TimeSpan Now
        {
            get
            {
                Reads++;
                return Time;
            }
        }
    }

    /// <summary>Collects formatted lines with their category and level.</summary>
    private sealed class Collector : ILoggerProvider
    {
        public ConcurrentQueue<(string Category, LogLevel Level, string Message)> Lines { get; } = new();

        public LogLevel Minimum { get; init; } = LogLevel.Trace;

        public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

        public void Dispose()
        {
        }

        private sealed class Logger(Collector owner, string category) : ILogger
        {
            public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => logLevel >= owner.Minimum;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
            {
                if (IsEnabled(logLevel))
                {
                    owner.Lines.Enqueue((category, logLevel, formatter(state, exception)));
                }
            }
        }
    }

    [Fact]
    public void The_rate_limited_log_does_nothing_at_all_when_warnings_are_disabled()
    {
        var clock = new ManualClock();
        var log = new RateLimitedLog(NullLogger.Instance, clock);
        for (int i = 0; i < 1000; i++)
        {
            Assert.False(log.Warn(1, "Dropped a malformed datagram from {Peer}", i));
        }

        Assert.Equal(0, clock.Reads); // returned before the clock, the table or any formatting
    }

    [Fact]
    public void The_rate_limited_log_writes_one_line_per_interval_per_key_and_counts_the_rest()
    {
        var clock = new ManualClock();
        using var collector = new Collector();
        using var factory = LoggerFactory.Create(b => b.AddProvider(collector).SetMinimumLevel(LogLevel.Trace));
        var log = new RateLimitedLog(factory.CreateLogger("QuickSilver.Protocol"), clock, TimeSpan.FromSeconds(10));

        Assert.True(log.Warn(1, "Dropped a malformed datagram from {Peer}", "127.0.0.1:5000"));
        Assert.False(log.Warn(1, "Dropped a malformed datagram from {Peer}", "127.0.0.1:5001"));
        Assert.False(log.Warn(1, "Dropped a malformed datagram from {Peer}", "127.0.0.1:5002"));
        Assert.True(log.Warn(2, "Other key from {Peer}", "x"));
        clock.Time = TimeSpan.FromSeconds(10);
        Assert.True(log.Warn(1, "Dropped a malformed datagram from {Peer}", "127.0.0.1:5003"));

        Assert.Equal(
            new[]
            {
                "Dropped a malformed datagram from 127.0.0.1:5000",
                "Other key from x",
                "Dropped a malformed datagram from 127.0.0.1:5003 (2 similar suppressed)",
            },
            collector.Lines.Select(l => l.Message));
        Assert.All(collector.Lines, l => Assert.Equal((LogLevel.Warning, "QuickSilver.Protocol"), (l.Level, l.Category)));
    }

    [Fact]
    public void The_dispatcher_reports_a_malformed_datagram_with_its_sender_and_error_and_counts_it()
    {
        using var collector = new Collector();
        using var factory = LoggerFactory.Create(b => b.AddProvider(collector).SetMinimumLevel(LogLevel.Trace));
        var drops = new DropCounters();
        var dispatcher = new Core.Wire.PacketDispatcher(drops, new RateLimitedLog(factory.CreateLogger("QuickSilver.Protocol"), new ManualClock()));

        dispatcher.OnDatagram(Core.Io.NetAddress.Loopback(5000), new byte[3]);
        dispatcher.OnDatagram(Core.Io.NetAddress.Loopback(5001), new byte[3]);

        Assert.Equal(2, drops.Total);
        Assert.Equal("Dropped a malformed datagram from 127.0.0.1:5000 (Truncated)", Assert.Single(collector.Lines).Message);
    }

    [Fact]
    public async Task The_hosted_node_logs_to_the_hosts_logger_factory_by_category()
    {
        using var collector = new Collector { Minimum = LogLevel.Information };
        var builder = Hosts.Builder(Hosts.Settings());
        builder.Logging.ClearProviders().AddProvider(collector).SetMinimumLevel(LogLevel.Information);
        builder.Services.AddQuickSilver(builder.Configuration.GetSection("QuickSilver"));
        using var host = builder.Build();

        await host.StartAsync().WaitAsync(TimeSpan.FromSeconds(60));
        uint id = host.Services.GetRequiredService<QuickSilverService>().Node.Id;
        await host.StopAsync().WaitAsync(TimeSpan.FromSeconds(30));

        Assert.Contains(collector.Lines, l => l.Category == "QuickSilver.Gms" && l.Level == LogLevel.Information
            && l.Message.StartsWith($"GMS: node n{id} at 127.0.0.1:", StringComparison.Ordinal) && l.Message.EndsWith(" registered", StringComparison.Ordinal));
    }
}
