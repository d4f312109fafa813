using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Tests.Runtime;
using QuickSilver.Transport.Framing;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Federation.Tests.Peering;

/// <summary>The peering handshake and the frame sealer without sockets: two ends that share the secret seal and open
/// each other's frames; everything else fails to open.</summary>
public class PeeringHandshakeTests
{
    private static (FrameSealer Low, FrameSealer High) Connect(byte[] lowSecret, byte[] highSecret)
    {
        var low = new PeeringHandshake(lowSecret, new GatewayId(1));
        var high = new PeeringHandshake(highSecret, new GatewayId(2));
        return (low.Complete(Auth(high))!.Frames, high.Complete(Auth(low))!.Frames);
    }

    private static PeerAuthMessage Auth(PeeringHandshake h)
    {
        Assert.Equal(FrameError.None, PeerCodec.Decode(h.AuthFrame, out var m));
        return (PeerAuthMessage)m!;
    }

    private static byte[] Sealed(FrameSealer sealer, byte[] frame)
    {
        var buffer = new byte[frame.Length + sealer.Overhead];
        frame.CopyTo(buffer, 0);
        sealer.Seal(buffer, frame.Length);
        return buffer;
    }

    /// <summary>A bulk data channel's keys are never a peering link's: over the same numbers and nonces the two purposes
    /// give four different keys each, and a frame sealed under one does not open under the other.</summary>
    [Fact]
    public void ABulkChannelsKeysAreNotALinksKeysForTheSameNoncesAndNumbers()
    {
        var low = new PeeringHandshake(PeeringSecrets.A, new GatewayId(1));
        var high = new PeeringHandshake(PeeringSecrets.A, new GatewayId(201));
        var link = new byte[PeeringHandshake.LinkKeyBytes];
        var channel = new byte[PeeringHandshake.LinkKeyBytes];
        PeeringHandshake.DeriveLinkKeys(PeeringSecrets.A, low.Self, low.Nonce, high.Self, high.Nonce, link);
        PeeringHandshake.DeriveLinkKeys(PeeringSecrets.A, low.Self, low.Nonce, high.Self, high.Nonce, channel, PeeringPurpose.BulkChannel);
        for (int i = 0; i < 4; i++)
        {
            for (int j = 0; j < 4; j++)
            {
                Assert.NotEqual(link.AsSpan(32 * i, 32).ToArray(), channel.AsSpan(32 * j, 32).ToArray());
            }
        }

        using var linkSender = low.Complete(Auth(high))!.Frames;
        using var channelReceiver = high.Complete(Auth(low), PeeringPurpose.BulkChannel)!.Frames;
        Assert.False(channelReceiver.Open(Sealed(linkSender, PeerCodec.DataChannel(new GatewayId(1), 0)), new byte[64], out _));
    }

    [Fact]
    public void TwoEndsWithOneSecretSealAndOpenEveryFrameBothWaysInOrder()
    {
        var (low, high) = Connect(PeeringSecrets.A, PeeringSecrets.A);
        using (low)
        using (high)
        {
            Assert.Equal(32, low.Overhead); // AEGIS-128L's tag
            var random = new Random(16);
            var plain = new byte[PeerCodec.MaxFrameBytes];
            for (int i = 0; i < 2_000; i++)
            {
                var frame = new byte[random.Next(1, 3_000)];
                random.NextBytes(frame);
                var (from, to) = i % 3 == 0 ? (high, low) : (low, high);
                var wire = Sealed(from, frame);
                Assert.NotEqual(frame, wire.AsSpan(0, frame.Length).ToArray()); // encrypted
                Assert.True(to.Open(wire, plain, out int length));
                Assert.Equal(frame, plain.AsSpan(0, length).ToArray());
            }

            Assert.Equal(low.Sealed, high.Opened);
            Assert.Equal(high.Sealed, low.Opened);
        }
    }

    [Fact]
    public void AnyChangedByteATruncationAReplayAReorderingOrAReflectionFailsToOpen()
    {
        var frame = PeerCodec.Hello(new GatewayId(1), new IslandId(1), 47000);
        var plain = new byte[PeerCodec.MaxFrameBytes];
        for (int at = 0; at < frame.Length + 32; at++)
        {
            var (low, high) = Connect(PeeringSecrets.A, PeeringSecrets.A);
            var wire = Sealed(low, frame);
            wire[at] ^= 0x80;
            Assert.False(high.Open(wire, plain, out _), $"a bit flipped at byte {at} opened");
        }

        var (l, h) = Connect(PeeringSecrets.A, PeeringSecrets.A);
        var first = Sealed(l, frame);
        var second = Sealed(l, frame);
        Assert.False(h.Open(first.AsSpan(0, first.Length - 1), plain, out _)); // truncated
        Assert.False(h.Open(second, plain, out _)); // out of order: the receiver expects counter 0
        Assert.True(h.Open(first, plain, out _));
        Assert.False(h.Open(first, plain, out _)); // replayed
        Assert.False(l.Open(Sealed(l, frame), plain, out _)); // reflected back at its sender: the other direction's key
    }

    [Fact]
    public void AnotherSecretOrAnotherConnectionsKeysNeverOpen()
    {
        var frame = PeerCodec.KeepAlive();
        var plain = new byte[64];
        var (low, high) = Connect(PeeringSecrets.A, PeeringSecrets.B);
        Assert.False(high.Open(Sealed(low, frame), plain, out _));

        // A recorded connection replayed against a new one: the new end drew a new nonce, so its keys differ.
        var lowHandshake = new PeeringHandshake(PeeringSecrets.A, new GatewayId(1));
        var oldHigh = new PeeringHandshake(PeeringSecrets.A, new GatewayId(2));
        var newHigh = new PeeringHandshake(PeeringSecrets.A, new GatewayId(2));
        var recorded = Sealed(lowHandshake.Complete(Auth(oldHigh))!.Frames, frame);
        Assert.True(oldHigh.Complete(Auth(lowHandshake))!.Frames.Open(recorded, plain, out _));
        Assert.False(newHigh.Complete(Auth(lowHandshake))!.Frames.Open(recorded, plain, out _));
    }

    [Fact]
    public void APeerAuthThatNamesThisGatewayOrCarriesItsOwnNonceIsRefused()
    {
        var h = new PeeringHandshake(PeeringSecrets.A, new GatewayId(1));
        Assert.Null(h.Complete(Auth(h))); // itself
        Assert.Null(h.Complete(new PeerAuthMessage(new GatewayId(2), h.Nonce.ToArray()))); // its own nonce, reflected
        Assert.Throws<ArgumentException>(() => new PeeringHandshake(new byte[31], new GatewayId(1)));
    }

    [Fact]
    public void PeerAuthFramesAreCheckedBeforeUse()
    {
        var good = PeerCodec.PeerAuth(new GatewayId(3), new byte[PeeringHandshake.NonceBytes]);
        Assert.Equal(2 + 1 + 4 + 32, good.Length);
        for (int n = 0; n < good.Length; n++)
        {
            Assert.Equal(FrameError.Truncated, PeerCodec.Decode(good.AsSpan(0, n), out _));
        }

        Assert.Equal(FrameError.TrailingBytes, PeerCodec.Decode([.. good, 0], out _));
        var badSuite = (byte[])good.Clone();
        badSuite[2] = 1;
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(badSuite, out _));
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(PeerCodec.PeerAuth(new GatewayId(0), new byte[PeeringHandshake.NonceBytes]), out _));
        Assert.Throws<ArgumentException>(() => PeerCodec.PeerAuth(new GatewayId(3), new byte[16]));
    }

    [Fact]
    public void SealingAndOpeningAllocateNothingPerFrame()
    {
        var (low, high) = Connect(PeeringSecrets.A, PeeringSecrets.A);
        var buffer = new byte[1_000 + low.Overhead];
        var plain = new byte[PeerCodec.MaxFrameBytes];
        for (int i = 0; i < 100; i++)
        {
            low.Seal(buffer, 1_000);
            Assert.True(high.Open(buffer, plain, out _));
        }

        Assert.Equal(0, Property.FewestAllocated(() =>
        {
            for (int i = 0; i < 10_000; i++)
            {
                low.Seal(buffer, 1_000);
                high.Open(buffer, plain, out _);
            }
        }));
    }

    [Fact]
    public void RealTimeDatagramsOpenOnlyOnTheirLinkOnceOrOutOfOrderWithinTheWindow()
    {
        var low = new PeeringHandshake(PeeringSecrets.A, new GatewayId(1));
        var high = new PeeringHandshake(PeeringSecrets.A, new GatewayId(2));
        var lowKeys = low.Complete(Auth(high))!;
        var highKeys = high.Complete(Auth(low))!;
        var otherLink = new PeeringHandshake(PeeringSecrets.A, new GatewayId(2)).Complete(Auth(low))!;
        using var sender = lowKeys.Datagrams;
        using var receiver = highKeys.Datagrams;
        Assert.Equal(48, sender.Overhead); // the datagram trailer of AEGIS-128L
        var frame = new byte[116];
        new QuickSilver.Federation.Forwarding.DataHeader(0, 32, new FlowLabel(7), new GatewayId(1), 1).Write(frame);
        byte[] Seal()
        {
            var buffer = new byte[frame.Length + sender.Overhead];
            frame.CopyTo(buffer, 0);
            Assert.Equal(buffer.Length, sender.Seal(buffer, frame.Length));
            return buffer;
        }

        var plain = new byte[PeerCodec.MaxFrameBytes];
        var first = Seal();
        var second = Seal();
        Assert.True(receiver.Open(second, plain, out int length)); // UDP reorders: within the window, fine
        Assert.Equal(frame, plain.AsSpan(0, length).ToArray());
        Assert.True(receiver.Open(first, plain, out _));
        Assert.False(lowKeys.Datagrams.Open(Seal(), plain, out _)); // back at its sender: the other direction's key
        Assert.False(otherLink.Datagrams.Open(Seal(), plain, out _)); // another connection's keys
        for (int at = 0; at < first.Length; at++)
        {
            var altered = Seal();
            altered[at] ^= 0x04;
            Assert.False(receiver.Open(altered, plain, out _), $"a datagram altered at byte {at} opened");
        }

        Assert.False(receiver.Open(first.AsSpan(0, 40), plain, out _)); // truncated
        for (ulong i = 0; i <= PeeringDatagrams.Window; i++)
        {
            Seal();
        }

        Assert.True(receiver.Open(Seal(), plain, out _));
        Assert.False(receiver.Open(second, plain, out _)); // a replay from more than the window ago
        Assert.Equal(first.Length + 2, receiver.Rejected);
        lowKeys.Frames.Dispose();
        highKeys.Frames.Dispose();
    }
}
