using System.Buffers.Binary;

namespace QuickSilver.Core.Wire;

/// <summary>
/// Codecs by class id, and the frame that names them: <c>[u16 classId][u32 bodyLength][body]</c>, little-endian.
/// <see cref="Dispatch"/> checks a received frame against its own length before touching the body and hands the body
/// to the registered codec and handler, so an unknown id or a lying length field costs a counter, not an allocation.
/// </summary>
public sealed class ClassRegistry
{
    public const int FrameHeaderSize = 6;

    /// <summary>Class ids below this are reserved for QuickSilver's own types.</summary>
    public const ushort FirstApplicationClassId = 256;

    private readonly Dictionary<ushort, IEntry> _entries = new();
    private readonly Dictionary<Type, ushort> _idsByType = new();

    public int Count => _entries.Count;

    /// <summary>Registers a codec and the handler for its messages. A duplicate id, or a second codec for the same
    /// type, is an <see cref="ArgumentException"/> naming both.</summary>
    public void Register<T>(IWireCodec<T> codec, WireMessageHandler<T> handler)
    {
        ArgumentNullException.ThrowIfNull(codec);
        ArgumentNullException.ThrowIfNull(handler);
        if (_entries.TryGetValue(codec.ClassId, out var existing))
        {
            throw new ArgumentException(
                $"Class id {codec.ClassId} is already registered for {existing.Type.Name}; cannot register it for {typeof(T).Name}.", nameof(codec));
        }

        if (_idsByType.TryGetValue(typeof(T), out ushort otherId))
        {
            throw new ArgumentException($"{typeof(T).Name} is already registered under class id {otherId}.", nameof(codec));
        }

        _entries.Add(codec.ClassId, new Entry<T>(codec, handler));
        _idsByType.Add(typeof(T), codec.ClassId);
    }

    public bool TryGetClassId<T>(out ushort classId) => _idsByType.TryGetValue(typeof(T), out classId);

    /// <summary>Writes <paramref name="value"/> as one frame: the frame header, then the codec's encoding.</summary>
    public static void WriteFrame<T>(IWireCodec<T> codec, in T value, ScatterGatherList output)
    {
        ArgumentNullException.ThrowIfNull(codec);
        ArgumentNullException.ThrowIfNull(output);
        int start = output.HeaderLength;
        int totalBefore = output.TotalLength;
        var header = output.AppendHeader(FrameHeaderSize);
        BinaryPrimitives.WriteUInt16LittleEndian(header, codec.ClassId);
        codec.Write(value, output);
        int bodyLength = output.TotalLength - totalBefore - FrameHeaderSize;
        BinaryPrimitives.WriteUInt32LittleEndian(output.HeaderAt(start + 2, 4), (uint)bodyLength);
    }

    /// <summary>Decodes one frame and calls its handler. Returns how many bytes the frame used (so frames can follow
    /// each other), or a negative value when it was rejected, with the reason in <paramref name="error"/>.</summary>
    public int Dispatch(Io.NetAddress from, ReadOnlySpan<byte> frames, out WireError error)
    {
        if (frames.Length < FrameHeaderSize)
        {
            error = WireError.Truncated;
            return -1;
        }

        ushort classId = BinaryPrimitives.ReadUInt16LittleEndian(frames);
        uint length = BinaryPrimitives.ReadUInt32LittleEndian(frames[2..]);
        if (length > (uint)(frames.Length - FrameHeaderSize))
        {
            error = WireError.Truncated; // the length field claims more than arrived: nothing is allocated for it
            return -1;
        }

        if (!_entries.TryGetValue(classId, out var entry))
        {
            error = WireError.UnknownClassId;
            return -1;
        }

        error = entry.Decode(from, frames.Slice(FrameHeaderSize, (int)length));
        return error == WireError.None ? FrameHeaderSize + (int)length : -1;
    }

    private interface IEntry
    {
        Type Type { get; }

        WireError Decode(Io.NetAddress from, ReadOnlySpan<byte> body);
    }

    private sealed class Entry<T>(IWireCodec<T> codec, WireMessageHandler<T> handler) : IEntry
    {
        public Type Type => typeof(T);

        public WireError Decode(Io.NetAddress from, ReadOnlySpan<byte> body)
        {
            var error = codec.TryRead(body, out var value);
            if (error == WireError.None)
            {
                handler(from, value, body);
            }

            return error;
        }
    }
}
