using System.Buffers.Binary;

namespace QuickSilver.Qsm.Recovery;

/// <summary>A closed range of sequence numbers [First, Last].</summary>
internal readonly record struct SeqRange(ulong First, ulong Last)
{
    public ulong Count => Last - First + 1;

    public override string ToString() => First == Last ? $"{First}" : $"{First}-{Last}";
}

/// <summary>
/// A compressed set of sequence numbers: sorted, disjoint, non-adjacent ranges (QSM §2.3.3's "compressed NAK sets").
/// The number of ranges is bounded by <see cref="MaxRanges"/>: adding beyond it keeps the lowest ranges and drops the
/// highest, which are reported again in a later token round, so the bound limits token size, never correctness.
/// Reusable: <see cref="Clear"/> keeps the storage. Not thread-safe.
/// </summary>
internal sealed class NakSet
{
    /// <summary>Encoded size of one range on the wire: two little-endian u64.</summary>
    public const int RangeBytes = 16;

    private SeqRange[] _ranges;
    private int _count;

    public NakSet(int maxRanges)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxRanges, 1);
        MaxRanges = maxRanges;
        _ranges = new SeqRange[Math.Min(maxRanges, 16)];
    }

    public int MaxRanges { get; }

    public int RangeCount => _count;

    public bool IsEmpty => _count == 0;

    /// <summary>True when an add was refused because of <see cref="MaxRanges"/> since the last <see cref="Clear"/>.</summary>
    public bool Truncated { get; private set; }

    public SeqRange this[int index] => (uint)index < (uint)_count ? _ranges[index] : throw new ArgumentOutOfRangeException(nameof(index));

    public ReadOnlySpan<SeqRange> Ranges => _ranges.AsSpan(0, _count);

    /// <summary>Total number of sequence numbers in the set.</summary>
    public ulong Cardinality
    {
        get
        {
            ulong sum = 0;
            foreach (var r in Ranges)
            {
                sum += r.Count;
            }

            return sum;
        }
    }

    public void Clear()
    {
        _count = 0;
        Truncated = false;
        Coarse = false;
    }

    public void CopyFrom(NakSet other)
    {
        ArgumentNullException.ThrowIfNull(other);
        Clear();
        foreach (var r in other.Ranges)
        {
            AddRange(r.First, r.Last);
        }

        Truncated |= other.Truncated;
    }

    public bool Contains(ulong seq)
    {
        int lo = 0, hi = _count - 1;
        while (lo <= hi)
        {
            int mid = (lo + hi) >>> 1;
            var r = _ranges[mid];
            if (seq < r.First)
            {
                hi = mid - 1;
            }
            else if (seq > r.Last)
            {
                lo = mid + 1;
            }
            else
            {
                return true;
            }
        }

        return false;
    }

    public void Add(ulong seq) => AddRange(seq, seq);

    /// <summary>Adds [first, last], merging with overlapping or adjacent ranges. Returns false if the range bound
    /// forced dropping something (the highest ranges are dropped first).</summary>
    public bool AddRange(ulong first, ulong last)
    {
        if (last < first)
        {
            throw new ArgumentException($"Range [{first}, {last}] is empty.", nameof(last));
        }

        // Fast path: appending at the end (the common case when scanning upwards).
        if (_count == 0 || first > _ranges[_count - 1].Last)
        {
            if (_count > 0 && _ranges[_count - 1].Last != ulong.MaxValue && first == _ranges[_count - 1].Last + 1)
            {
                _ranges[_count - 1] = new SeqRange(_ranges[_count - 1].First, last);
                return true;
            }

            return Append(new SeqRange(first, last));
        }

        // General case: find the first range that ends at or after first-1, merge everything it touches.
        int i = 0;
        while (i < _count && _ranges[i].Last != ulong.MaxValue && _ranges[i].Last + 1 < first)
        {
            i++;
        }

        int j = i;
        ulong newFirst = first, newLast = last;
        while (j < _count && (last == ulong.MaxValue || _ranges[j].First <= last + 1))
        {
            newFirst = Math.Min(newFirst, _ranges[j].First);
            newLast = Math.Max(newLast, _ranges[j].Last);
            j++;
        }

        int removed = j - i;
        if (removed == 0)
        {
            return Insert(i, new SeqRange(first, last));
        }

        _ranges[i] = new SeqRange(newFirst, newLast);
        if (removed > 1)
        {
            Array.Copy(_ranges, j, _ranges, i + 1, _count - j);
            _count -= removed - 1;
        }

        return true;
    }

    /// <summary>
    /// Adds [first, last], which must lie above every range already in the set (an upward scan). When the range bound is
    /// reached, the two neighbouring ranges with the smallest gap between them are merged first, so the set stays a
    /// superset of what was added (it may name numbers that were not: <see cref="Coarse"/>). Used for the NAKs a member
    /// reports (§2.3.3's bounded NAK ranges): asking for a packet one has costs a duplicate, never a loss, while dropping
    /// the highest ranges would hide scattered losses for many rounds.
    /// </summary>
    public void AppendCoarsening(ulong first, ulong last)
    {
        if (last < first || (_count > 0 && first <= _ranges[_count - 1].Last))
        {
            throw new ArgumentException($"Range [{first}, {last}] is not above the set's last range.", nameof(first));
        }

        if (_count > 0 && first == _ranges[_count - 1].Last + 1)
        {
            _ranges[_count - 1] = new SeqRange(_ranges[_count - 1].First, last);
            return;
        }

        if (_count == MaxRanges)
        {
            // The smallest gap among the set's neighbours and the new range's gap to the last one.
            int best = _count - 1;
            ulong bestGap = first - _ranges[_count - 1].Last;
            for (int i = 0; i + 1 < _count; i++)
            {
                ulong gap = _ranges[i + 1].First - _ranges[i].Last;
                if (gap < bestGap)
                {
                    (best, bestGap) = (i, gap);
                }
            }

            Coarse = true;
            if (best == _count - 1)
            {
                _ranges[_count - 1] = new SeqRange(_ranges[_count - 1].First, last);
                return;
            }

            _ranges[best] = new SeqRange(_ranges[best].First, _ranges[best + 1].Last);
            Array.Copy(_ranges, best + 2, _ranges, best + 1, _count - best - 2);
            _count--;
        }

        Append(new SeqRange(first, last));
    }

    /// <summary>Merges the nearest neighbouring ranges until at most <paramref name="maxRanges"/> remain (a superset, as
    /// with <see cref="AppendCoarsening"/>): how a token that would not fit one control message is made to.</summary>
    public void CoarsenTo(int maxRanges)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxRanges, 1);
        while (_count > maxRanges)
        {
            int best = 0;
            ulong bestGap = ulong.MaxValue;
            for (int i = 0; i + 1 < _count; i++)
            {
                ulong gap = _ranges[i + 1].First - _ranges[i].Last;
                if (gap < bestGap)
                {
                    (best, bestGap) = (i, gap);
                }
            }

            _ranges[best] = new SeqRange(_ranges[best].First, _ranges[best + 1].Last);
            Array.Copy(_ranges, best + 2, _ranges, best + 1, _count - best - 2);
            _count--;
            Coarse = true;
        }
    }

    /// <summary>Whether <see cref="AppendCoarsening"/> merged ranges, so the set may name numbers never added.</summary>
    public bool Coarse { get; private set; }

    /// <summary>Removes every number in [first, last], in place (one removal splits at most one range).</summary>
    public void RemoveRange(ulong first, ulong last)
    {
        if (last < first)
        {
            return;
        }

        int i = 0;
        while (i < _count && _ranges[i].Last < first)
        {
            i++;
        }

        int j = i;
        while (j < _count && _ranges[j].First <= last)
        {
            j++;
        }

        if (i == j)
        {
            return; // nothing overlaps
        }

        Span<SeqRange> pieces = stackalloc SeqRange[2];
        int n = 0;
        if (_ranges[i].First < first)
        {
            pieces[n++] = new SeqRange(_ranges[i].First, first - 1);
        }

        if (_ranges[j - 1].Last > last)
        {
            pieces[n++] = new SeqRange(last + 1, _ranges[j - 1].Last);
        }

        int newCount = _count - (j - i) + n;
        if (newCount > _ranges.Length)
        {
            Array.Resize(ref _ranges, Math.Max(newCount, _ranges.Length * 2));
        }

        Array.Copy(_ranges, j, _ranges, i + n, _count - j);
        for (int k = 0; k < n; k++)
        {
            _ranges[i + k] = pieces[k];
        }

        _count = newCount;
        if (_count > MaxRanges)
        {
            _count = MaxRanges; // a split at the bound drops the highest range
            Truncated = true;
        }
    }

    /// <summary>Removes every number at or below <paramref name="seq"/> (a purge point).</summary>
    public void RemoveUpTo(ulong seq) => RemoveRange(0, seq);

    /// <summary>this := a \ b.</summary>
    public void SetDifference(NakSet a, NakSet b)
    {
        ArgumentNullException.ThrowIfNull(a);
        ArgumentNullException.ThrowIfNull(b);
        Clear();
        int j = 0;
        var bs = b.Ranges;
        foreach (var r in a.Ranges)
        {
            ulong start = r.First;
            bool done = false;
            while (j < bs.Length && bs[j].Last < start)
            {
                j++;
            }

            int k = j;
            while (k < bs.Length && bs[k].First <= r.Last)
            {
                if (bs[k].First > start)
                {
                    AddRange(start, bs[k].First - 1);
                }

                if (bs[k].Last >= r.Last)
                {
                    done = true;
                    break;
                }

                start = bs[k].Last + 1;
                k++;
            }

            if (!done)
            {
                AddRange(start, r.Last);
            }
        }
    }

    /// <summary>this := a ∩ b.</summary>
    public void SetIntersection(NakSet a, NakSet b)
    {
        ArgumentNullException.ThrowIfNull(a);
        ArgumentNullException.ThrowIfNull(b);
        Clear();
        var x = a.Ranges;
        var y = b.Ranges;
        int i = 0, j = 0;
        while (i < x.Length && j < y.Length)
        {
            ulong lo = Math.Max(x[i].First, y[j].First);
            ulong hi = Math.Min(x[i].Last, y[j].Last);
            if (lo <= hi)
            {
                AddRange(lo, hi);
            }

            if (x[i].Last < y[j].Last)
            {
                i++;
            }
            else
            {
                j++;
            }
        }
    }

    /// <summary>Writes the set as [u16 count][count x (u64 first, u64 last)], little-endian. Returns bytes written.</summary>
    public int Write(Span<byte> destination)
    {
        int needed = EncodedSize;
        if (destination.Length < needed)
        {
            throw new ArgumentException($"Need {needed} bytes to encode {_count} ranges.", nameof(destination));
        }

        BinaryPrimitives.WriteUInt16LittleEndian(destination, (ushort)_count);
        int offset = 2;
        foreach (var r in Ranges)
        {
            BinaryPrimitives.WriteUInt64LittleEndian(destination[offset..], r.First);
            BinaryPrimitives.WriteUInt64LittleEndian(destination[(offset + 8)..], r.Last);
            offset += RangeBytes;
        }

        return offset;
    }

    public int EncodedSize => 2 + (_count * RangeBytes);

    /// <summary>Reads a set written by <see cref="Write"/>, validating that ranges are well formed, sorted, disjoint and
    /// within <see cref="MaxRanges"/>. Returns the bytes consumed, or -1 when the input is malformed (the set is then empty).</summary>
    public int TryRead(ReadOnlySpan<byte> source)
    {
        Clear();
        if (source.Length < 2)
        {
            return -1;
        }

        int count = BinaryPrimitives.ReadUInt16LittleEndian(source);
        if (count > MaxRanges || source.Length < 2 + (count * RangeBytes))
        {
            return -1;
        }

        int offset = 2;
        ulong previousLast = 0;
        for (int i = 0; i < count; i++)
        {
            ulong first = BinaryPrimitives.ReadUInt64LittleEndian(source[offset..]);
            ulong last = BinaryPrimitives.ReadUInt64LittleEndian(source[(offset + 8)..]);
            // A range that ends at 2^64 - 1 must be the last one: previousLast + 1 would wrap to 0 and let an unsorted
            // range through.
            if (last < first || (i > 0 && (previousLast == ulong.MaxValue || first <= previousLast + 1)))
            {
                Clear();
                return -1;
            }

            Append(new SeqRange(first, last));
            previousLast = last;
            offset += RangeBytes;
        }

        return offset;
    }

    public override string ToString() => "{" + string.Join(",", _ranges.Take(_count)) + "}" + (Truncated ? "+" : "");

    private bool Append(SeqRange range)
    {
        if (_count == MaxRanges)
        {
            Truncated = true;
            return false;
        }

        if (_count == _ranges.Length)
        {
            Array.Resize(ref _ranges, Math.Min(MaxRanges, _ranges.Length * 2));
        }

        _ranges[_count++] = range;
        return true;
    }

    private bool Insert(int index, SeqRange range)
    {
        if (_count == MaxRanges)
        {
            // Keep the lowest ranges: the new one wins only if it is below the highest, which is then dropped.
            Truncated = true;
            if (index >= _count)
            {
                return false;
            }

            _count--;
        }

        if (_count == _ranges.Length)
        {
            Array.Resize(ref _ranges, Math.Min(MaxRanges, _ranges.Length * 2));
        }

        Array.Copy(_ranges, index, _ranges, index + 1, _count - index);
        _ranges[index] = range;
        _count++;
        return true;
    }
}
