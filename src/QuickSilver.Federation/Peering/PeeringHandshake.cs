using System.Buffers.Binary;
using System.Security.Cryptography;
using QuickSilver.Core.Security;
using QuickSilver.Federation.Naming;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Peering;

/// <summary>
/// Peering authentication (ours: the seed trusts its peers; docs/federation.md, "Peering authentication"). Two gateways
/// that share a peering secret (<see cref="Gateway.GatewayOptions.PeeringSecret"/>) each send PEER_AUTH first on a new
/// connection: their number and a fresh 32-byte random nonce. From both they derive two keys, one per direction
/// (<see cref="DeriveLinkKeys"/>: HKDF-SHA256 of the secret over both numbers and both nonces), and seal every later
/// frame (<see cref="FrameSealer"/>: AEGIS-128L, a counter per direction) and every real-time datagram
/// (<see cref="PeeringDatagrams"/>, two more keys). The first sealed frame each way is the HELLO,
/// so a side that opens its peer's HELLO knows the peer holds the secret and took part in this connection: a HELLO
/// recorded from another connection was sealed under keys made from other nonces and does not open, nor does a frame of
/// this connection sent back at its sender (the other direction's key). The secret itself never travels.
/// <para>One per connection; not thread-safe (the connection's reader uses it).</para>
/// </summary>
public sealed class PeeringHandshake
{
    /// <summary>Bytes of each side's nonce.</summary>
    public const int NonceBytes = 32;

    /// <summary>The cipher suite byte of PEER_AUTH: 0 = AEGIS-128L, the only one so far.</summary>
    public const byte Suite = 0;

    /// <summary>The shortest peering secret accepted, in bytes (as the cluster secret).</summary>
    public const int MinSecretBytes = DatagramSecurityOptions.MinSecretBytes;

    private readonly byte[] _secret;
    private readonly byte[] _nonce = RandomNumberGenerator.GetBytes(NonceBytes);

    public PeeringHandshake(byte[] secret, GatewayId self)
    {
        ArgumentNullException.ThrowIfNull(secret);
        if (secret.Length < MinSecretBytes)
        {
            throw new ArgumentException($"a peering secret is at least {MinSecretBytes} bytes, got {secret.Length}", nameof(secret));
        }

        _secret = secret;
        Self = self;
        AuthFrame = PeerCodec.PeerAuth(self, _nonce);
    }

    public GatewayId Self { get; }

    /// <summary>This side's PEER_AUTH frame, sent first (in the clear).</summary>
    public byte[] AuthFrame { get; }

    /// <summary>This side's nonce (tests).</summary>
    public ReadOnlySpan<byte> Nonce => _nonce;

    /// <summary>This connection's sealers once the peer's PEER_AUTH has arrived; null when the PEER_AUTH cannot be
    /// part of an honest handshake (it names this gateway, or carries this side's own nonce: a reflection).</summary>
    /// <param name="purpose">What the connection is: a peering link, or a bulk data channel (keys of one are never
    /// keys of the other: the purpose is part of the key derivation's info).</param>
    public PeeringLinkKeys? Complete(PeerAuthMessage peer, PeeringPurpose purpose = PeeringPurpose.Link)
    {
        ArgumentNullException.ThrowIfNull(peer);
        if (peer.Gateway == Self || peer.Nonce.Length != NonceBytes || CryptographicOperations.FixedTimeEquals(peer.Nonce, _nonce))
        {
            return null;
        }

        Span<byte> keys = stackalloc byte[LinkKeyBytes];
        bool lower = Self.Value < peer.Gateway.Value;
        if (lower)
        {
            DeriveLinkKeys(_secret, Self, _nonce, peer.Gateway, peer.Nonce, keys, purpose);
        }
        else
        {
            DeriveLinkKeys(_secret, peer.Gateway, peer.Nonce, Self, _nonce, keys, purpose);
        }

        const int K = FrameSealer.KeyBytes;
        var framesUp = keys[..K];
        var framesDown = keys[K..(2 * K)];
        var datagramsUp = keys[(2 * K)..(3 * K)];
        var datagramsDown = keys[(3 * K)..];
        try
        {
            return lower
                ? new PeeringLinkKeys(new FrameSealer(DatagramCipherSuite.Aegis128L, framesUp, framesDown), new PeeringDatagrams(datagramsUp, datagramsDown))
                : new PeeringLinkKeys(new FrameSealer(DatagramCipherSuite.Aegis128L, framesDown, framesUp), new PeeringDatagrams(datagramsDown, datagramsUp));
        }
        finally
        {
            CryptographicOperations.ZeroMemory(keys);
        }
    }

    /// <summary>Bytes of key material one connection uses: four keys.</summary>
    public const int LinkKeyBytes = 4 * FrameSealer.KeyBytes;

    /// <summary>The keys of one connection between gateways <paramref name="lower"/> and <paramref name="higher"/>
    /// (numbers in that order): HKDF-SHA256 (RFC 5869) with the secret as input keying material, a fixed salt, and as
    /// info a label then <c>u32 lower | nonce of lower | u32 higher | nonce of higher | u8 suite</c>; the
    /// <see cref="LinkKeyBytes"/> of output are the keys of frames lower → higher, frames higher → lower, datagrams
    /// lower → higher, datagrams higher → lower. Fresh nonces make fresh keys per connection. The one key derivation of
    /// peering: a bulk data channel (<see cref="PeeringPurpose.BulkChannel"/>) differs only in its label, <c>"QuickSilver
    /// federation peering v1 bulk channel keys"</c>, and its two ends are the sending and the receiving endpoint (a data
    /// node's number, or a gateway's when the gateway itself sends or receives).</summary>
    public static void DeriveLinkKeys(ReadOnlySpan<byte> secret, GatewayId lower, ReadOnlySpan<byte> lowerNonce, GatewayId higher,
        ReadOnlySpan<byte> higherNonce, Span<byte> keys, PeeringPurpose purpose = PeeringPurpose.Link)
    {
        if (lower.Value >= higher.Value || lowerNonce.Length != NonceBytes || higherNonce.Length != NonceBytes || keys.Length != LinkKeyBytes)
        {
            throw new ArgumentException("the lower gateway number first, two nonces of NonceBytes bytes, LinkKeyBytes of output");
        }

        ReadOnlySpan<byte> label = purpose switch
        {
            PeeringPurpose.Link => "QuickSilver federation peering v1 link keys"u8,
            PeeringPurpose.BulkChannel => "QuickSilver federation peering v1 bulk channel keys"u8,
            _ => throw new ArgumentOutOfRangeException(nameof(purpose), purpose, "a peering link or a bulk data channel"),
        };
        Span<byte> info = stackalloc byte[label.Length + (2 * (4 + NonceBytes)) + 1];
        label.CopyTo(info);
        var rest = info[label.Length..];
        BinaryPrimitives.WriteUInt32LittleEndian(rest, lower.Value);
        lowerNonce.CopyTo(rest[4..]);
        BinaryPrimitives.WriteUInt32LittleEndian(rest[(4 + NonceBytes)..], higher.Value);
        higherNonce.CopyTo(rest[(8 + NonceBytes)..]);
        rest[^1] = Suite;
        HKDF.DeriveKey(HashAlgorithmName.SHA256, secret, keys, "QuickSilver federation peering secret"u8, info);
    }
}

/// <summary>What an authenticated connection between gateways is for: its keys are derived under a label of their own.</summary>
public enum PeeringPurpose
{
    /// <summary>A peering link (HELLO, routing, sessions, DATA).</summary>
    Link = 0,

    /// <summary>A bulk data channel (DATA_CHANNEL then DATA, one way) to or from a data node of a clustered gateway; its
    /// datagram keys seal the real-time datagrams between the same two endpoints.</summary>
    BulkChannel = 1,
}

/// <summary>What a peering handshake yields: the sealer of the link's frames (the connection owns it once sealed) and
/// of its real-time datagrams (the runtime's, per link).</summary>
public sealed record PeeringLinkKeys(FrameSealer Frames, PeeringDatagrams Datagrams);
