using QuickSilver.Core.Diagnostics;

namespace QuickSilver.Core.Security;

/// <summary>What one <see cref="SecureTransport"/> sealed, opened and dropped. Written on the core thread, read from
/// any thread (metrics, Describe, tests).</summary>
public sealed class DatagramSecurityCounters
{
    private readonly EnumCounters<DatagramRejection> _rejected = new();
    private long _sealed;
    private long _opened;

    /// <summary>Datagrams sealed for sending.</summary>
    public long Sealed => Volatile.Read(ref _sealed);

    /// <summary>Received datagrams verified and handed to the stack.</summary>
    public long Opened => Volatile.Read(ref _opened);

    /// <summary>Received datagrams dropped for <paramref name="reason"/>.</summary>
    public long this[DatagramRejection reason] => _rejected[reason];

    /// <summary>Received datagrams dropped, all reasons.</summary>
    public long Rejected => _rejected.Total;

    /// <summary>Sources the replay window forgot to make room (<see cref="DatagramSecurityOptions.MaxReplaySources"/>):
    /// a forgotten source's next datagram is taken as if first seen, so a replay of it inside the window would pass.</summary>
    public long ReplaySourcesForgotten => ReplayEvictions?.Invoke() ?? 0;

    /// <summary>Reads the replay window's eviction count (set by the transport that owns the window).</summary>
    internal Func<long>? ReplayEvictions { get; set; }

    internal void CountSealed() => Volatile.Write(ref _sealed, _sealed + 1);

    internal void CountOpened() => Volatile.Write(ref _opened, _opened + 1);

    internal void CountRejected(DatagramRejection reason) => _rejected.Increment(reason);

    public override string ToString() =>
        $"sealed {Sealed}, opened {Opened}, rejected {Rejected} (bad tag {this[DatagramRejection.BadTag]}, unknown key {this[DatagramRejection.UnknownKey]}, " +
        $"truncated {this[DatagramRejection.Truncated]}, replayed {this[DatagramRejection.Replayed]}, wrong key {this[DatagramRejection.WrongKey]}), replay sources forgotten {ReplaySourcesForgotten}";
}
