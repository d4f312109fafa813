using System.Buffers.Binary;

namespace QuickSilver.Qsm.Group;

/// <summary>
/// A group message inside a regional packet (docs/wire-format.md): <c>u32 group | u64 group sequence | u16 length | payload</c>.
/// Records are self-delimiting, so several (of any groups mapped to the region) share one packet (§2.2 packing).
/// </summary>
internal static class GroupWire
{
    public const int HeaderSize = 14;

    public static int Write(Span<byte> destination, uint group, ulong sequence, ReadOnlySpan<byte> payload)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(destination, group);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[4..], sequence);
        BinaryPrimitives.WriteUInt16LittleEndian(destination[12..], checked((ushort)payload.Length));
        payload.CopyTo(destination[HeaderSize..]);
        return HeaderSize + payload.Length;
    }

    /// <summary>Reads the record at the start of <paramref name="packet"/>; false (and nothing consumed) when it is
    /// truncated. <paramref name="consumed"/> is the record's length.</summary>
    public static bool TryRead(ReadOnlySpan<byte> packet, out uint group, out ulong sequence, out ReadOnlySpan<byte> payload, out int consumed)
    {
        group = 0;
        sequence = 0;
        payload = default;
        consumed = 0;
        if (packet.Length < HeaderSize)
        {
            return false;
        }

        int length = BinaryPrimitives.ReadUInt16LittleEndian(packet[12..]);
        if (packet.Length < HeaderSize + length)
        {
            return false;
        }

        group = BinaryPrimitives.ReadUInt32LittleEndian(packet);
        sequence = BinaryPrimitives.ReadUInt64LittleEndian(packet[4..]);
        payload = packet.Slice(HeaderSize, length);
        consumed = HeaderSize + length;
        return sequence > 0;
    }
}
