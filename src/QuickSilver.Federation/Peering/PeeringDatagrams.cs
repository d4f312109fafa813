using QuickSilver.Core.Io;
using QuickSilver.Core.Security;

namespace QuickSilver.Federation.Peering;

/// <summary>
/// Seals the real-time DATA datagrams of one authenticated peering link (docs/federation.md, "Peering
/// authentication"): the datagram-security code's <see cref="DatagramSealer"/> in Encrypt mode under a key per direction
/// that the link's handshake derived (<see cref="PeeringHandshake"/>), so a datagram carries the same trailer a
/// QuickSilver datagram does (<c>tag | u32 key id 0 | u32 salt | u64 counter</c>, 48 bytes with AEGIS-128L), and the
/// core's <see cref="ReplayWindow"/>: a datagram whose counter is more than <see cref="Window"/> behind the highest
/// opened on this link is a replay (within the window the gateway's duplicate filter drops repeats by origin and
/// sequence). UDP loses and reorders, so the counter travels, unlike on the TCP link. A datagram that fails is dropped
/// and counted by the caller, and the link stays up: a forged datagram must not be a way to cut a link. Keys are
/// fresh per connection. The loop thread only.
/// </summary>
public sealed class PeeringDatagrams : IDisposable
{
    /// <summary>Datagrams a sender may have sent since one for it to be accepted.</summary>
    public const ulong Window = 1UL << 16;

    private readonly DatagramKeyRing _sendKeys;
    private readonly DatagramKeyRing _receiveKeys;
    private readonly DatagramSealer _sealer;
    private readonly DatagramSealer _opener;
    private readonly ReplayWindow _replay = new(Window, maxSources: 4);

    public PeeringDatagrams(ReadOnlySpan<byte> sendKey, ReadOnlySpan<byte> receiveKey)
    {
        _sendKeys = Ring(sendKey);
        _receiveKeys = Ring(receiveKey);
        _sealer = new DatagramSealer(DatagramSecurity.Encrypt, _sendKeys);
        _opener = new DatagramSealer(DatagramSecurity.Encrypt, _receiveKeys);
    }

    /// <summary>Bytes sealing adds to a datagram (48 with AEGIS-128L).</summary>
    public int Overhead => _sealer.Overhead;

    /// <summary>Datagrams that did not open (forged, altered, another link's or connection's) or were replayed.</summary>
    public long Rejected { get; private set; }

    /// <summary>Seals <paramref name="buffer"/>[..<paramref name="length"/>] in place; <paramref name="buffer"/> has
    /// <see cref="Overhead"/> more bytes. Returns the sealed length.</summary>
    public int Seal(Span<byte> buffer, int length) => _sealer.Seal(buffer, length);

    /// <summary>Opens a received datagram into <paramref name="plaintext"/> (at least as long); false (counted) when it
    /// does not verify or is a replay.</summary>
    public bool Open(ReadOnlySpan<byte> datagram, Span<byte> plaintext, out int length)
    {
        length = 0;
        if (datagram.Length > Overhead && plaintext.Length >= datagram.Length - Overhead
            && _opener.Open(datagram, plaintext, out length, out uint salt, out ulong counter) == DatagramRejection.None
            && _replay.Accept(default, salt, counter))
        {
            return true;
        }

        Rejected++;
        length = 0;
        return false;
    }

    private static DatagramKeyRing Ring(ReadOnlySpan<byte> key)
    {
        var ring = new DatagramKeyRing(DatagramCipherSuite.Aegis128L);
        ring.Add(DatagramKeyRing.ClusterKeyId, key);
        ring.Use(DatagramKeyRing.ClusterKeyId);
        return ring;
    }

    public void Dispose()
    {
        _sendKeys.Dispose();
        _receiveKeys.Dispose();
    }
}
