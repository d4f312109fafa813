using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Wire;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Transport.Tests.Reliable;

/// <summary>Well-formed reliable-unicast datagrams with whatever numbers a hostile host chooses.</summary>
internal static class Forge
{
    public static byte[] Data(uint senderEpoch, uint receiverEpoch, ulong seq, ReadOnlySpan<byte> payload, bool last = true)
    {
        var datagram = new byte[PacketHeader.Size + ReliableWire.DataHeaderSize + payload.Length];
        ReliableWire.WriteData(datagram, last ? ReliableWire.DataType : ReliableWire.FragmentType, 0, senderEpoch, receiverEpoch, seq, payload);
        return datagram;
    }

    public static byte[] Ack(uint senderEpoch, uint receiverEpoch, ulong next, ulong sack = 0)
    {
        var datagram = new byte[PacketHeader.Size + ReliableWire.AckBodySize];
        ReliableWire.WriteAck(datagram, 0, senderEpoch, receiverEpoch, next, sack);
        return datagram;
    }

    public static byte[] Connect(uint epoch, UInt128 cookie) => Handshake(ReliableWire.ConnectType, epoch, 0, cookie);

    public static byte[] Challenge(uint first, uint second, UInt128 cookie) => Handshake(ReliableWire.ChallengeType, first, second, cookie);

    public static UInt128 RandomCookie(Random random) => new((ulong)random.NextInt64(), (ulong)random.NextInt64() | 1);

    private static byte[] Handshake(PacketType type, uint first, uint second, UInt128 cookie)
    {
        var datagram = new byte[PacketHeader.Size + ReliableWire.HandshakeBodySize];
        Span<byte> bytes = stackalloc byte[16];
        BinaryPrimitives.WriteUInt128LittleEndian(bytes, cookie);
        ReliableWire.WriteHandshake(datagram, type, 0, first, second, bytes);
        return datagram;
    }
}

/// <summary>
/// A hostile host that does answer challenges: from its own endpoint it opens a conversation with a target (connect,
/// echo the challenge's cookie) and then never says anything. Many of them on one simulated node are one host opening
/// connections from many ports.
/// </summary>
internal sealed class HandshakeBot : IDatagramHandler
{
    private readonly IDatagramTransport _transport;
    private readonly NetAddress _target;
    private readonly uint _epoch;

    public HandshakeBot(IDatagramTransport transport, NetAddress target, uint epoch)
    {
        _transport = transport;
        _target = target;
        _epoch = epoch;
        transport.SetHandler(this);
    }

    public bool Established { get; private set; }

    public void Start() => _transport.TrySend(_target, Forge.Connect(_epoch, UInt128.Zero));

    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (PacketHeader.TryRead(datagram, out var header) != WireError.None)
        {
            return;
        }

        var body = datagram[PacketHeader.Size..];
        if (header.Type == ReliableWire.ChallengeType && ReliableWire.TryReadChallenge(body, out var challenge) == WireError.None
            && challenge.First == _epoch && challenge.Second == 0)
        {
            _transport.TrySend(_target, Forge.Connect(_epoch, BinaryPrimitives.ReadUInt128LittleEndian(datagram[ReliableWire.CookieOffset..])));
        }
        else if (header.Type == ReliableWire.AckType && ReliableWire.TryReadAck(body, out var ack) == WireError.None && ack.ReceiverEpoch == _epoch)
        {
            Established = true;
        }
    }
}
