using System.Buffers.Binary;
using System.Text;

namespace QuickSilver.Federation.Peering;

/// <summary>A bounds-checked little-endian cursor over a received frame. Every read returns false instead of throwing
/// when the frame is too short; callers turn that into <see cref="FrameError.Truncated"/>.</summary>
internal ref struct SpanReader(ReadOnlySpan<byte> span)
{
    private readonly ReadOnlySpan<byte> _span = span;
    private int _pos;

    public readonly int Remaining => _span.Length - _pos;

    public readonly ReadOnlySpan<byte> Rest => _span[_pos..];

    public bool U8(out byte value)
    {
        if (Remaining < 1)
        {
            value = 0;
            return false;
        }

        value = _span[_pos++];
        return true;
    }

    public bool Bytes(int n, out ReadOnlySpan<byte> value)
    {
        if (Remaining < n)
        {
            value = default;
            return false;
        }

        value = _span.Slice(_pos, n);
        _pos += n;
        return true;
    }

    public bool U16(out ushort value)
    {
        if (Remaining < 2)
        {
            value = 0;
            return false;
        }

        value = BinaryPrimitives.ReadUInt16LittleEndian(_span[_pos..]);
        _pos += 2;
        return true;
    }

    public bool U32(out uint value)
    {
        if (Remaining < 4)
        {
            value = 0;
            return false;
        }

        value = BinaryPrimitives.ReadUInt32LittleEndian(_span[_pos..]);
        _pos += 4;
        return true;
    }

    /// <summary>A u16 length then that many UTF-8 bytes, at most <paramref name="maxBytes"/>.</summary>
    public bool String(int maxBytes, out string value, out bool tooLong)
    {
        value = "";
        tooLong = false;
        if (!U16(out ushort length))
        {
            return false;
        }

        if (length > maxBytes)
        {
            tooLong = true;
            return false;
        }

        if (Remaining < length)
        {
            return false;
        }

        try
        {
            value = new UTF8Encoding(false, true).GetString(_span.Slice(_pos, length));
        }
        catch (DecoderFallbackException)
        {
            tooLong = true;
            return false;
        }

        _pos += length;
        return true;
    }
}

/// <summary>A little-endian writer into a growable array; control frames only (the data path writes its header in place).</summary>
internal sealed class FrameWriter
{
    private byte[] _buffer = new byte[256];

    public int Length { get; private set; }

    public ReadOnlySpan<byte> Written => _buffer.AsSpan(0, Length);

    public FrameWriter U8(byte v)
    {
        Ensure(1)[0] = v;
        Length += 1;
        return this;
    }

    public FrameWriter Bytes(ReadOnlySpan<byte> v)
    {
        v.CopyTo(Ensure(v.Length));
        Length += v.Length;
        return this;
    }

    public FrameWriter U16(ushort v)
    {
        BinaryPrimitives.WriteUInt16LittleEndian(Ensure(2), v);
        Length += 2;
        return this;
    }

    public FrameWriter U32(uint v)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(Ensure(4), v);
        Length += 4;
        return this;
    }

    public FrameWriter String(string s)
    {
        int n = Encoding.UTF8.GetByteCount(s);
        U16(checked((ushort)n));
        Encoding.UTF8.GetBytes(s, Ensure(n));
        Length += n;
        return this;
    }

    private Span<byte> Ensure(int n)
    {
        if (Length + n > _buffer.Length)
        {
            Array.Resize(ref _buffer, Math.Max(_buffer.Length * 2, Length + n));
        }

        return _buffer.AsSpan(Length, n);
    }
}
