using System.Buffers.Binary;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Forwarding;

/// <summary>
/// The header of a DATA frame on a peering link, 16 bytes, little-endian:
/// <code>
/// 0  u8  version (1)        1  u8  type (10 = Data)   2  u8 flags (0)   3  u8 ttl (hops left)
/// 4  u32 flow label (the upstream end's label for this flow on this link)
/// 8  u32 origin gateway (the gateway that took the packet from its island)
/// 12 u32 sequence (per origin gateway)
/// 16 ...  payload (the native datagram, unchanged)
/// </code>
/// (origin, sequence) names a packet federation-wide; <see cref="DuplicateFilter"/> uses it so that a packet that comes
/// round a loop in the mesh is never forwarded a second time. The ttl bounds any loop the filter could miss.
/// </summary>
public readonly record struct DataHeader(byte Flags, byte Ttl, FlowLabel Label, GatewayId Origin, uint Sequence)
{
    public const int Size = 16;

    public const byte DefaultTtl = 32;

    public void Write(Span<byte> destination) => Write(destination, FrameType.Data);

    /// <summary>Writes the header of a data-path frame of another type (CoreCast payload or header, receiver data): the
    /// same 16 bytes with byte 1 = <paramref name="type"/>.</summary>
    public void Write(Span<byte> destination, FrameType type)
    {
        destination[0] = PeerCodec.Version;
        destination[1] = (byte)type;
        destination[2] = Flags;
        destination[3] = Ttl;
        BinaryPrimitives.WriteUInt32LittleEndian(destination[4..], Label.Value);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[8..], Origin.Value);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[12..], Sequence);
    }

    /// <summary>Reads a data header; false when the frame is shorter than the header or a field is invalid.</summary>
    public static bool TryRead(ReadOnlySpan<byte> frame, out DataHeader header) => TryRead(frame, FrameType.Data, out header);

    public static bool TryRead(ReadOnlySpan<byte> frame, FrameType type, out DataHeader header)
    {
        header = default;
        if (frame.Length < Size || frame[0] != PeerCodec.Version || frame[1] != (byte)type)
        {
            return false;
        }

        uint label = BinaryPrimitives.ReadUInt32LittleEndian(frame[4..]);
        uint origin = BinaryPrimitives.ReadUInt32LittleEndian(frame[8..]);
        if (label == 0 || origin == 0)
        {
            return false;
        }

        header = new DataHeader(frame[2], frame[3], new FlowLabel(label), new GatewayId(origin), BinaryPrimitives.ReadUInt32LittleEndian(frame[12..]));
        return true;
    }
}
