using System.Collections;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Probe;

/// <summary>
/// Counts a <see cref="ProbeSender"/>'s datagrams, remembering which sequence numbers arrived, and acknowledges every
/// <see cref="AckEvery"/> new datagrams (and the last one) to the sender over unicast. Core thread only, except the
/// read-only counters.
/// </summary>
public sealed class ProbeReceiver : IDatagramHandler
{
    private readonly IDatagramTransport _endpoint;
    private readonly NetAddress _sender;
    private readonly BitArray? _seen;
    private readonly byte[] _ack = new byte[ProbeWire.MinSize];
    private readonly DropCounters? _drops;
    private long _received;
    private long _duplicates;
    private long _target = long.MaxValue;
    private ManualResetEventSlim? _targetReached;

    public ProbeReceiver(IDatagramTransport endpoint, NetAddress sender, int total, int ackEvery, DropCounters? drops = null)
    {
        ArgumentNullException.ThrowIfNull(endpoint);
        ArgumentOutOfRangeException.ThrowIfNegative(total);
        ArgumentOutOfRangeException.ThrowIfLessThan(ackEvery, 1);
        _endpoint = endpoint;
        _sender = sender;
        _seen = new BitArray(total);
        Total = total;
        AckEvery = ackEvery;
        _drops = drops;
    }

    /// <summary>Open-ended receiver for benchmarks: counts datagrams without remembering which arrived (so it cannot
    /// detect duplicates or name missing ones) and acknowledges every <paramref name="ackEvery"/>.</summary>
    public static ProbeReceiver CountingOnly(IDatagramTransport endpoint, NetAddress sender, int ackEvery)
        => new(endpoint, sender, ackEvery);

    private ProbeReceiver(IDatagramTransport endpoint, NetAddress sender, int ackEvery)
    {
        ArgumentNullException.ThrowIfNull(endpoint);
        ArgumentOutOfRangeException.ThrowIfLessThan(ackEvery, 1);
        _endpoint = endpoint;
        _sender = sender;
        Total = long.MaxValue;
        AckEvery = ackEvery;
    }

    public long Total { get; }

    public int AckEvery { get; }

    /// <summary>Distinct datagrams received. Any thread.</summary>
    public long Received => Volatile.Read(ref _received);

    public long Duplicates => Volatile.Read(ref _duplicates);

    /// <summary>Sets <paramref name="reached"/> once <see cref="Received"/> reaches <paramref name="target"/>. Any thread.</summary>
    public void SetTarget(long target, ManualResetEventSlim reached)
    {
        Volatile.Write(ref _targetReached, reached);
        Volatile.Write(ref _target, target);
        if (Received >= target)
        {
            reached.Set();
        }
    }

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (!ProbeWire.TryReadData(datagram, out long sequence) || sequence >= Total)
        {
            _drops?.Increment(DropReason.Malformed);
            return;
        }

        if (_seen is not null)
        {
            if (_seen[(int)sequence])
            {
                Interlocked.Increment(ref _duplicates);
                return;
            }

            _seen[(int)sequence] = true;
        }

        long count = Interlocked.Increment(ref _received);
        if (count >= Volatile.Read(ref _target))
        {
            _targetReached?.Set();
        }

        if (count % AckEvery == 0 || count == Total)
        {
            int length = ProbeWire.WriteAck(_ack, 2, count);
            _endpoint.TrySend(_sender, _ack.AsSpan(0, length));
        }
    }

    /// <summary>Sequence numbers below <see cref="Total"/> that never arrived. Call once the run is over.</summary>
    public int CountMissing()
    {
        if (_seen is null)
        {
            throw new InvalidOperationException("A counting-only receiver does not know which datagrams are missing.");
        }

        int missing = 0;
        for (int i = 0; i < Total; i++)
        {
            if (!_seen[i])
            {
                missing++;
            }
        }

        return missing;
    }
}
