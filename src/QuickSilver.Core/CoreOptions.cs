using QuickSilver.Core.Io;
using Microsoft.Extensions.Logging;

namespace QuickSilver.Core;

/// <summary>Which I/O queue the core drains.</summary>
public enum IoBackendKind
{
    /// <summary>Epoll on Linux, the completion backend elsewhere (Windows, macOS).</summary>
    Auto = 0,

    /// <summary>Native epoll loop with recvmmsg/sendmmsg and an eventfd for wake-ups (Linux only).</summary>
    Epoll,

    /// <summary>The first .NET-sockets backend: one async receive per socket, blocking sends (a full send buffer stalls
    /// the core). Kept for comparison and for the existing per-backend tests; <see cref="Completion"/> replaces it and
    /// <see cref="Auto"/> no longer picks it.</summary>
    Portable,

    /// <summary>.NET sockets driven by reused <see cref="System.Net.Sockets.SocketAsyncEventArgs"/> (I/O completion ports on
    /// Windows, the runtime's epoll thread on Linux): non-blocking sends that park on a full send buffer, completions
    /// posted into the core's bounded queue, wildcard-bound group sockets on Windows. Any OS.</summary>
    Completion,
}

/// <summary>Options of one <see cref="QuickSilverCore"/>. Defaults follow QSM §2.5.</summary>
public sealed record CoreOptions
{
    /// <summary>Name used for the thread, logs and metric tags.</summary>
    public string Name { get; init; } = "core";

    /// <summary>How long one round of I/O processing may run before the core turns to timers (paper: 100 ms).</summary>
    public TimeSpan IoQuantum { get; init; } = TimeSpan.FromMilliseconds(100);

    /// <summary>How long one round of alarm processing may run before the core turns back to I/O (paper: 50 ms).</summary>
    public TimeSpan AlarmQuantum { get; init; } = TimeSpan.FromMilliseconds(50);

    public IoBackendKind Backend { get; init; } = IoBackendKind.Auto;

    /// <summary>Capacity of the lock-free downcall queue. A full queue makes <c>TryPost</c> return false.</summary>
    public int DowncallQueueCapacity { get; init; } = 65536;

    /// <summary>Datagrams moved by one recvmmsg/sendmmsg call (epoll backend).</summary>
    public int SyscallBatchSize { get; init; } = 64;

    /// <summary>Receive coalescing: after an I/O round that received something, the core sleeps this long (or until its
    /// next alarm, if sooner) before it polls again, so datagrams that arrive meanwhile are drained in one batch rather
    /// than each waking the thread (a NIC's interrupt moderation, in the core). Zero (the default): the core blocks in
    /// its poll and wakes at once. It trades latency (up to this much) and a longer wait for a downcall for CPU: a bulk
    /// receiver that wakes per datagram spends about a fifth of its CPU sleeping and waking (docs/core.md,
    /// "Receive coalescing"). At most 100 ms; sub-millisecond values are honoured on Linux (clock_nanosleep),
    /// rounded up to a millisecond elsewhere.</summary>
    public TimeSpan ReceiveCoalescing { get; init; } = TimeSpan.Zero;

    /// <summary>Where the core logs (Microsoft.Extensions.Logging); null (the default): nowhere.</summary>
    public ILogger? Logger { get; init; }

    /// <summary>Where the core's "QuickSilver.Core" meter comes from: a host's <see cref="System.Diagnostics.Metrics.IMeterFactory"/>
    /// (dependency injection), or null (the default) for a meter of its own.</summary>
    public System.Diagnostics.Metrics.IMeterFactory? MeterFactory { get; init; }

    /// <summary>Test hook: the core's time source (elapsed time since an arbitrary origin). Null: a monotonic stopwatch.</summary>
    internal Func<TimeSpan>? TimeSource { get; init; }

    /// <summary>Throws <see cref="ArgumentException"/> naming the first invalid option.</summary>
    public void Validate()
    {
        if (string.IsNullOrWhiteSpace(Name))
        {
            throw new ArgumentException("CoreOptions.Name must not be empty.", nameof(Name));
        }

        OptionChecks.Positive(IoQuantum, $"CoreOptions.{nameof(IoQuantum)}");
        OptionChecks.Positive(AlarmQuantum, $"CoreOptions.{nameof(AlarmQuantum)}");
        OptionChecks.InRange(DowncallQueueCapacity, 2, 1 << 24, $"CoreOptions.{nameof(DowncallQueueCapacity)}");
        OptionChecks.InRange(SyscallBatchSize, 1, 1024, $"CoreOptions.{nameof(SyscallBatchSize)}");
        if (ReceiveCoalescing < TimeSpan.Zero || ReceiveCoalescing > TimeSpan.FromMilliseconds(100))
        {
            throw new ArgumentOutOfRangeException(nameof(ReceiveCoalescing), ReceiveCoalescing, "CoreOptions.ReceiveCoalescing must be between 0 and 100 ms.");
        }
        if (!Enum.IsDefined(Backend))
        {
            throw new ArgumentOutOfRangeException(nameof(Backend), Backend, "CoreOptions.Backend is not a known backend.");
        }

        if (Backend == IoBackendKind.Epoll && !OperatingSystem.IsLinux())
        {
            throw new PlatformNotSupportedException("CoreOptions.Backend = Epoll needs Linux; use Auto or Completion.");
        }
    }
}
