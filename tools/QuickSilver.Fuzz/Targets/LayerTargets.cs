using System.Buffers.Binary;
using System.Collections.Immutable;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Membership;
using QuickSilver.Qsm;
using QuickSilver.Qsm.Recovery;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Fuzz;

/// <summary>
/// A whole region stack (QsmStack.BuildRegion: reliable unicast and the region layer) of node 1 in a three-member
/// region, with a sender into it, fed the input as records <c>u8 kind | u8 source | u16 length | bytes</c>: kind 0 a
/// raw datagram, 1 a region control message inside the source's next reliable segments, 2 a region data packet (the
/// bytes after the common header), 3 virtual time passing (length ms). After each record what the layer holds must be
/// within its bounds; a loop driven by a peer's number shows as an afl-fuzz hang.
/// </summary>
internal static class LayerTargets
{
    private static readonly NetAddress Self = NetAddress.Loopback(5001);
    private static readonly NetAddress Peer2 = NetAddress.Loopback(5002);
    private static readonly NetAddress Peer3 = NetAddress.Loopback(5003);

    public static void RegionLayer(ReadOnlySpan<byte> input)
    {
        var options = new RegionOptions { MaxSenders = 8, MaxNakRanges = 8, SenderWindow = 256, MaxHeldPackets = 1024, TokenInterval = TimeSpan.FromMilliseconds(100) };
        var time = new VirtualScheduler();
        var transport = new CaptureTransport(Self, 1500);
        var stack = QsmStack.BuildRegion(transport, time, 1, new QsmStackOptions
        {
            Region = options,
            RateControl = new Qsm.RateControl.RateControlOptions { MinRate = 1_000_000, Credits = 1_000_000, CreditsHigh = 1_000_000 },
            Reliable = new ReliableUnicastOptions { MaxSegmentBytes = 1400, MaxPeers = 64 },
        });
        var layer = stack.Get<Qsm.Region.RegionLayer>();
        var view = new RegionView(new RegionId(1), 1,
            ImmutableArray.Create(new ViewMember(new NodeId(1), Self), new ViewMember(new NodeId(2), Peer2), new ViewMember(new NodeId(3), Peer3)),
            new NetAddress(0xEF0A0001, 6000));
        layer.InstallView(view);
        var sender = layer.Sender(view);
        sender.Source = new Records();
        transport.PullFeeds(64);
        time.RunFor(TimeSpan.FromMilliseconds(250));

        var conversations = new Dictionary<NetAddress, ulong>();
        var datagram = new byte[1500];
        var message = new byte[64 * 1024];
        var rest = input;
        while (rest.Length >= 4)
        {
            byte kind = rest[0];
            var from = rest[1] switch
            {
                0 => Self,
                1 => Peer2,
                2 => Peer3,
                var other => new NetAddress(0x0A000000u + other, (ushort)(9000 + other)),
            };
            int length = BinaryPrimitives.ReadUInt16LittleEndian(rest[2..]);
            if (kind % 4 == 3)
            {
                time.RunFor(TimeSpan.FromMilliseconds(length % 5000));
                transport.PullFeeds(16);
                rest = rest[4..];
                continue;
            }

            length = Math.Min(length, rest.Length - 4);
            var bytes = rest.Slice(4, length);
            rest = rest[(4 + length)..];
            switch (kind % 4)
            {
                case 0:
                    transport.Receive(from, bytes);
                    break;
                case 1:
                    // The source's next segments, in order (a peer with a conversation can always send them).
                    message[0] = Qsm.Region.RegionWire.ControlChannel;
                    bytes[..Math.Min(bytes.Length, message.Length - 1)].CopyTo(message.AsSpan(1));
                    int total = Math.Min(bytes.Length, message.Length - 1) + 1;
                    ulong next = conversations.GetValueOrDefault(from);
                    for (int offset = 0; offset < total; offset += 1400)
                    {
                        int piece = Math.Min(1400, total - offset);
                        int size = ReliableWire.WriteData(datagram, offset + piece == total ? ReliableWire.DataType : ReliableWire.FragmentType, 0,
                            0x5000u + from.Port, 0, next++, message.AsSpan(offset, piece));
                        transport.Receive(from, datagram.AsSpan(0, size));
                    }

                    conversations[from] = next;
                    break;
                default:
                    int packet = Math.Min(PacketHeader.Size + bytes.Length, datagram.Length);
                    new PacketHeader(Qsm.Region.RegionWire.DataType, bytes.Length >= 4 ? BinaryPrimitives.ReadUInt32LittleEndian(bytes) : 2, (ushort)packet).Write(datagram);
                    bytes[..(packet - PacketHeader.Size)].CopyTo(datagram.AsSpan(PacketHeader.Size));
                    transport.Receive(from, datagram.AsSpan(0, packet));
                    break;
            }

            var member = layer.Member!;
            foreach (var stream in member.Streams.Values)
            {
                Expect.That(stream.HeldCount <= options.MaxHeldPackets && stream.Capacity <= 2 * options.MaxHeldPackets,
                    $"sender {stream.Sender}: {stream.HeldCount} held in a ring of {stream.Capacity}");
            }

            Expect.That(sender.Acknowledged <= sender.LastSequence && sender.Unacknowledged <= options.SenderWindow, "the sender's window");
        }

        time.RunFor(TimeSpan.FromSeconds(2));
    }

    public static IEnumerable<byte[]> RegionLayerSeeds()
    {
        // A data packet from member 2 (seq 1 of its stream), a pull for it, a token at step 0, time passing.
        var data = new byte[Qsm.Region.RegionWire.DataHeaderSize + 8];
        Qsm.Region.RegionWire.WriteData(data, new DataHeader(2, 1, 1, 1, 1), new byte[8]);
        var set = new NakSet(8);
        set.AddRange(1, 3);
        var pull = new byte[64];
        int pullLength = Qsm.Region.RegionWire.WriteRanges(pull, RegionControl.Pull, 1, 2, 0, 1, set);
        var token = new Token { Region = 1, View = 1, Round = 1, Partition = 0, Step = 0 };
        token.Sections.Add(new TokenSection(2, 8) { Cutoff = 3, PurgeUpTo = 0, StableBefore = 0 });
        var tokenBytes = new byte[4096];
        int tokenLength = token.Write(tokenBytes);
        var ack = new byte[Qsm.Region.RegionWire.AckSize];
        Qsm.Region.RegionWire.WriteAck(ack, new RegionAck(1, 1, 1, 5, 5, 1000, 0));
        yield return [.. Record(2, 1, data.AsSpan(PacketHeader.Size)), .. Record(1, 2, pull.AsSpan(0, pullLength)), .. Record(3, 0, 150)];
        yield return [.. Record(1, 2, tokenBytes.AsSpan(0, tokenLength)), .. Record(1, 1, ack), .. Record(3, 0, 400)];
    }

    private static byte[] Record(byte kind, byte source, ReadOnlySpan<byte> bytes)
    {
        var record = new byte[4 + bytes.Length];
        record[0] = kind;
        record[1] = source;
        BinaryPrimitives.WriteUInt16LittleEndian(record.AsSpan(2), (ushort)bytes.Length);
        bytes.CopyTo(record.AsSpan(4));
        return record;
    }

    private static byte[] Record(byte kind, byte source, ushort milliseconds)
    {
        var record = new byte[4];
        record[0] = kind;
        record[1] = source;
        BinaryPrimitives.WriteUInt16LittleEndian(record.AsSpan(2), milliseconds);
        return record;
    }

    private sealed class Records : IRegionPacketSource
    {
        public int WritePayload(Span<byte> payload)
        {
            int written = Math.Min(payload.Length, 400);
            payload[..written].Fill(0x5A);
            return written;
        }
    }
}
