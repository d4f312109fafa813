namespace QuickSilver.Qsm.Region;

/// <summary>
/// A table of at most <see cref="Capacity"/> small values keyed by a node or region id that forgets the oldest-inserted
/// key beyond its bound (<see cref="Forgotten"/>): what a member remembers of retired streams
/// (<see cref="StreamRetirement"/>) and a node of the regions it stopped sending into (<see cref="SenderContinuation"/>).
/// Updating a key keeps its place; a key removed and set again is the newest. The insertion order is a queue of ids that
/// may hold removed or repeated ones; it is compacted when it reaches twice the bound, so it stays within that too.
/// Core thread only.
/// </summary>
internal sealed class OldestFirstTable<TValue>(int capacity)
    where TValue : struct
{
    private readonly Dictionary<uint, TValue> _values = new();
    private readonly Queue<uint> _order = new();

    /// <summary>The most keys kept.</summary>
    public int Capacity => capacity;

    /// <summary>Keys kept now.</summary>
    public int Count => _values.Count;

    /// <summary>Keys forgotten at the bound.</summary>
    public long Forgotten { get; private set; }

    public bool TryGetValue(uint key, out TValue value) => _values.TryGetValue(key, out value);

    public bool Remove(uint key, out TValue value) => _values.Remove(key, out value);

    public void Clear()
    {
        _values.Clear();
        _order.Clear();
    }

    /// <summary>Sets <paramref name="key"/>'s value; a new key beyond the bound pushes the oldest out.</summary>
    public void Set(uint key, TValue value)
    {
        if (!_values.TryAdd(key, value))
        {
            _values[key] = value;
            return;
        }

        _order.Enqueue(key);
        while (_values.Count > capacity && _order.TryDequeue(out uint oldest))
        {
            if (_values.Remove(oldest))
            {
                Forgotten++;
            }
        }

        if (_order.Count > 2 * capacity)
        {
            // Keys removed (and set again) pile up in the order: keep each kept one once, oldest first.
            var seen = new HashSet<uint>();
            var kept = _order.Where(id => _values.ContainsKey(id) && seen.Add(id)).ToList();
            _order.Clear();
            kept.ForEach(_order.Enqueue);
        }
    }
}
