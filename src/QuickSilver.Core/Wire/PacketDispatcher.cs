using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Core.Wire;

/// <summary>
/// The receive side of the wire format: validates every datagram's common header, counts and rate-limit-logs what it
/// rejects, and hands the rest to the handler registered for its packet type (an array indexed by the type byte).
/// Batch datagrams are unpacked and each frame goes to the class registry. Never throws on input. Core thread only.
/// </summary>
public sealed class PacketDispatcher : IDatagramHandler
{
    private readonly IDatagramHandler?[] _handlers = new IDatagramHandler?[256];
    private readonly DropCounters _drops;
    private readonly RateLimitedLog? _log;

    public PacketDispatcher(DropCounters drops, ClassRegistry? frames = null, RateLimitedLog? log = null)
    {
        _drops = drops ?? throw new ArgumentNullException(nameof(drops));
        Frames = frames;
        _log = log;
    }

    /// <summary>Where Batch frames go; null drops batches as UnknownType.</summary>
    public ClassRegistry? Frames { get; }

    /// <summary>Routes datagrams of <paramref name="type"/> (whole, header included) to <paramref name="handler"/>.</summary>
    public void Register(PacketType type, IDatagramHandler handler)
    {
        ArgumentNullException.ThrowIfNull(handler);
        if (type is PacketType.None or PacketType.Batch)
        {
            throw new ArgumentException($"Packet type {type} cannot have a handler.", nameof(type));
        }

        if (_handlers[(byte)type] is not null)
        {
            throw new ArgumentException($"Packet type {type} already has a handler.", nameof(type));
        }

        _handlers[(byte)type] = handler;
    }

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        var error = PacketHeader.TryRead(datagram, out var header);
        if (error != WireError.None)
        {
            Reject(from, error);
            return;
        }

        if (header.Type == PacketType.Batch)
        {
            if (Frames is null)
            {
                Reject(from, WireError.UnknownType);
                return;
            }

            var reader = new BatchReader(datagram[PacketHeader.Size..]);
            while (reader.TryNext(out var frame))
            {
                if (Frames.Dispatch(from, frame, out var frameError) < 0)
                {
                    Reject(from, frameError);
                }
            }

            if (reader.Error != WireError.None)
            {
                Reject(from, reader.Error);
            }

            return;
        }

        var handler = _handlers[(byte)header.Type];
        if (handler is null)
        {
            Reject(from, WireError.UnknownType);
            return;
        }

        handler.OnDatagram(from, datagram);
    }

    private void Reject(NetAddress from, WireError error)
    {
        _drops.Increment(error);
        _log?.Warn((int)error, "Dropped a malformed datagram from {Peer}", $"{from} ({error})");
    }
}
