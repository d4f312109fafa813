using System.Buffers.Binary;
using System.Text;

namespace QuickSilver.Dissemination.Protocol;

/// <summary>A bounds-checked little-endian reader: every read that would pass the end fails instead of throwing.</summary>
internal ref struct SpanReader
{
    private readonly ReadOnlySpan<byte> _span;
    private int _position;

    public SpanReader(ReadOnlySpan<byte> span)
    {
        _span = span;
        _position = 0;
    }

    public readonly int Remaining => _span.Length - _position;

    public bool U8(out byte value)
    {
        value = 0;
        if (Remaining < 1)
        {
            return false;
        }

        value = _span[_position++];
        return true;
    }

    public bool U16(out ushort value)
    {
        value = 0;
        if (Remaining < 2)
        {
            return false;
        }

        value = BinaryPrimitives.ReadUInt16LittleEndian(_span[_position..]);
        _position += 2;
        return true;
    }

    public bool U32(out uint value)
    {
        value = 0;
        if (Remaining < 4)
        {
            return false;
        }

        value = BinaryPrimitives.ReadUInt32LittleEndian(_span[_position..]);
        _position += 4;
        return true;
    }

    public bool U64(out ulong value)
    {
        value = 0;
        if (Remaining < 8)
        {
            return false;
        }

        value = BinaryPrimitives.ReadUInt64LittleEndian(_span[_position..]);
        _position += 8;
        return true;
    }

    public bool Bytes(int count, out ReadOnlySpan<byte> value)
    {
        value = default;
        if (count < 0 || Remaining < count)
        {
            return false;
        }

        value = _span.Slice(_position, count);
        _position += count;
        return true;
    }

    /// <summary>A u16-length-prefixed UTF-8 string of at most <paramref name="maxBytes"/> bytes, valid UTF-8 only.</summary>
    public bool String(int maxBytes, out string value)
    {
        value = string.Empty;
        if (!U16(out ushort length) || length > maxBytes || !Bytes(length, out var bytes))
        {
            return false;
        }

        try
        {
            value = Utf8Strict.GetString(bytes);
            return true;
        }
        catch (DecoderFallbackException)
        {
            return false;
        }
    }

    private static readonly UTF8Encoding Utf8Strict = new(false, true);
}

/// <summary>A little-endian writer into a growable buffer (control frames; the data path writes spans directly).</summary>
internal sealed class FrameWriter
{
    private byte[] _buffer = new byte[256];

    public int Length { get; private set; }

    public ReadOnlySpan<byte> Written => _buffer.AsSpan(0, Length);

    public void Reset() => Length = 0;

    private Span<byte> Take(int count)
    {
        if (Length + count > _buffer.Length)
        {
            Array.Resize(ref _buffer, Math.Max(_buffer.Length * 2, Length + count));
        }

        var span = _buffer.AsSpan(Length, count);
        Length += count;
        return span;
    }

    public void U8(byte value) => Take(1)[0] = value;

    public void U16(ushort value) => BinaryPrimitives.WriteUInt16LittleEndian(Take(2), value);

    public void U32(uint value) => BinaryPrimitives.WriteUInt32LittleEndian(Take(4), value);

    public void U64(ulong value) => BinaryPrimitives.WriteUInt64LittleEndian(Take(8), value);

    public void Bytes(ReadOnlySpan<byte> value) => value.CopyTo(Take(value.Length));

    public void String(string value)
    {
        int count = Encoding.UTF8.GetByteCount(value);
        U16((ushort)count);
        Encoding.UTF8.GetBytes(value, Take(count));
    }
}
