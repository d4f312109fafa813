namespace QuickSilver.Dissemination.Fec;

/// <summary>
/// Builds one packet as a sum of constant multiples of others, target = Σ c_i · packet_i, handing the terms to the
/// GF(2^8) kernels four at a time (<see cref="GaloisRegion.MultiplyAdd4"/>) so the target is loaded and stored once per
/// four packets. The first group overwrites the target, so it need not be cleared; a sum with no terms clears it.
/// Terms with c = 0 are dropped. A ref struct on the caller's stack: nothing allocates.
/// </summary>
internal ref struct LinearCombination
{
    private readonly Span<byte> _target;
    private readonly GaloisKernel _kernel;
    private ReadOnlySpan<byte> _p0;
    private ReadOnlySpan<byte> _p1;
    private ReadOnlySpan<byte> _p2;
    private ReadOnlySpan<byte> _p3;
    private Coefficients _c;
    private int _pending;
    private bool _written;

    public LinearCombination(GaloisKernel kernel, Span<byte> target)
    {
        _kernel = kernel;
        _target = target;
    }

    /// <summary>Adds c · packet to the sum.</summary>
    public void Add(byte c, ReadOnlySpan<byte> packet)
    {
        if (c == 0)
        {
            return;
        }

        switch (_pending)
        {
            case 0: _p0 = packet; break;
            case 1: _p1 = packet; break;
            case 2: _p2 = packet; break;
            default: _p3 = packet; break;
        }

        _c[_pending++] = c;
        if (_pending == 4)
        {
            GaloisRegion.MultiplyAdd4(_kernel, !_written, _c, _p0, _p1, _p2, _p3, _target);
            _written = true;
            _pending = 0;
        }
    }

    /// <summary>Writes the terms still held; the target then holds the whole sum.</summary>
    public void Finish()
    {
        for (int q = 0; q < _pending; q++)
        {
            ReadOnlySpan<byte> packet = q switch { 0 => _p0, 1 => _p1, _ => _p2 };
            if (_written)
            {
                GaloisRegion.MultiplyAdd(_kernel, _c[q], packet, _target);
            }
            else
            {
                GaloisRegion.Multiply(_kernel, _c[q], packet, _target);
                _written = true;
            }
        }

        _pending = 0;
        if (!_written)
        {
            _target.Clear();
            _written = true;
        }
    }

    [System.Runtime.CompilerServices.InlineArray(4)]
    private struct Coefficients
    {
        private byte _element;
    }
}
