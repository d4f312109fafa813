namespace QuickSilver.WanLink;

/// <summary>
/// One direction of an impaired link: frames go in with the time they arrived and come out, in order, once they have
/// been held for <see cref="Delay"/>. Bounded in frames and bytes (a frame that would exceed either is dropped and
/// counted, like a full queue on a real link). No I/O and no clock of its own: the caller passes the time in
/// <see cref="System.Diagnostics.Stopwatch"/> ticks, so tests drive it on virtual time. Not thread-safe (the relay
/// guards it with a lock).
/// </summary>
public sealed class DelayLine
{
    private readonly byte[][] _frames;
    private readonly int[] _lengths;
    private readonly long[] _due;
    private readonly long _maxBytes;
    private int _head;
    private int _count;
    private long _bytes;

    /// <param name="delayTicks">How long each frame is held, in the caller's ticks (≥ 0).</param>
    /// <param name="maxFrames">Frames held at most (≥ 1).</param>
    /// <param name="maxBytes">Bytes held at most (≥ <paramref name="maxFrameBytes"/>).</param>
    /// <param name="maxFrameBytes">The largest frame accepted; longer ones are dropped as <see cref="Oversize"/>.</param>
    public DelayLine(long delayTicks, int maxFrames, long maxBytes, int maxFrameBytes)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(delayTicks);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxFrames, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxFrameBytes, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxBytes, maxFrameBytes);
        Delay = delayTicks;
        MaxFrameBytes = maxFrameBytes;
        _maxBytes = maxBytes;
        _frames = new byte[maxFrames][];
        _lengths = new int[maxFrames];
        _due = new long[maxFrames];
    }

    public long Delay { get; }

    public int MaxFrameBytes { get; }

    public int Count => _count;

    public long Bytes => _bytes;

    public long Accepted { get; private set; }

    public long Released { get; private set; }

    /// <summary>Frames dropped because the line held its maximum of frames or bytes.</summary>
    public long Overflow { get; private set; }

    /// <summary>Frames dropped because they were longer than <see cref="MaxFrameBytes"/>.</summary>
    public long Oversize { get; private set; }

    /// <summary>When the oldest frame is due, or null when the line is empty.</summary>
    public long? NextDue => _count == 0 ? null : _due[_head];

    /// <summary>Takes a copy of <paramref name="frame"/>, due at <paramref name="now"/> + <see cref="Delay"/>; false
    /// (and counted) when it does not fit.</summary>
    public bool TryEnqueue(ReadOnlySpan<byte> frame, long now)
    {
        if (frame.Length > MaxFrameBytes)
        {
            Oversize++;
            return false;
        }

        if (_count == _frames.Length || _bytes + frame.Length > _maxBytes)
        {
            Overflow++;
            return false;
        }

        int slot = (_head + _count) % _frames.Length;
        var buffer = _frames[slot] ??= new byte[MaxFrameBytes];
        frame.CopyTo(buffer);
        _lengths[slot] = frame.Length;

        // Due times never go backwards, even if the caller's clock does: the line is FIFO.
        long due = now + Delay;
        if (_count > 0)
        {
            int last = (_head + _count - 1) % _frames.Length;
            due = Math.Max(due, _due[last]);
        }

        _due[slot] = due;
        _count++;
        _bytes += frame.Length;
        Accepted++;
        return true;
    }

    /// <summary>Copies the oldest frame into <paramref name="destination"/> and returns its length if it is due at
    /// <paramref name="now"/>; -1 if none is due.</summary>
    public int TryDequeue(long now, Span<byte> destination)
    {
        if (_count == 0 || _due[_head] > now)
        {
            return -1;
        }

        int length = _lengths[_head];
        if (destination.Length < length)
        {
            throw new ArgumentException($"destination holds {destination.Length} bytes, the frame has {length}", nameof(destination));
        }

        _frames[_head].AsSpan(0, length).CopyTo(destination);
        _head = (_head + 1) % _frames.Length;
        _count--;
        _bytes -= length;
        Released++;
        return length;
    }
}
