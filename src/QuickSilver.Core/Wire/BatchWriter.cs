using System.Buffers.Binary;

namespace QuickSilver.Core.Wire;

/// <summary>
/// Packs several messages for one destination into one Batch datagram (QSM §2.5's batching component):
/// <c>PacketHeader(Batch) | repeated [u16 frameLength][frame bytes]</c>. Frames are appended while they fit in the
/// datagram; <see cref="TryAppend"/> says when one does not. Works in the caller's buffer; no allocation.
/// </summary>
public ref struct BatchWriter
{
    public const int FramePrefix = 2;

    private readonly Span<byte> _datagram;
    private readonly uint _sender;
    private int _length;

    public BatchWriter(Span<byte> datagram, uint sender)
    {
        if (datagram.Length < PacketHeader.Size + FramePrefix)
        {
            throw new ArgumentException("The datagram buffer cannot hold a batch.", nameof(datagram));
        }

        _datagram = datagram.Length > ushort.MaxValue ? datagram[..ushort.MaxValue] : datagram;
        _sender = sender;
        _length = PacketHeader.Size;
        Count = 0;
    }

    public int Count { get; private set; }

    public readonly int Length => _length;

    /// <summary>Bytes still free for the next frame (its prefix already deducted).</summary>
    public readonly int Remaining => Math.Max(0, _datagram.Length - _length - FramePrefix);

    /// <summary>Appends <paramref name="frame"/> if it fits; returns false (and changes nothing) if it does not.</summary>
    public bool TryAppend(ReadOnlySpan<byte> frame)
    {
        if (frame.Length > Remaining || frame.Length > ushort.MaxValue)
        {
            return false;
        }

        BinaryPrimitives.WriteUInt16LittleEndian(_datagram[_length..], (ushort)frame.Length);
        frame.CopyTo(_datagram[(_length + FramePrefix)..]);
        _length += FramePrefix + frame.Length;
        Count++;
        return true;
    }

    /// <summary>Reserves room for a frame of <paramref name="length"/> bytes and returns it to be written in place.</summary>
    public Span<byte> TryReserve(int length)
    {
        if (length > Remaining)
        {
            return default;
        }

        BinaryPrimitives.WriteUInt16LittleEndian(_datagram[_length..], (ushort)length);
        var span = _datagram.Slice(_length + FramePrefix, length);
        _length += FramePrefix + length;
        Count++;
        return span;
    }

    /// <summary>Writes the common header. Returns the datagram length (0 when no frame was added).</summary>
    public int Finish()
    {
        if (Count == 0)
        {
            return 0;
        }

        new PacketHeader(PacketType.Batch, _sender, (ushort)_length).Write(_datagram);
        return _length;
    }
}

/// <summary>Iterates the frames of a Batch datagram's body, validating each length; never throws on bad input.</summary>
public ref struct BatchReader
{
    private readonly ReadOnlySpan<byte> _body;
    private int _offset;

    public BatchReader(ReadOnlySpan<byte> body)
    {
        _body = body;
        _offset = 0;
        Error = WireError.None;
    }

    /// <summary>Why iteration stopped early, or None.</summary>
    public WireError Error { get; private set; }

    public bool TryNext(out ReadOnlySpan<byte> frame)
    {
        frame = default;
        if (_offset == _body.Length || Error != WireError.None)
        {
            return false;
        }

        if (_body.Length - _offset < BatchWriter.FramePrefix)
        {
            Error = WireError.Truncated;
            return false;
        }

        int length = BinaryPrimitives.ReadUInt16LittleEndian(_body[_offset..]);
        if (length == 0)
        {
            Error = WireError.Malformed;
            return false;
        }

        if (length > _body.Length - _offset - BatchWriter.FramePrefix)
        {
            Error = WireError.Truncated;
            return false;
        }

        frame = _body.Slice(_offset + BatchWriter.FramePrefix, length);
        _offset += BatchWriter.FramePrefix + length;
        return true;
    }
}
