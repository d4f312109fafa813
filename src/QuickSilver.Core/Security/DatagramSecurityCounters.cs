namespace QuickSilver.Core.Security;

/// <summary>What one <see cref="SecureTransport"/> sealed, opened and dropped. Written on the core thread, read from
/// any thread (metrics, Describe, tests).</summary>
public sealed class DatagramSecurityCounters
{
    private static readonly int Size = Enum.GetValues<DatagramRejection>().Max(r => (int)r) + 1;
    private readonly long[] _rejected = new long[Size];
    private long _sealed;
    private long _opened;

    /// <summary>Datagrams sealed for sending.</summary>
    public long Sealed => Volatile.Read(ref _sealed);

    /// <summary>Received datagrams verified and handed to the stack.</summary>
    public long Opened => Volatile.Read(ref _opened);

    /// <summary>Received datagrams dropped for <paramref name="reason"/>.</summary>
    public long this[DatagramRejection reason] => Volatile.Read(ref _rejected[(int)reason]);

    /// <summary>Received datagrams dropped, all reasons.</summary>
    public long Rejected
    {
        get
        {
            long sum = 0;
            for (int i = 1; i < _rejected.Length; i++)
            {
                sum += Volatile.Read(ref _rejected[i]);
            }

            return sum;
        }
    }

    internal void CountSealed() => Volatile.Write(ref _sealed, _sealed + 1);

    internal void CountOpened() => Volatile.Write(ref _opened, _opened + 1);

    internal void CountRejected(DatagramRejection reason) => Interlocked.Increment(ref _rejected[(int)reason]);

    public override string ToString() =>
        $"sealed {Sealed}, opened {Opened}, rejected {Rejected} (bad tag {this[DatagramRejection.BadTag]}, unknown key {this[DatagramRejection.UnknownKey]}, " +
        $"truncated {this[DatagramRejection.Truncated]}, replayed {this[DatagramRejection.Replayed]})";
}
