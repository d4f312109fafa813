using System.Buffers.Binary;
using System.Security.Cryptography;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Reliable;

/// <summary>
/// The stateless cookies of the reliable-unicast handshake (the idea of TCP SYN cookies and QUIC retry tokens;
/// docs/security.md): a cookie is the first <see cref="Size"/> bytes of HMAC-SHA256, under a secret drawn at random
/// for this endpoint object, over (source IPv4 address, source port, the initiator's conversation number, time bucket).
/// A challenge hands it to the address a datagram claims to come from; only a host that receives at that address can
/// echo it, so an off-path host that spoofs its source never gets state. A cookie is valid in the bucket it was made
/// in and the next one (between one and two <see cref="ReliableUnicastOptions.CookieLifetime"/>), so nothing is stored
/// per initiator. The same key also derives this endpoint's conversation numbers, so they cannot be predicted from one
/// another. The one-shot <see cref="HMACSHA256.HashData(ReadOnlySpan{byte}, ReadOnlySpan{byte}, Span{byte})"/> works on
/// stack buffers: computing or checking a cookie allocates nothing. Core thread only.
/// </summary>
internal sealed class HandshakeCookies
{
    /// <summary>Bytes of a cookie on the wire (128 bits of MAC).</summary>
    public const int Size = 16;

    private const int InputSize = 4 + 4 + 2 + 4 + 8; // domain, ip, port, epoch, bucket
    private const uint CookieDomain = 0x52435351; // "QSCR"
    private const uint EpochDomain = 0x45435351;  // "QSCE"
    private readonly byte[] _key = new byte[32];
    private readonly long _bucketTicks;
    private ulong _epochs;

    public HandshakeCookies(TimeSpan lifetime)
    {
        _bucketTicks = lifetime.Ticks;
        RandomNumberGenerator.Fill(_key);
    }

    /// <summary>Writes the cookie for an initiator at <paramref name="peer"/> with conversation number
    /// <paramref name="epoch"/>, valid from <paramref name="now"/>.</summary>
    public void Write(NetAddress peer, uint epoch, TimeSpan now, Span<byte> cookie) => Compute(peer, epoch, Bucket(now), cookie);

    /// <summary>Whether <paramref name="cookie"/> is one this endpoint made for (peer, epoch) in the current or the
    /// previous time bucket. Constant time in the cookie's bytes.</summary>
    public bool IsValid(NetAddress peer, uint epoch, TimeSpan now, ReadOnlySpan<byte> cookie)
    {
        if (cookie.Length != Size)
        {
            return false;
        }

        Span<byte> expected = stackalloc byte[Size];
        long bucket = Bucket(now);
        Compute(peer, epoch, bucket, expected);
        if (CryptographicOperations.FixedTimeEquals(expected, cookie))
        {
            return true;
        }

        Compute(peer, epoch, bucket - 1, expected);
        return CryptographicOperations.FixedTimeEquals(expected, cookie);
    }

    /// <summary>A fresh conversation number: never 0, and unpredictable without the key (an off-path host must not be
    /// able to guess one from another it has seen).</summary>
    public uint NextEpoch()
    {
        Span<byte> input = stackalloc byte[12];
        Span<byte> mac = stackalloc byte[32];
        while (true)
        {
            BinaryPrimitives.WriteUInt32LittleEndian(input, EpochDomain);
            BinaryPrimitives.WriteUInt64LittleEndian(input[4..], ++_epochs);
            Mac(input, mac);
            uint epoch = BinaryPrimitives.ReadUInt32LittleEndian(mac);
            if (epoch != 0)
            {
                return epoch;
            }
        }
    }

    private long Bucket(TimeSpan now) => now.Ticks / _bucketTicks;

    private void Compute(NetAddress peer, uint epoch, long bucket, Span<byte> into)
    {
        Span<byte> input = stackalloc byte[InputSize];
        BinaryPrimitives.WriteUInt32LittleEndian(input, CookieDomain);
        BinaryPrimitives.WriteUInt32LittleEndian(input[4..], peer.Ip);
        BinaryPrimitives.WriteUInt16LittleEndian(input[8..], peer.Port);
        BinaryPrimitives.WriteUInt32LittleEndian(input[10..], epoch);
        BinaryPrimitives.WriteInt64LittleEndian(input[14..], bucket);
        Span<byte> mac = stackalloc byte[32];
        Mac(input, mac);
        mac[..Size].CopyTo(into);
    }

    private void Mac(ReadOnlySpan<byte> input, Span<byte> mac) => HMACSHA256.HashData(_key, input, mac);
}
