namespace QuickSilver.Core.Wire;

/// <summary>
/// An outgoing message under construction (QSM §2.5): a small inline header area the message writes its fixed fields
/// into, followed by payload segments appended by reference, so large payloads are never copied until the one gather
/// into the socket's send buffer. Bounded (<see cref="MaxSegments"/>) and reusable: <see cref="Clear"/> keeps storage.
/// </summary>
public sealed class ScatterGatherList
{
    public const int MaxSegments = 16;

    private readonly byte[] _header;
    private readonly ReadOnlyMemory<byte>[] _segments = new ReadOnlyMemory<byte>[MaxSegments];
    private int _headerLength;
    private int _segmentCount;

    public ScatterGatherList(int headerCapacity = 256)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(headerCapacity, 16);
        _header = new byte[headerCapacity];
    }

    public int HeaderLength => _headerLength;

    public int SegmentCount => _segmentCount;

    public int TotalLength { get; private set; }

    /// <summary>Reserves <paramref name="length"/> more header bytes and returns them for writing.</summary>
    public Span<byte> AppendHeader(int length)
    {
        if (_headerLength + length > _header.Length)
        {
            throw new InvalidOperationException($"Header area of {_header.Length} bytes exceeded.");
        }

        if (_segmentCount > 0)
        {
            throw new InvalidOperationException("Header bytes must come before payload segments.");
        }

        var span = _header.AsSpan(_headerLength, length);
        _headerLength += length;
        TotalLength += length;
        return span;
    }

    /// <summary>Appends a payload segment by reference (the memory must stay unchanged until the message is gathered).</summary>
    public void AppendSegment(ReadOnlyMemory<byte> segment)
    {
        if (segment.IsEmpty)
        {
            return;
        }

        if (_segmentCount == MaxSegments)
        {
            throw new InvalidOperationException($"A message may have at most {MaxSegments} payload segments.");
        }

        _segments[_segmentCount++] = segment;
        TotalLength += segment.Length;
    }

    /// <summary>Overwrites header bytes already reserved (for length fields known only at the end).</summary>
    public Span<byte> HeaderAt(int offset, int length) => _header.AsSpan(offset, length);

    /// <summary>Gathers the header and every segment into <paramref name="destination"/>. Returns the bytes written.</summary>
    public int CopyTo(Span<byte> destination)
    {
        if (destination.Length < TotalLength)
        {
            throw new ArgumentException($"Need {TotalLength} bytes, got {destination.Length}.", nameof(destination));
        }

        _header.AsSpan(0, _headerLength).CopyTo(destination);
        int offset = _headerLength;
        for (int i = 0; i < _segmentCount; i++)
        {
            _segments[i].Span.CopyTo(destination[offset..]);
            offset += _segments[i].Length;
        }

        return offset;
    }

    public void Clear()
    {
        Array.Clear(_segments, 0, _segmentCount);
        _headerLength = 0;
        _segmentCount = 0;
        TotalLength = 0;
    }
}
