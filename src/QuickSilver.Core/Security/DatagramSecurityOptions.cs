using System.Security.Cryptography;

namespace QuickSilver.Core.Security;

/// <summary>
/// Options of datagram authentication and encryption (<see cref="SecureTransport"/>). Every node of a cluster and its
/// GMS must use the same <see cref="Mode"/> and <see cref="ClusterSecret"/>: a datagram sealed under another secret or
/// mode fails verification and is dropped. Validated at start with the option named.
/// </summary>
public sealed record DatagramSecurityOptions
{
    /// <summary>The shortest accepted <see cref="ClusterSecret"/>, in bytes.</summary>
    public const int MinSecretBytes = 32;

    /// <summary>Off (the default), Authenticate or Encrypt.</summary>
    public DatagramSecurity Mode { get; init; } = DatagramSecurity.Off;

    /// <summary>The AEAD datagrams are sealed with: <see cref="DatagramCipherSuite.Aegis128L"/> (the default) or
    /// <see cref="DatagramCipherSuite.AesGcm"/>. Every node and the GMS must use the same one.</summary>
    public DatagramCipherSuite Cipher { get; init; } = DatagramCipherSuite.Aegis128L;

    /// <summary>The secret every node and the GMS share, at least <see cref="MinSecretBytes"/> bytes of which at least
    /// that many are random (<see cref="GenerateSecret"/>). Keys are derived from it with HKDF-SHA256
    /// (<see cref="DatagramKeyRing.DeriveClusterKey"/>); it is never sent.</summary>
    public byte[]? ClusterSecret { get; init; }

    /// <summary>Datagrams a peer endpoint may have sent since a datagram for it to be accepted: one whose nonce counter is
    /// more than this far behind the highest this node has verified from that endpoint (same address and salt) is
    /// dropped as a replay. 0 turns the check off. Default 2^20. Reordering between a sender's datagrams to different
    /// destinations counts against it, so it must stay far above a send burst.</summary>
    public ulong ReplayWindow { get; init; } = 1UL << 20;

    /// <summary>Peer endpoints whose highest counter is remembered for <see cref="ReplayWindow"/>; at the bound the
    /// oldest-inserted one is forgotten (a replay of its datagrams is then accepted by this check). Default 4,096.</summary>
    public int MaxReplaySources { get; init; } = 4096;

    /// <summary>Datagrams this node seals under one region key before it asks the GMS for a new one (AES-GCM's limit on
    /// invocations per key: NIST SP 800-38D §8.3 caps a key at 2^32 when the nonce is not a pure counter, as ours, salted
    /// at random per endpoint, is not; kept under AEGIS-128L, whose 128-bit nonces would allow far more). The count is per sealing node, so with m senders in a region a key may see up to m
    /// times this before it is replaced. Default 2^30; between <see cref="MinDatagramsPerKey"/> and 2^32. The cluster key
    /// (GMS and reliable-unicast traffic) is derived from the secret and not rotated.</summary>
    public long MaxDatagramsPerKey { get; init; } = 1L << 30;

    /// <summary>The smallest accepted <see cref="MaxDatagramsPerKey"/>.</summary>
    public const long MinDatagramsPerKey = 1_000;

    /// <summary>How long a region's previous keys stay accepted after a newer one is installed, so datagrams sealed
    /// under them (by senders that had not yet had the new view, or already queued) drain. A node removed from the
    /// region can inject under the old key for this long. Default 2 s; at most 1 minute.</summary>
    public TimeSpan KeyRetireDelay { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>Whether datagrams are sealed at all.</summary>
    public bool Enabled => Mode != DatagramSecurity.Off;

    /// <summary>A new random cluster secret of <see cref="MinSecretBytes"/> bytes.</summary>
    public static byte[] GenerateSecret() => RandomNumberGenerator.GetBytes(MinSecretBytes);

    /// <summary>Decodes a base64 secret (as a secret file or an environment variable holds it; surrounding white space
    /// ignored). Throws <see cref="ArgumentException"/> naming <paramref name="option"/> when it is not base64.</summary>
    public static byte[] DecodeSecret(string base64, string option = nameof(ClusterSecret))
    {
        ArgumentNullException.ThrowIfNull(base64);
        try
        {
            return Convert.FromBase64String(base64.Trim());
        }
        catch (FormatException)
        {
            throw new ArgumentException($"{option} must be base64 (e.g. the output of 'head -c 32 /dev/urandom | base64').", option);
        }
    }

    /// <summary>Throws <see cref="ArgumentException"/> (or <see cref="PlatformNotSupportedException"/>) naming the
    /// option that is wrong.</summary>
    public void Validate(string prefix = nameof(DatagramSecurityOptions))
    {
        if (!Enum.IsDefined(Mode))
        {
            throw new ArgumentOutOfRangeException($"{prefix}.{nameof(Mode)}", Mode, $"{prefix}.{nameof(Mode)} must be Off, Authenticate or Encrypt, got {(int)Mode}.");
        }

        if (Mode == DatagramSecurity.Off)
        {
            if (ClusterSecret is not null)
            {
                throw new ArgumentException($"{prefix}.{nameof(ClusterSecret)} is set but {prefix}.{nameof(Mode)} is Off: set the mode to Authenticate or Encrypt, or remove the secret.", $"{prefix}.{nameof(Mode)}");
            }

            return;
        }

        if (ClusterSecret is null || ClusterSecret.Length < MinSecretBytes)
        {
            throw new ArgumentException(
                $"{prefix}.{nameof(ClusterSecret)} must be at least {MinSecretBytes} bytes with {prefix}.{nameof(Mode)} {Mode}, got {(ClusterSecret is null ? "none" : $"{ClusterSecret.Length} bytes")} (DatagramSecurityOptions.GenerateSecret() makes one).",
                $"{prefix}.{nameof(ClusterSecret)}");
        }

        if (ReplayWindow > 1UL << 62)
        {
            throw new ArgumentOutOfRangeException($"{prefix}.{nameof(ReplayWindow)}", ReplayWindow, $"{prefix}.{nameof(ReplayWindow)} must be between 0 and 2^62, got {ReplayWindow}.");
        }

        OptionChecks.InRange(MaxReplaySources, 16, 1 << 20, $"{prefix}.{nameof(MaxReplaySources)}");
        if (MaxDatagramsPerKey < MinDatagramsPerKey || MaxDatagramsPerKey > 1L << 32)
        {
            throw new ArgumentOutOfRangeException($"{prefix}.{nameof(MaxDatagramsPerKey)}", MaxDatagramsPerKey, $"{prefix}.{nameof(MaxDatagramsPerKey)} must be between {MinDatagramsPerKey:N0} and 2^32, got {MaxDatagramsPerKey}.");
        }

        if (KeyRetireDelay <= TimeSpan.Zero || KeyRetireDelay > TimeSpan.FromMinutes(1))
        {
            throw new ArgumentOutOfRangeException($"{prefix}.{nameof(KeyRetireDelay)}", KeyRetireDelay, $"{prefix}.{nameof(KeyRetireDelay)} must be above zero and at most 1 minute, got {KeyRetireDelay}.");
        }
        if (!Enum.IsDefined(Cipher))
        {
            throw new ArgumentOutOfRangeException($"{prefix}.{nameof(Cipher)}", Cipher, $"{prefix}.{nameof(Cipher)} must be Aegis128L or AesGcm, got {(int)Cipher}.");
        }

        if (Cipher == DatagramCipherSuite.AesGcm && !AesGcm.IsSupported)
        {
            throw new PlatformNotSupportedException($"{prefix}.{nameof(Cipher)} AesGcm: this platform's cryptography library does not offer AES-GCM; use Aegis128L.");
        }
    }
}
