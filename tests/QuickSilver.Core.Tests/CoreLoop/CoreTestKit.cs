using QuickSilver.Core;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Tests.CoreLoop;

/// <summary>Shared helpers for tests that run real cores.</summary>
internal static class CoreTestKit
{
    /// <summary>Backends that can run on this OS (all three on Linux).</summary>
    public static TheoryData<IoBackendKind> Backends()
    {
        var data = new TheoryData<IoBackendKind> { IoBackendKind.Portable, IoBackendKind.Completion };
        if (OperatingSystem.IsLinux())
        {
            data.Add(IoBackendKind.Epoll);
        }

        return data;
    }

    /// <summary>A hang guard, not a timing assertion: generous so a loaded 2-core machine never trips it.</summary>
    public static readonly TimeSpan Patience = TimeSpan.FromSeconds(60);

    public static void Wait(Func<bool> condition, string what)
    {
        var deadline = DateTime.UtcNow + Patience;
        while (!condition())
        {
            if (DateTime.UtcNow > deadline)
            {
                throw new TimeoutException($"Gave up waiting for: {what}");
            }

            Thread.Sleep(1);
        }
    }

    /// <summary>Runs <paramref name="func"/> on the core thread and returns its result.</summary>
    public static T OnCore<T>(QuickSilverCore core, Func<T> func)
    {
        T result = default!;
        core.Invoke(() => result = func());
        return result;
    }

    /// <summary>Collects datagrams on the core thread.</summary>
    public sealed class CountingHandler : IDatagramHandler
    {
        private long _count;
        public Action<NetAddress, ReadOnlySpan<byte>>? OnEach { get; set; }
        public long Count => Volatile.Read(ref _count);

        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
        {
            Interlocked.Increment(ref _count);
            OnEach?.Invoke(from, datagram);
        }
    }

    /// <summary>A test-controlled clock for quantum tests.</summary>
    public sealed class ManualClock
    {
        private long _ticks;
        public TimeSpan Now => TimeSpan.FromTicks(Volatile.Read(ref _ticks));
        public void Advance(TimeSpan by) => Interlocked.Add(ref _ticks, by.Ticks);
    }
}
