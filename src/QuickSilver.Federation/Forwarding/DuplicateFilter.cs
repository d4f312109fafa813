using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Forwarding;

/// <summary>
/// Remembers which (origin gateway, sequence) pairs this gateway has already forwarded, so no packet is forwarded
/// twice however the mesh loops (a tree is loop-free, but trees are soft state rebuilt while routes change). Per origin:
/// the highest sequence seen and a bitmap of the <see cref="Window"/> sequences below it (serial-number arithmetic, so
/// the 32-bit sequence may wrap). A sequence older than the window counts as seen (dropped): a loop that slow would
/// have run out of ttl long before. At most <see cref="MaxOrigins"/> origins; past that the least recently used
/// origin is forgotten (counted), which can at worst let one very late duplicate of that origin through once.
/// </summary>
public sealed class DuplicateFilter
{
    public const int Window = 4096;

    private const int Words = Window / 64;

    private readonly Dictionary<GatewayId, OriginWindow> _origins = [];
    private readonly int _maxOrigins;
    private long _clock;

    public DuplicateFilter(int maxOrigins = 1024)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxOrigins, 1);
        _maxOrigins = maxOrigins;
    }

    public int MaxOrigins => _maxOrigins;

    public int Origins => _origins.Count;

    public long Evictions { get; private set; }

    /// <summary>True the first time a (origin, sequence) is offered, false on every later offer.</summary>
    public bool FirstTime(GatewayId origin, uint sequence)
    {
        _clock++;
        if (!_origins.TryGetValue(origin, out var w))
        {
            if (_origins.Count >= _maxOrigins)
            {
                GatewayId oldest = default;
                long oldestUse = long.MaxValue;
                foreach (var (id, ow) in _origins)
                {
                    if (ow.LastUse < oldestUse)
                    {
                        oldestUse = ow.LastUse;
                        oldest = id;
                    }
                }

                _origins.Remove(oldest);
                Evictions++;
            }

            w = new OriginWindow { Highest = sequence };
            w.Set(sequence);
            w.LastUse = _clock;
            _origins[origin] = w;
            return true;
        }

        w.LastUse = _clock;
        int ahead = unchecked((int)(sequence - w.Highest));
        if (ahead > 0)
        {
            // Slide: clear the bits of the sequences the window moves over.
            if (ahead >= Window)
            {
                Array.Clear(w.Bits);
            }
            else
            {
                for (uint s = w.Highest + 1; s != sequence + 1; s++)
                {
                    w.Clear(s);
                }
            }

            w.Highest = sequence;
            w.Set(sequence);
            return true;
        }

        if (-ahead >= Window)
        {
            return false;
        }

        if (w.Get(sequence))
        {
            return false;
        }

        w.Set(sequence);
        return true;
    }

    private sealed class OriginWindow
    {
        public uint Highest;
        public long LastUse;
        public readonly ulong[] Bits = new ulong[Words];

        public bool Get(uint s) => (Bits[(s / 64) % Words] & (1UL << (int)(s % 64))) != 0;

        public void Set(uint s) => Bits[(s / 64) % Words] |= 1UL << (int)(s % 64);

        public void Clear(uint s) => Bits[(s / 64) % Words] &= ~(1UL << (int)(s % 64));
    }
}
