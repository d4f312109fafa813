using System.Buffers.Binary;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// Reliable unicast packets, after the common 12-byte header (little-endian; docs/wire-format.md):
/// <code>
/// ReliableData, ReliableFragment: u32 senderEpoch | u32 receiverEpoch | u64 seq | payload
///               (ReliableData ends a message; ReliableFragment is followed by the message's next segment)
/// ReliableAck:  u32 senderEpoch | u32 receiverEpoch | u64 next expected seq | u64 SACK bitmap
///               (bit i set: seq next+1+i has arrived)
/// ReliableConnect:   u32 senderEpoch | u32 0 | u8[16] cookie (all zero: first contact, asks for a challenge)
/// ReliableChallenge: u32 echoed senderEpoch | u32 echoed receiverEpoch | u8[16] cookie
/// </code>
/// Every epoch in data and acks is non-zero: a conversation carries both once its handshake is done. A challenge
/// echoes the two epochs of the datagram that caused it (receiverEpoch 0 when that was a connect).
/// </summary>
internal static class ReliableWire
{
    /// <summary>A data segment that ends its message.</summary>
    public const PacketType DataType = (PacketType)3;

    /// <summary>A cumulative + selective acknowledgement.</summary>
    public const PacketType AckType = (PacketType)4;

    /// <summary>A data segment that does not end its message (the next segment continues it).</summary>
    public const PacketType FragmentType = (PacketType)6;

    /// <summary>Asks for a conversation: first without a cookie, then echoing the challenge's.</summary>
    public const PacketType ConnectType = (PacketType)32;

    /// <summary>A stateless answer to a datagram that belongs to no conversation: the cookie to echo.</summary>
    public const PacketType ChallengeType = (PacketType)33;

    public const int DataHeaderSize = 16;
    public const int AckBodySize = 24;
    public const int HandshakeBodySize = 8 + HandshakeCookies.Size;

    /// <summary>A challenge answers only datagrams at least this long (a data segment's headers): it is 36 bytes, so
    /// an answer is never more than 1.3 times what caused it (QUIC allows 3 before an address is validated).</summary>
    public const int MinChallengeTrigger = PacketHeader.Size + DataHeaderSize;

    internal static int WriteData(Span<byte> datagram, PacketType type, uint sender, uint senderEpoch, uint receiverEpoch, ulong seq, ReadOnlySpan<byte> payload)
    {
        int length = PacketHeader.Size + DataHeaderSize + payload.Length;
        new PacketHeader(type, sender, (ushort)length).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, senderEpoch);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], receiverEpoch);
        BinaryPrimitives.WriteUInt64LittleEndian(body[8..], seq);
        payload.CopyTo(body[DataHeaderSize..]);
        return length;
    }

    internal static int WriteAck(Span<byte> datagram, uint sender, uint senderEpoch, uint receiverEpoch, ulong next, ulong sack)
    {
        int length = PacketHeader.Size + AckBodySize;
        new PacketHeader(AckType, sender, (ushort)length).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, senderEpoch);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], receiverEpoch);
        BinaryPrimitives.WriteUInt64LittleEndian(body[8..], next);
        BinaryPrimitives.WriteUInt64LittleEndian(body[16..], sack);
        return length;
    }

    /// <summary>A connect or a challenge: both are two epochs and a cookie.</summary>
    internal static int WriteHandshake(Span<byte> datagram, PacketType type, uint sender, uint first, uint second, ReadOnlySpan<byte> cookie)
    {
        int length = PacketHeader.Size + HandshakeBodySize;
        new PacketHeader(type, sender, (ushort)length).Write(datagram);
        var body = datagram[PacketHeader.Size..];
        BinaryPrimitives.WriteUInt32LittleEndian(body, first);
        BinaryPrimitives.WriteUInt32LittleEndian(body[4..], second);
        if (cookie.IsEmpty)
        {
            body.Slice(8, HandshakeCookies.Size).Clear();
        }
        else
        {
            cookie[..HandshakeCookies.Size].CopyTo(body[8..]);
        }

        return length;
    }

    internal readonly record struct Data(uint SenderEpoch, uint ReceiverEpoch, ulong Seq, int PayloadOffset, int PayloadLength);

    internal readonly record struct Ack(uint SenderEpoch, uint ReceiverEpoch, ulong Next, ulong Sack);

    internal static WireError TryReadData(ReadOnlySpan<byte> body, out Data data)
    {
        data = default;
        if (body.Length < DataHeaderSize)
        {
            return WireError.Truncated;
        }

        uint senderEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body);
        uint receiverEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body[4..]);
        if (senderEpoch == 0 || receiverEpoch == 0)
        {
            return WireError.Malformed; // data travels only in a conversation whose handshake is done
        }

        data = new Data(senderEpoch, receiverEpoch, BinaryPrimitives.ReadUInt64LittleEndian(body[8..]),
            PacketHeader.Size + DataHeaderSize, body.Length - DataHeaderSize);
        return WireError.None;
    }

    internal static WireError TryReadAck(ReadOnlySpan<byte> body, out Ack ack)
    {
        ack = default;
        if (body.Length != AckBodySize)
        {
            return body.Length < AckBodySize ? WireError.Truncated : WireError.Oversized;
        }

        uint senderEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body);
        uint receiverEpoch = BinaryPrimitives.ReadUInt32LittleEndian(body[4..]);
        if (senderEpoch == 0 || receiverEpoch == 0)
        {
            return WireError.Malformed;
        }

        ack = new Ack(senderEpoch, receiverEpoch, BinaryPrimitives.ReadUInt64LittleEndian(body[8..]), BinaryPrimitives.ReadUInt64LittleEndian(body[16..]));
        return WireError.None;
    }

    /// <summary>A connect (<c>First</c> = the initiator's epoch, <c>Second</c> = 0) or a challenge (the two echoed
    /// epochs). The cookie is at <see cref="CookieOffset"/> of the datagram.</summary>
    internal readonly record struct Handshake(uint First, uint Second);

    public const int CookieOffset = PacketHeader.Size + 8;

    internal static WireError TryReadConnect(ReadOnlySpan<byte> body, out Handshake connect)
    {
        connect = default;
        var error = ReadHandshake(body, ref connect);
        if (error == WireError.None && (connect.First == 0 || connect.Second != 0))
        {
            connect = default;
            return WireError.Malformed;
        }

        return error;
    }

    internal static WireError TryReadChallenge(ReadOnlySpan<byte> body, out Handshake challenge)
    {
        challenge = default;
        var error = ReadHandshake(body, ref challenge);
        if (error == WireError.None && challenge.First == 0)
        {
            challenge = default;
            return WireError.Malformed;
        }

        return error;
    }

    private static WireError ReadHandshake(ReadOnlySpan<byte> body, ref Handshake handshake)
    {
        if (body.Length != HandshakeBodySize)
        {
            return body.Length < HandshakeBodySize ? WireError.Truncated : WireError.Oversized;
        }

        handshake = new Handshake(BinaryPrimitives.ReadUInt32LittleEndian(body), BinaryPrimitives.ReadUInt32LittleEndian(body[4..]));
        return WireError.None;
    }
}
