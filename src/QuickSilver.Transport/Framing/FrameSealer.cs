using System.Buffers.Binary;
using QuickSilver.Core.Security;

namespace QuickSilver.Transport.Framing;

/// <summary>
/// Seals the frames of one <see cref="FramedConnection"/> once its two ends share keys (a peering link after its
/// handshake: docs/federation.md, "Peering authentication"). One key per direction, each a <see cref="DatagramCipher"/>
/// (the datagram-security code's AEAD, AEGIS-128L by default: no new cryptography here), and one counter per direction
/// that starts at 0 and goes up by one per frame. The counter is not sent: TCP delivers frames in order, so the receiver
/// knows it, and a frame dropped, repeated, reordered or moved from another connection (whose keys differ) fails to open.
/// A sealed frame is the frame encrypted in place, then the suite's tag (32 bytes for AEGIS-128L); the nonce is
/// <c>u32 0 | u64 counter</c> (little-endian), the associated data empty. The keys are fresh per connection (derived
/// from both ends' nonces), so a counter never repeats under one key.
/// <para>Sealing runs under the connection's send lock, opening on its reader: each direction one thread at a time.
/// Nothing allocates per frame.</para>
/// </summary>
public sealed class FrameSealer : IDisposable
{
    /// <summary>Bytes of each direction's key (<see cref="DatagramCipher.KeyBytes"/>).</summary>
    public const int KeyBytes = DatagramCipher.KeyBytes;

    private readonly DatagramCipher _send;
    private readonly DatagramCipher _receive;
    private ulong _sent;
    private ulong _received;

    public FrameSealer(DatagramCipherSuite suite, ReadOnlySpan<byte> sendKey, ReadOnlySpan<byte> receiveKey)
    {
        if (sendKey.SequenceEqual(receiveKey))
        {
            throw new ArgumentException("the two directions of a sealed connection need different keys", nameof(receiveKey));
        }

        _send = DatagramCipher.Create(suite, sendKey);
        _receive = DatagramCipher.Create(suite, receiveKey);
        Overhead = _send.TagBytes;
    }

    /// <summary>Bytes sealing adds to a frame (the tag).</summary>
    public int Overhead { get; }

    /// <summary>Frames sealed so far (the next frame's counter).</summary>
    public ulong Sealed => _sent;

    /// <summary>Frames opened so far (the counter the next received frame must carry).</summary>
    public ulong Opened => _received;

    /// <summary>Encrypts <paramref name="frameThenTag"/>[..<paramref name="length"/>] in place and writes the tag after
    /// it; <paramref name="frameThenTag"/> is <paramref name="length"/> + <see cref="Overhead"/> bytes.</summary>
    public void Seal(Span<byte> frameThenTag, int length)
    {
        Span<byte> nonce = stackalloc byte[DatagramCipher.NonceBytes];
        Nonce(_sent++, nonce);
        _send.Encrypt(nonce, frameThenTag[..(length + Overhead)], length, ReadOnlySpan<byte>.Empty);
    }

    /// <summary>Verifies and decrypts a received sealed frame into <paramref name="plaintext"/> (at least the frame's
    /// length); false when it is too short or does not verify (forged, altered, replayed, out of order, another key):
    /// the connection must then end, since the two counters no longer agree.</summary>
    public bool Open(ReadOnlySpan<byte> sealedFrame, Span<byte> plaintext, out int length)
    {
        length = sealedFrame.Length - Overhead;
        if (length < 0 || plaintext.Length < length)
        {
            length = 0;
            return false;
        }

        Span<byte> nonce = stackalloc byte[DatagramCipher.NonceBytes];
        Nonce(_received, nonce);
        if (!_receive.Decrypt(nonce, sealedFrame, plaintext[..length], ReadOnlySpan<byte>.Empty))
        {
            length = 0;
            return false;
        }

        _received++;
        return true;
    }

    private static void Nonce(ulong counter, Span<byte> nonce)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(nonce, 0);
        BinaryPrimitives.WriteUInt64LittleEndian(nonce[4..], counter);
    }

    public void Dispose()
    {
        _send.Dispose();
        _receive.Dispose();
    }
}
