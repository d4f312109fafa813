namespace QuickSilver.Core.Security;

/// <summary>How a stack protects every datagram its endpoint sends and receives (docs/security.md, "Datagram
/// authentication").</summary>
public enum DatagramSecurity
{
    /// <summary>Datagrams travel as the layers wrote them; anything that parses is accepted.</summary>
    Off = 0,

    /// <summary>Plaintext plus a 32-byte trailer: key id, nonce and an AES-GCM tag over the whole datagram (GMAC: the
    /// datagram is the associated data, the encrypted part is empty). A datagram whose tag does not verify under the
    /// cluster key is dropped before any layer parses it.</summary>
    Authenticate = 1,

    /// <summary>Like <see cref="Authenticate"/>, but the datagram itself is encrypted (AES-GCM, the trailer's key id and
    /// nonce as associated data).</summary>
    Encrypt = 2,
}
