using MessagePack;

namespace QuickSilver.Core.Wire;

/// <summary>
/// The object wrapper (QSM §2.5: "a wrapper capable of transmitting arbitrary objects ... for developers who favor
/// simplicity over efficiency"): any MessagePack-serializable type under a class id. Decoding treats input as
/// untrusted (MessagePackSecurity.UntrustedData) and refuses bodies over <see cref="MaxBodyBytes"/> before parsing.
/// It allocates per message; the class-id codecs are the fast path.
/// </summary>
public sealed class MessagePackObjectCodec<T> : IWireCodec<T>
{
    private static readonly MessagePackSerializerOptions Options =
        MessagePackSerializerOptions.Standard.WithSecurity(MessagePackSecurity.UntrustedData);

    public MessagePackObjectCodec(ushort classId, int maxBodyBytes = 64 * 1024)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxBodyBytes, 1);
        ClassId = classId;
        MaxBodyBytes = maxBodyBytes;
    }

    public ushort ClassId { get; }

    public int MaxBodyBytes { get; }

    public void Write(in T value, ScatterGatherList output)
    {
        ArgumentNullException.ThrowIfNull(output);
        var bytes = MessagePackSerializer.Serialize(value, Options);
        if (bytes.Length > MaxBodyBytes)
        {
            throw new ArgumentException($"{typeof(T).Name} serializes to {bytes.Length} bytes, above the wrapper's limit of {MaxBodyBytes}.", nameof(value));
        }

        output.AppendSegment(bytes);
    }

    public WireError TryRead(ReadOnlySpan<byte> body, out T value)
    {
        value = default!;
        if (body.Length > MaxBodyBytes)
        {
            return WireError.Oversized;
        }

        try
        {
            // MessagePack reads from memory it may keep slices of; copy, as received spans are only valid in the upcall.
            value = MessagePackSerializer.Deserialize<T>(body.ToArray(), Options);
            return value is null ? WireError.Malformed : WireError.None;
        }
        catch (MessagePackSerializationException)
        {
            return WireError.Malformed; // the one place QuickSilver catches: the library reports bad input by throwing
        }
    }
}
