using System.Buffers.Binary;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Testing.Fuzz;
using QuickSilver.Transport.Probe;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Fuzz;

/// <summary>Reliable unicast and the multicast probe.</summary>
internal static class TransportTargets
{
    private static readonly ReliableUnicastOptions Options = new() { MaxPeers = 16, Window = 8, MaxMessageBytes = 4096, SendBufferSegments = 64, MaxSegmentBytes = 1024 };

    /// <summary>The decoders on the whole input, then the input as records <c>u8 source | u8 advance | u16 length |
    /// datagram</c> fed to a fresh endpoint (with conversations of its own to four of the sources) as they arrive.</summary>
    public static void Reliable(ReadOnlySpan<byte> input)
    {
        if (PacketHeader.TryRead(input, out var header) == WireError.None)
        {
            var body = input[PacketHeader.Size..];
            long mark = Expect.Mark();
            var dataError = ReliableWire.TryReadData(body, out var data);
            var ackError = ReliableWire.TryReadAck(body, out var ack);
            Expect.AllocatedAtMost(mark, 0, "ReliableWire.TryRead*");
            if (dataError == WireError.None)
            {
                Expect.That(data.SenderEpoch != 0 && data.PayloadOffset + data.PayloadLength == input.Length, $"accepted {data}");
            }

            if (ackError == WireError.None)
            {
                Expect.That(ack.SenderEpoch != 0 && ack.ReceiverEpoch != 0 && body.Length == ReliableWire.AckBodySize, $"accepted {ack}");
            }
        }

        var time = new VirtualScheduler();
        var transport = new CaptureTransport(NetAddress.Loopback(7000), 1500);
        var endpoint = new ReliableUnicast(0x1234, Options);
        new StackBuilder(transport, time).Add(endpoint).Build();
        var channel = endpoint.OpenChannel(200, "fuzz");
        channel.SetReceiver((_, message) => Expect.That(message.Length < Options.MaxMessageBytes, $"a {message.Length}-byte message delivered"), _ => { });
        for (int peer = 0; peer < 4; peer++)
        {
            channel.Send(Source(peer), new byte[3000]);
        }

        var rest = input;
        while (rest.Length >= 4)
        {
            int length = Math.Min(BinaryPrimitives.ReadUInt16LittleEndian(rest[2..]), rest.Length - 4);
            transport.Receive(Source(rest[0]), rest.Slice(4, length));
            if (rest[1] > 200)
            {
                time.RunFor(TimeSpan.FromMilliseconds((rest[1] - 200) * 50));
            }

            Expect.That(endpoint.ConnectionCount <= Options.MaxPeers, $"{endpoint.ConnectionCount} connections");
            rest = rest[(4 + length)..];
        }

        time.RunFor(TimeSpan.FromSeconds(30));
        Expect.That(endpoint.ConnectionCount <= Options.MaxPeers, $"{endpoint.ConnectionCount} connections");
    }

    private static NetAddress Source(int index) => new(0x0A000001 + (uint)(index % 8), (ushort)(9000 + index));

    public static IEnumerable<byte[]> ReliableSeeds()
    {
        var datagram = new byte[64];
        int length = ReliableWire.WriteData(datagram, ReliableWire.DataType, 2, 77, 0, 0, [200, 1, 2, 3]);
        yield return Record(0, 0, datagram.AsSpan(0, length));
        length = ReliableWire.WriteAck(datagram, 2, 77, 5, 1, 0b101);
        yield return Record(1, 210, datagram.AsSpan(0, length));
        int first = ReliableWire.WriteData(datagram, ReliableWire.FragmentType, 2, 77, 0, 0, [200, 9]);
        byte[] two = [.. Record(2, 0, datagram.AsSpan(0, first))];
        int second = ReliableWire.WriteData(datagram, ReliableWire.DataType, 2, 77, 0, 1, [9, 9]);
        yield return [.. two, .. Record(2, 0, datagram.AsSpan(0, second))];
    }

    private static byte[] Record(byte source, byte advance, ReadOnlySpan<byte> datagram)
    {
        var record = new byte[4 + datagram.Length];
        record[0] = source;
        record[1] = advance;
        BinaryPrimitives.WriteUInt16LittleEndian(record.AsSpan(2), (ushort)datagram.Length);
        datagram.CopyTo(record.AsSpan(4));
        return record;
    }

    /// <summary>The probe's decoders on the whole input; then the input, cut into 20-byte datagrams, fed to a receiver
    /// expecting 50 and, as acknowledgements from many sources, to a sender.</summary>
    public static void Probe(ReadOnlySpan<byte> input)
    {
        long mark = Expect.Mark();
        bool isData = ProbeWire.TryReadData(input, out long sequence);
        bool isAck = ProbeWire.TryReadAck(input, out long count);
        Expect.AllocatedAtMost(mark, 0, "ProbeWire.TryRead*");
        Expect.That(!(isData && isAck) && (!isData || sequence >= 0) && (!isAck || count >= 0), "a probe packet misread");

        var receiver = new ProbeReceiver(new CaptureTransport(NetAddress.Loopback(7100)), NetAddress.Loopback(7101), total: 50, ackEvery: 5);
        var sender = new ProbeSender(new NetAddress(0xEF000001, 7200), total: 1000, window: 10, payloadBytes: 64, receivers: 2);
        Span<byte> slot = stackalloc byte[1500];
        Span<byte> datagram = stackalloc byte[ProbeWire.MinSize];
        for (int offset = 0; offset + ProbeWire.MinSize <= input.Length; offset += ProbeWire.MinSize)
        {
            var piece = input.Slice(offset, ProbeWire.MinSize);
            receiver.OnDatagram(NetAddress.Loopback(7101), piece);
            while (sender.Pull(slot, out _) > 0)
            {
            }

            // The piece's first 8 bytes as an acknowledged count from the source its next two bytes name.
            ProbeWire.WriteAck(datagram, 2, BinaryPrimitives.ReadInt64LittleEndian(piece));
            sender.OnDatagram(new NetAddress(0x0A000001, BinaryPrimitives.ReadUInt16LittleEndian(piece[8..])), datagram);
            Expect.That(receiver.Received <= 50, "a receiver counted more than it expects");
            Expect.That(sender.MinAcknowledged <= sender.Sent && sender.Sent <= sender.MinAcknowledged + sender.Window, "the sender's window opened beyond what it sent");
            Expect.That(sender.TrackedSources <= ProbeSender.MaxTrackedSources(2), $"{sender.TrackedSources} sources tracked");
        }
    }

    public static IEnumerable<byte[]> ProbeSeeds()
    {
        var data = new byte[ProbeWire.MinSize];
        ProbeWire.WriteData(data, 1, 3);
        yield return data;
        var ack = new byte[ProbeWire.MinSize];
        ProbeWire.WriteAck(ack, 2, 10);
        yield return [.. data, .. ack];
    }
}
