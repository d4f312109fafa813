using BenchmarkDotNet.Attributes;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Time;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Benchmarks;

/// <summary>
/// What logging costs on the receive path (issue 14): the dispatcher's drop path, which logs every malformed datagram
/// through the rate-limited log, with no log at all, with logging disabled (the default: no logger factory), and
/// with warnings enabled (one line per 10 s per reason, the rest suppressed and counted); and, for scale, a
/// well-formed datagram handed to a layer, which never logs. One operation = one datagram.
/// </summary>
[MemoryDiagnoser]
public class LoggingCostBenchmarks
{
    private const int Datagrams = 1_000;
    private readonly byte[] _malformed = new byte[3]; // shorter than a header: WireError.Truncated
    private readonly byte[] _wellFormed = new byte[PacketHeader.Size + 8];
    private readonly NetAddress _from = NetAddress.Loopback(5000);
    private PacketDispatcher? _noLog;
    private PacketDispatcher? _disabled;
    private PacketDispatcher? _enabled;

    private sealed class FixedClock : IClock
    {
        public TimeSpan Now => TimeSpan.Zero;
    }

    private sealed class Discard : IPacketHandler
    {
        public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
        {
        }
    }

    /// <summary>A provider that is enabled at every level and drops what it gets (the cost is QuickSilver's, not a sink's).</summary>
    private sealed class EnabledProvider : ILoggerProvider, ILogger
    {
        public ILogger CreateLogger(string categoryName) => this;

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
        }

        public void Dispose()
        {
        }
    }

    [GlobalSetup]
    public void Setup()
    {
        var clock = new FixedClock();
        _noLog = new PacketDispatcher(new DropCounters());
        _disabled = new PacketDispatcher(new DropCounters(), new RateLimitedLog(NullLoggerFactory.Instance.CreateLogger("QuickSilver.Protocol"), clock));
        _enabled = new PacketDispatcher(new DropCounters(), new RateLimitedLog(new EnabledProvider(), clock));
        _noLog.Register((PacketType)200, new Discard());
        new PacketHeader((PacketType)200, 1, (ushort)_wellFormed.Length).Write(_wellFormed);
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Datagrams)]
    public void Malformed_NoLog() => Run(_noLog!, _malformed);

    [Benchmark(OperationsPerInvoke = Datagrams)]
    public void Malformed_LoggingDisabled() => Run(_disabled!, _malformed);

    [Benchmark(OperationsPerInvoke = Datagrams)]
    public void Malformed_WarningsEnabled_RateLimited() => Run(_enabled!, _malformed);

    [Benchmark(OperationsPerInvoke = Datagrams)]
    public void WellFormed_Dispatched() => Run(_noLog!, _wellFormed);

    private void Run(PacketDispatcher dispatcher, byte[] datagram)
    {
        for (int i = 0; i < Datagrams; i++)
        {
            dispatcher.OnDatagram(_from, datagram);
        }
    }
}
