using System.Buffers.Binary;
using System.Security.Cryptography;

namespace QuickSilver.Federation.Cluster;

/// <summary>Why <see cref="ClusterAuthenticator.Open"/> refused a control↔data frame.</summary>
public enum ClusterAuthError
{
    None = 0,

    /// <summary>Shorter than the trailer plus the smallest frame, or the tag does not verify (forged, altered, another
    /// secret, or an unauthenticated sender).</summary>
    BadTag,

    /// <summary>The tag verifies but the counter was seen already from that sender, or is too old to tell.</summary>
    Replayed,
}

/// <summary>
/// Authenticates the clustered gateway's control↔data frames with a secret the control node and its data nodes share
/// (<see cref="ClusterOptions.ClusterSecret"/>). Each sealed frame is the frame, then a trailer
/// <c>u64 counter | 16 B tag</c>, the tag being HMAC-SHA256 (System.Security.Cryptography), truncated to 16 bytes, of
/// the frame and the counter under a key derived from the secret with HKDF-SHA256 (its own salt and info, so it never
/// equals a key the datagram-security layer derives from the same secret). The counter goes up by one per frame a
/// sender seals and starts where the host says (the runtimes: microseconds since 1970, so a restarted sender starts
/// above what it sent before); a receiver keeps, per sender, the highest counter and a 64-frame window below it, and
/// refuses a counter it has seen or one older than the window (<see cref="ClusterAuthError.Replayed"/>): a recorded
/// HEARTBEAT replayed cannot keep a dead data node alive, nor an old ASSIGN move a session back. Senders are bounded by
/// the caller: it asks <see cref="Fresh"/> only for configured senders, after the tag verified. One thread.
/// </summary>
public sealed class ClusterAuthenticator
{
    public const int CounterBytes = 8;
    public const int TagBytes = 16;

    /// <summary>Bytes the trailer adds to a frame.</summary>
    public const int Overhead = CounterBytes + TagBytes;

    /// <summary>The shortest secret accepted, in bytes.</summary>
    public const int MinSecretBytes = 32;

    private const int Window = 64;
    private const int MinFrameBytes = ClusterCodec.HeaderBytes; // [u8 version][u8 type][u32 node][u32 term]

    private readonly byte[] _key = new byte[32];
    private readonly Dictionary<uint, (ulong Highest, ulong Seen)> _senders = [];
    private ulong _counter;

    /// <param name="secret">At least <see cref="MinSecretBytes"/> bytes.</param>
    /// <param name="firstCounter">The counter of the first frame this side seals (1 or more).</param>
    public ClusterAuthenticator(ReadOnlySpan<byte> secret, ulong firstCounter)
    {
        if (secret.Length < MinSecretBytes)
        {
            throw new ArgumentException($"the cluster secret must be at least {MinSecretBytes} bytes; got {secret.Length}", nameof(secret));
        }

        ArgumentOutOfRangeException.ThrowIfZero(firstCounter);
        HKDF.DeriveKey(HashAlgorithmName.SHA256, secret, _key, "QuickSilver federation cluster"u8, "control-data frames v1 hmac-sha256"u8);
        _counter = firstCounter - 1;
    }

    /// <summary>A counter start for a process that may restart: microseconds since 1970 on the wall clock (hosts only;
    /// the state machines never read a clock).</summary>
    public static ulong WallClockCounter() => (ulong)(DateTime.UtcNow - DateTime.UnixEpoch).Ticks / 10;

    /// <summary>The frame with its trailer.</summary>
    public byte[] Seal(ReadOnlySpan<byte> frame)
    {
        var sealedFrame = new byte[frame.Length + Overhead];
        frame.CopyTo(sealedFrame);
        BinaryPrimitives.WriteUInt64LittleEndian(sealedFrame.AsSpan(frame.Length), ++_counter);
        Span<byte> mac = stackalloc byte[32];
        HMACSHA256.HashData(_key, sealedFrame.AsSpan(0, frame.Length + CounterBytes), mac);
        mac[..TagBytes].CopyTo(sealedFrame.AsSpan(frame.Length + CounterBytes));
        return sealedFrame;
    }

    /// <summary>Verifies the tag of <paramref name="sealedFrame"/>; on success <paramref name="frame"/> is the frame
    /// without its trailer and <paramref name="counter"/> its counter, which the caller checks with <see cref="Fresh"/>
    /// once it knows the sender. Never throws on input.</summary>
    public ClusterAuthError Open(ReadOnlySpan<byte> sealedFrame, out ReadOnlySpan<byte> frame, out ulong counter)
    {
        frame = default;
        counter = 0;
        int length = sealedFrame.Length - Overhead;
        if (length < MinFrameBytes)
        {
            return ClusterAuthError.BadTag;
        }

        Span<byte> mac = stackalloc byte[32];
        HMACSHA256.HashData(_key, sealedFrame[..(length + CounterBytes)], mac);
        if (!CryptographicOperations.FixedTimeEquals(mac[..TagBytes], sealedFrame.Slice(length + CounterBytes, TagBytes)))
        {
            return ClusterAuthError.BadTag;
        }

        frame = sealedFrame[..length];
        counter = BinaryPrimitives.ReadUInt64LittleEndian(sealedFrame[length..]);
        return ClusterAuthError.None;
    }

    /// <summary>Records <paramref name="counter"/> from <paramref name="sender"/> (a data node's number, or 0 for the
    /// control node); false when it is a replay: seen already, or more than 64 below the highest seen.</summary>
    public bool Fresh(uint sender, ulong counter)
    {
        if (!_senders.TryGetValue(sender, out var s))
        {
            _senders[sender] = (counter, 1);
            return true;
        }

        if (counter > s.Highest)
        {
            ulong shift = counter - s.Highest;
            _senders[sender] = (counter, (shift >= Window ? 0 : s.Seen << (int)shift) | 1);
            return true;
        }

        ulong behind = s.Highest - counter;
        if (behind >= Window || (s.Seen & (1UL << (int)behind)) != 0)
        {
            return false;
        }

        _senders[sender] = (s.Highest, s.Seen | (1UL << (int)behind));
        return true;
    }
}
