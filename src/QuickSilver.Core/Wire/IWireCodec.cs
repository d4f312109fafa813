namespace QuickSilver.Core.Wire;

/// <summary>
/// The binary serialization of one message type under a unique class id (QSM §2.5). Writing appends the fixed
/// header to the scatter-gather list's header area and payload segments by reference; reading parses straight from the
/// received bytes and must reject (never throw on) malformed input. A value that carries a payload refers to it by
/// offset and length within the body it was read from: received bytes are valid only during the upcall.
/// </summary>
public interface IWireCodec<T>
{
    /// <summary>The class id: 0–255 are reserved for QuickSilver, applications use 256 and above.</summary>
    ushort ClassId { get; }

    /// <summary>Appends <paramref name="value"/>'s encoding to <paramref name="output"/>.</summary>
    void Write(in T value, ScatterGatherList output);

    /// <summary>Parses a body. Returns <see cref="WireError.None"/> and the value, or the reason it is malformed.</summary>
    WireError TryRead(ReadOnlySpan<byte> body, out T value);
}

/// <summary>Receives a decoded message on the core thread; <paramref name="body"/> is the bytes it was read from.</summary>
public delegate void WireMessageHandler<T>(Io.NetAddress from, in T value, ReadOnlySpan<byte> body);
