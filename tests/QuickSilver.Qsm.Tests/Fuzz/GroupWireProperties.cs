using System.Buffers.Binary;
using CsCheck;
using QuickSilver.Qsm.Group;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// Group records packed in a region packet (GroupWire), read the way the group layer reads them: one after another
/// until the packet ends or a record is rejected. Records carry hostile groups and sequences, and length fields that
/// lie; the walk must not throw or allocate, must stop within one step per 14 bytes of packet whatever the fields say,
/// and every record it accepts must encode to the bytes it consumed.
/// </summary>
public sealed class GroupWireProperties
{
    private const int Iterations = 4000;

    private static readonly Gen<byte[]> Record =
        Gen.Select(Hostile.U32, Hostile.U64, Gen.Byte.Array[0, 120], Gen.Int[0, 9], Hostile.U16, (group, seq, payload, lie, length) =>
        {
            var bytes = new byte[GroupWire.HeaderSize + payload.Length];
            GroupWire.Write(bytes, group, seq, payload);
            if (lie == 0)
            {
                BinaryPrimitives.WriteUInt16LittleEndian(bytes.AsSpan(12), length);
            }

            return bytes;
        });

    private static readonly Gen<byte[]> Packet = Record.Array[0, 12].Select(records => records.SelectMany(r => r).ToArray());

    [Fact]
    public void Packed_records_are_walked_in_bounded_steps_and_round_trip()
    {
        Property.Decodes(Hostile.Mutate(Packet), Iterations, seed: 801, example =>
        {
            var (bytes, _) = example;
            var found = new (int Offset, int Length, uint Group, ulong Seq, int PayloadLength)[64];
            int count = Property.Decode(bytes, 0, b =>
            {
                int steps = 0;
                int offset = 0;
                ReadOnlySpan<byte> packet = b;
                int count = 0;
                while (!packet.IsEmpty && GroupWire.TryRead(packet, out uint group, out ulong seq, out var payload, out int consumed))
                {
                    if (++steps > (b.Length / GroupWire.HeaderSize) + 1 || consumed < GroupWire.HeaderSize || consumed > packet.Length)
                    {
                        throw new PropertyFailedException($"step {steps} consumed {consumed} of {packet.Length}");
                    }

                    if (count < found.Length)
                    {
                        found[count++] = (offset, consumed, group, seq, payload.Length);
                    }

                    offset += consumed;
                    packet = packet[consumed..];
                }

                return count;
            }, "GroupWire walk");

            foreach (var (offset, length, group, seq, payloadLength) in found.AsSpan(0, count))
            {
                Assert.True(seq > 0);
                var again = new byte[length];
                GroupWire.Write(again, group, seq, bytes.AsSpan(offset + GroupWire.HeaderSize, payloadLength));
                Assert.Equal(bytes.AsSpan(offset, length).ToArray(), again);
            }

            return count > 0; // at least one record accepted
        });
    }
}
