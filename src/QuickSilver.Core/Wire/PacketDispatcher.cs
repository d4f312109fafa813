using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;

namespace QuickSilver.Core.Wire;

/// <summary>
/// The receive side of a stack: parses and validates every datagram's common header once, counts and rate-limit-logs
/// what it rejects, and hands the rest to the layer that registered its packet type (an array indexed by the type
/// byte; no handler chains, no sniffing of bodies). A type no layer registered is dropped and counted as
/// <see cref="DropReason.UnknownType"/>. Never throws on input. Core thread only.
/// </summary>
public sealed class PacketDispatcher : IDatagramHandler
{
    private readonly IPacketHandler?[] _handlers = new IPacketHandler?[256];
    private readonly string?[] _owners = new string?[256];
    private readonly DropCounters _drops;
    private readonly RateLimitedLog? _log;

    public PacketDispatcher(DropCounters drops, RateLimitedLog? log = null)
    {
        _drops = drops ?? throw new ArgumentNullException(nameof(drops));
        _log = log;
    }

    /// <summary>Datagrams delivered to a handler.</summary>
    public long Dispatched { get; private set; }

    /// <summary>Routes datagrams of <paramref name="type"/> (whole, header included) to <paramref name="handler"/>.</summary>
    /// <param name="owner">The registering layer's name, for the error when two layers claim one type.</param>
    public void Register(PacketType type, IPacketHandler handler, string owner = "?")
    {
        ArgumentNullException.ThrowIfNull(handler);
        if (type == PacketType.None)
        {
            throw new ArgumentException("Packet type 0 is reserved (never valid on the wire).", nameof(type));
        }

        if (_handlers[(byte)type] is not null)
        {
            throw new ArgumentException($"Packet type {(byte)type} is owned by layer '{_owners[(byte)type]}'; layer '{owner}' cannot register it too.", nameof(type));
        }

        _handlers[(byte)type] = handler;
        _owners[(byte)type] = owner;
    }

    /// <summary>The name of the layer that owns <paramref name="type"/>, or null.</summary>
    public string? OwnerOf(PacketType type) => _owners[(byte)type];

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        var error = PacketHeader.TryRead(datagram, out var header);
        if (error != WireError.None)
        {
            Reject(from, error);
            return;
        }

        var handler = _handlers[(byte)header.Type];
        if (handler is null)
        {
            Reject(from, WireError.UnknownType);
            return;
        }

        Dispatched++;
        handler.OnPacket(from, header, datagram);
    }

    private void Reject(NetAddress from, WireError error)
    {
        _drops.Increment(error);
        _log?.Warn((int)error, "Dropped a malformed datagram from {Peer} ({Error})", from, error); // no string unless written
    }
}
