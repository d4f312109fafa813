using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Stack;

/// <summary>
/// Receives the datagrams of the packet types a layer registered. The stack's <see cref="PacketDispatcher"/> has
/// already parsed and validated the common header (magic, version, length) once; the handler parses only its own body.
/// The span is the whole datagram, header included, and is valid only during the call. Core thread only.
/// </summary>
public interface IPacketHandler
{
    void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram);
}
