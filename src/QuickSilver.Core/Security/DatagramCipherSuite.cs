namespace QuickSilver.Core.Security;

/// <summary>The AEAD that seals datagrams (docs/security.md, "Cipher suites"). Every node of a cluster and its GMS must
/// use the same suite: a datagram sealed under another suite has another trailer and key, and fails verification.</summary>
public enum DatagramCipherSuite
{
    /// <summary>AEGIS-128L (the CFRG draft, libsodium's implementation through NSec): a 32-byte tag, 48-byte trailer.
    /// The default: on this project's reference machine it seals a 16 KiB datagram about seven times faster than the
    /// runtime's AES-GCM, and a rejected datagram costs no exception.</summary>
    Aegis128L = 0,

    /// <summary>AES-256-GCM through the runtime's <see cref="System.Security.Cryptography.AesGcm"/> (GMAC when only
    /// authenticating): a 16-byte tag, 32-byte trailer. For clusters that must use a NIST-approved AEAD.</summary>
    AesGcm = 1,
}
