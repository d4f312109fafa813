using System.Buffers.Binary;
using QuickSilver.Core.Wire;

namespace QuickSilver;

/// <summary>
/// Typed messages on groups (QSM §2.5): a value is written as one class-id frame (<see cref="ClassRegistry.WriteFrame{T}"/>)
/// by its <see cref="IWireCodec{T}"/>, either a hand-written binary codec or the MessagePack wrapper
/// (<see cref="MessagePackObjectCodec{T}"/>) for arbitrary objects, and read back with the same codec.
/// </summary>
public static class TypedMessages
{
    /// <summary>Encodes <paramref name="value"/> and publishes it (waiting for room in the publish buffer).</summary>
    public static ValueTask PublishAsync<T>(this QuickSilverGroup group, IWireCodec<T> codec, T value, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(group);
        return group.PublishAsync(Encode(codec, value), cancellationToken);
    }

    /// <summary>Encodes <paramref name="value"/> and publishes it; false when the publish buffer is full.</summary>
    public static bool TryPublish<T>(this QuickSilverGroup group, IWireCodec<T> codec, T value)
    {
        ArgumentNullException.ThrowIfNull(group);
        return group.TryPublish(Encode(codec, value));
    }

    /// <summary>Decodes a message written by <paramref name="codec"/>. Returns <see cref="WireError.None"/> and the value, or
    /// why it could not: another class id (<see cref="WireError.UnknownClassId"/>), truncated or malformed bytes.</summary>
    public static WireError TryRead<T>(this GroupMessage message, IWireCodec<T> codec, out T value)
    {
        ArgumentNullException.ThrowIfNull(message);
        return TryRead(message.Payload, codec, out value);
    }

    /// <summary>Decodes a message payload written by <paramref name="codec"/> without copying it: the span an
    /// <see cref="QuickSilverGroup.OnMessage"/> handler gets (decode it during the call). Results as for the
    /// <see cref="GroupMessage"/> overload.</summary>
    public static WireError TryRead<T>(ReadOnlySpan<byte> payload, IWireCodec<T> codec, out T value)
    {
        ArgumentNullException.ThrowIfNull(codec);
        value = default!;
        if (payload.Length < ClassRegistry.FrameHeaderSize)
        {
            return WireError.Truncated;
        }

        if (BinaryPrimitives.ReadUInt16LittleEndian(payload) != codec.ClassId)
        {
            return WireError.UnknownClassId;
        }

        uint length = BinaryPrimitives.ReadUInt32LittleEndian(payload[2..]);
        if (length != (uint)(payload.Length - ClassRegistry.FrameHeaderSize))
        {
            return WireError.Truncated;
        }

        return codec.TryRead(payload[ClassRegistry.FrameHeaderSize..], out value);
    }

    private static byte[] Encode<T>(IWireCodec<T> codec, T value)
    {
        ArgumentNullException.ThrowIfNull(codec);
        var output = new ScatterGatherList();
        ClassRegistry.WriteFrame(codec, value, output);
        var bytes = new byte[output.TotalLength];
        output.CopyTo(bytes);
        return bytes;
    }
}
