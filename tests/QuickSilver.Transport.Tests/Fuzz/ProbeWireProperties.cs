using CsCheck;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Testing.Fuzz;
using QuickSilver.Transport.Probe;

namespace QuickSilver.Transport.Tests.Fuzz;

/// <summary>
/// The multicast probe's packets (ProbeWire) and its sender and receiver fed hostile datagrams: negative and huge
/// sequences and counts, wrong flags, acknowledgements from many forged sources. Decoding must not throw or allocate;
/// a receiver counts only sequences it expects; a sender's window never opens beyond what it sent, and the sources it
/// tracks stay bounded.
/// </summary>
public sealed class ProbeWireProperties
{
    private static readonly Gen<long> Number = Hostile.U64.Select(v => unchecked((long)v));

    private static readonly Gen<byte[]> ValidPacket = Gen.Select(Gen.Bool, Hostile.U32, Number, Gen.Int[0, 100], (ack, sender, number, padding) =>
    {
        var datagram = new byte[ProbeWire.MinSize + (ack ? 0 : padding)];
        if (ack)
        {
            ProbeWire.WriteAck(datagram, sender, number);
        }
        else
        {
            ProbeWire.WriteData(datagram, sender, number);
        }

        return datagram;
    });

    [Fact]
    public void Probe_packets_are_rejected_or_round_trip_without_allocating()
    {
        Property.Decodes(Hostile.Mutate(ValidPacket), 4000, seed: 401, example =>
        {
            var (bytes, _) = example;
            var (isData, sequence, isAck, count) = Property.Decode(bytes, 0, b =>
                (ProbeWire.TryReadData(b, out long s), s, ProbeWire.TryReadAck(b, out long c), c), "ProbeWire.TryRead*");
            Assert.False(isData && isAck, "one packet read as data and as an acknowledgement");
            if (isData)
            {
                Assert.True(sequence >= 0);
                var again = new byte[bytes.Length];
                ProbeWire.WriteData(again, BitConverter.ToUInt32(bytes, 4), sequence);
                Assert.Equal(sequence, BitConverter.ToInt64(again, PacketHeader.Size));
            }

            if (isAck)
            {
                Assert.True(count >= 0);
            }

            return isData || isAck;
        });
    }

    [Fact]
    public void A_receiver_counts_only_the_sequences_it_expects()
    {
        Property.ForAll(Hostile.Mutate(ValidPacket).Array[1, 200], 300, seed: 402, packets =>
        {
            var endpoint = new CaptureTransport(NetAddress.Loopback(7100));
            var receiver = new ProbeReceiver(endpoint, NetAddress.Loopback(7101), total: 50, ackEvery: 5);
            foreach (var (bytes, _) in packets)
            {
                receiver.OnDatagram(NetAddress.Loopback(7101), bytes);
            }

            Assert.True(receiver.Received <= 50);
            Assert.True(receiver.CountMissing() == 50 - receiver.Received);
        });
    }

    [Fact]
    public void A_sender_never_opens_its_window_beyond_what_it_sent()
    {
        // Regression: an acknowledgement's count was taken as it came, so one forged ack counting 2^62 opened the window
        // for good (the sender stopped waiting for its receivers), and every new source address got an entry, without a bound.
        Property.ForAll(Gen.Select(Gen.UShort[1, 2000], Number).Array[1, 300], 200, seed: 403, acks =>
        {
            var sender = new ProbeSender(new NetAddress(0xEF000001, 7200), total: 1000, window: 10, payloadBytes: 64, receivers: 2);
            var slot = new byte[1500];
            var ack = new byte[ProbeWire.MinSize];
            foreach (var (port, count) in acks)
            {
                while (sender.Pull(slot, out _) > 0)
                {
                }

                ProbeWire.WriteAck(ack, 2, count);
                sender.OnDatagram(new NetAddress(0x0A000001, port), ack);
                Assert.True(sender.MinAcknowledged <= sender.Sent, $"acknowledged {sender.MinAcknowledged} of {sender.Sent} sent");
                Assert.True(sender.Sent <= sender.MinAcknowledged + sender.Window);
                Assert.True(sender.TrackedSources <= ProbeSender.MaxTrackedSources(2));
            }
        });
    }
}
