using System.Buffers;

namespace QuickSilver.Aer;

/// <summary>
/// The packets a repair server (or the source) keeps to answer NAKs (AER §4: repair servers "cache a recent set of
/// packets"): whole encoded datagrams by sequence number, bounded in bytes. When a new packet does not fit, the packets
/// cached earliest are evicted (counted) until it does; the buffers come from the shared array pool and go back to it.
/// Core thread only.
/// </summary>
public sealed class RepairCache
{
    private readonly Dictionary<long, byte[]> _packets = new();
    private readonly Dictionary<long, int> _lengths = new();
    private readonly Queue<long> _order = new();

    public RepairCache(long capacityBytes)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(capacityBytes, 1);
        CapacityBytes = capacityBytes;
    }

    public long CapacityBytes { get; }

    /// <summary>Bytes of datagrams held now (never above <see cref="CapacityBytes"/>).</summary>
    public long Bytes { get; private set; }

    public int Count => _packets.Count;

    public long Evictions { get; private set; }

    /// <summary>The lowest sequence number held, or null when empty.</summary>
    public long? Lowest
    {
        get
        {
            while (_order.Count > 0 && !_packets.ContainsKey(_order.Peek()))
            {
                _order.Dequeue();
            }

            return _order.Count > 0 ? _order.Peek() : null;
        }
    }

    public bool Contains(long seq) => _packets.ContainsKey(seq);

    /// <summary>Copies <paramref name="datagram"/> in under <paramref name="seq"/>. False (nothing stored) when it is
    /// there already or is larger than the whole cache.</summary>
    public bool Add(long seq, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > CapacityBytes || _packets.ContainsKey(seq))
        {
            return false;
        }

        while (Bytes + datagram.Length > CapacityBytes && _order.Count > 0)
        {
            long old = _order.Dequeue();
            if (Remove(old))
            {
                Evictions++;
            }
        }

        var buffer = ArrayPool<byte>.Shared.Rent(datagram.Length);
        datagram.CopyTo(buffer);
        _packets[seq] = buffer;
        _lengths[seq] = datagram.Length;
        _order.Enqueue(seq);
        Bytes += datagram.Length;
        if (_order.Count > 4 * _packets.Count + 64)
        {
            Compact();
        }

        return true;
    }

    /// <summary>The cached datagram for <paramref name="seq"/>, valid until the cache next changes.</summary>
    public bool TryGet(long seq, out ReadOnlySpan<byte> datagram)
    {
        if (_packets.TryGetValue(seq, out var buffer))
        {
            datagram = buffer.AsSpan(0, _lengths[seq]);
            return true;
        }

        datagram = default;
        return false;
    }

    /// <summary>Copies the cached datagram into <paramref name="destination"/>; its length, or 0 when not held.</summary>
    public int CopyTo(long seq, Span<byte> destination)
    {
        if (!TryGet(seq, out var datagram) || datagram.Length > destination.Length)
        {
            return 0;
        }

        datagram.CopyTo(destination);
        return datagram.Length;
    }

    public bool Remove(long seq)
    {
        if (!_packets.Remove(seq, out var buffer))
        {
            return false;
        }

        _lengths.Remove(seq, out int length);
        Bytes -= length;
        ArrayPool<byte>.Shared.Return(buffer);
        return true;
    }

    public void Clear()
    {
        foreach (var buffer in _packets.Values)
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }

        _packets.Clear();
        _lengths.Clear();
        _order.Clear();
        Bytes = 0;
    }

    private void Compact()
    {
        int n = _order.Count;
        for (int i = 0; i < n; i++)
        {
            long seq = _order.Dequeue();
            if (_packets.ContainsKey(seq))
            {
                _order.Enqueue(seq);
            }
        }
    }
}
