using System.Buffers.Binary;

namespace QuickSilver;

/// <summary>A group message inside a regional packet: <c>u32 group | u64 group sequence | payload</c> (docs/wire-format.md).</summary>
internal static class GroupWire
{
    public const int HeaderSize = 12;

    public static void Write(Span<byte> destination, uint group, ulong sequence, ReadOnlySpan<byte> payload)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(destination, group);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[4..], sequence);
        payload.CopyTo(destination[HeaderSize..]);
    }

    public static bool TryRead(ReadOnlySpan<byte> packet, out uint group, out ulong sequence, out ReadOnlySpan<byte> payload)
    {
        group = 0;
        sequence = 0;
        payload = default;
        if (packet.Length < HeaderSize)
        {
            return false;
        }

        group = BinaryPrimitives.ReadUInt32LittleEndian(packet);
        sequence = BinaryPrimitives.ReadUInt64LittleEndian(packet[4..]);
        payload = packet[HeaderSize..];
        return true;
    }
}
