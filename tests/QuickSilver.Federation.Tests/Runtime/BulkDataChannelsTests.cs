using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Runtime;
using static QuickSilver.Federation.Tests.Cluster.LoopbackSockets;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary><see cref="BulkDataChannels"/> against a closed port (dial failure: what waited is dropped and counted, and
/// sends during the back-off too) and <see cref="SamePortSockets"/>. The channels' "loop thread" is the test's own:
/// posted actions are run only when the test drains them. Waits are bounded; nothing asserts a duration.</summary>
public class BulkDataChannelsTests
{
    [Fact]
    public async Task ADialThatFailsDropsWhatWaitedAndWhatIsSentDuringTheBackOffCountingBoth()
    {
        var posted = new BlockingCollection<Action>();
        var now = TimeSpan.Zero; // the owner's clock, advanced by the test
        var channels = new BulkDataChannels(new GatewayId(1), 0, posted.Add, () => now);
        await using (channels)
        {
            using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            var closed = (IPEndPoint)probe.LocalEndPoint!; // bound, never listening: connections are refused
            var frame = new byte[30];
            new QuickSilver.Federation.Forwarding.DataHeader(0, 32, new FlowLabel(1), new GatewayId(1), 1).Write(frame);

            Assert.True(channels.Send(closed, new GatewayId(2), frame)); // dials; the frame waits
            Assert.True(channels.Send(closed, new GatewayId(2), frame));
            Assert.True(posted.TryTake(out var down, TimeSpan.FromSeconds(10)), "the dial never finished");
            down();
            Assert.Equal(1, channels.Failed);
            Assert.Equal(0, channels.FramesSent);
            Assert.Equal(2, channels.FramesDropped);

            Assert.False(channels.Send(closed, new GatewayId(2), frame)); // the back-off: dropped, no dial
            Assert.Equal(3, channels.FramesDropped);
            Assert.Empty(posted); // no dial started

            now += BulkDataChannels.RetryAfter; // after the back-off the next send dials again
            Assert.True(channels.Send(closed, new GatewayId(2), frame));
            Assert.True(posted.TryTake(out down, TimeSpan.FromSeconds(10)), "the second dial never finished");
            down();
            Assert.Equal(2, channels.Failed);
            Assert.Equal(4, channels.FramesDropped);
            Assert.Equal(0, channels.Opened);
        }
    }

    // A receiver played by the test: accepts one channel, reads the sender's DATA_CHANNEL and PEER_AUTH, answers with
    // `answer` (given the sender's PEER_AUTH) and returns the frames it then reads (raw, sealed) until closed or `upTo`,
    // keeping the connection open until `hold` completes.
    private static async Task<(PeerAuthMessage Auth, List<byte[]> Frames)> ReceiverAsync(Socket listener, Func<PeerAuthMessage, Socket, Task> answer, int upTo = int.MaxValue, Task? hold = null)
    {
        using var s = await listener.AcceptAsync().WaitAsync(TimeSpan.FromSeconds(10));
        Assert.Equal(FrameError.None, PeerCodec.Decode((await ReadFrameAsync(s))!, out var opening));
        Assert.Equal(new DataChannelMessage(new GatewayId(1), 101), opening);
        Assert.Equal(FrameError.None, PeerCodec.Decode((await ReadFrameAsync(s))!, out var auth));
        await answer((PeerAuthMessage)auth!, s);
        var frames = new List<byte[]>();
        while (frames.Count < upTo && await ReadFrameAsync(s) is { } f)
        {
            frames.Add(f);
        }

        await (hold ?? Task.CompletedTask).WaitAsync(TimeSpan.FromSeconds(10));

        return ((PeerAuthMessage)auth!, frames);
    }

    /// <summary>The sending side of an authenticated channel (data node 101 of gateway 1, peering secret A) against a
    /// receiver the test plays at "data node 201": a HELLO instead of PEER_AUTH, a PEER_AUTH naming another endpoint, and
    /// a receiver with another secret (its confirmation does not open) each fail the channel, counted; an honest
    /// receiver gets the sealed DATA_CHANNEL and the sealed DATA that waited, and its sealed confirmation hands the
    /// sender the datagram keys.</summary>
    [Fact]
    public async Task AnAuthenticatedChannelsSenderRefusesAReceiverWithoutTheSecretAndSealsForOneWithIt()
    {
        var posted = new BlockingCollection<Action>();
        var now = TimeSpan.Zero;
        var channels = new BulkDataChannels(new GatewayId(1), 101, posted.Add, () => now, PeeringSecrets.A);
        using var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen(4);
        var target = (IPEndPoint)listener.LocalEndPoint!;
        var frame = new byte[30];
        new QuickSilver.Federation.Forwarding.DataHeader(0, 32, new FlowLabel(1), new GatewayId(101), 1).Write(frame);
        var receiverId = new GatewayId(201);

        void Drain()
        {
            while (posted.TryTake(out var action, TimeSpan.FromMilliseconds(200)))
            {
                action();
            }
        }

        await using (channels)
        {
            Func<PeerAuthMessage, Socket, Task>[] hostile =
            [
                (_, s) => (Task)s.SendAsync(Frame(PeerCodec.Hello(new GatewayId(2), new IslandId(2), 0))),
                (_, s) => (Task)s.SendAsync(Frame(new PeeringHandshake(PeeringSecrets.A, new GatewayId(202)).AuthFrame)),
                async (auth, s) =>
                {
                    var other = new PeeringHandshake(PeeringSecrets.B, receiverId);
                    await s.SendAsync(Frame(other.AuthFrame));
                    var keys = other.Complete(auth, PeeringPurpose.BulkChannel)!;
                    var confirmation = PeerCodec.DataChannel(new GatewayId(2), 201);
                    var sealedConfirmation = new byte[confirmation.Length + keys.Frames.Overhead];
                    confirmation.CopyTo(sealedConfirmation, 0);
                    keys.Frames.Seal(sealedConfirmation, confirmation.Length);
                    await s.SendAsync(Frame(sealedConfirmation));
                },
            ];
            for (int i = 0; i < hostile.Length; i++)
            {
                var receiving = ReceiverAsync(listener, hostile[i]);
                Assert.True(channels.Send(target, receiverId, frame));
                await receiving;
                Assert.True(SpinWait.SpinUntil(() => channels.HandshakesFailed == i + 1, TimeSpan.FromSeconds(10)), $"attempt {i}: {channels.HandshakesFailed}");
                Assert.True(SpinWait.SpinUntil(() => { Drain(); return channels.Failed == i + 1; }, TimeSpan.FromSeconds(10)), $"attempt {i}: the channel did not go down");
                Assert.Null(channels.DatagramKeys(target));
                now += BulkDataChannels.RetryAfter;
            }

            PeeringLinkKeys? honestKeys = null;
            var release = new TaskCompletionSource();
            var honest = ReceiverAsync(listener, async (auth, s) =>
            {
                var mine = new PeeringHandshake(PeeringSecrets.A, receiverId);
                await s.SendAsync(Frame(mine.AuthFrame));
                honestKeys = mine.Complete(auth, PeeringPurpose.BulkChannel)!;
                var confirmation = PeerCodec.DataChannel(new GatewayId(2), 201);
                var sealedConfirmation = new byte[confirmation.Length + honestKeys.Frames.Overhead];
                confirmation.CopyTo(sealedConfirmation, 0);
                honestKeys.Frames.Seal(sealedConfirmation, confirmation.Length);
                await s.SendAsync(Frame(sealedConfirmation));
            }, upTo: 2, hold: release.Task);
            Assert.True(channels.Send(target, receiverId, frame)); // dials; waits until the handshake
            Assert.True(SpinWait.SpinUntil(() => { Drain(); return channels.DatagramKeys(target) is not null; }, TimeSpan.FromSeconds(10)), "no datagram keys after the confirmation");
            Assert.Equal(3, channels.HandshakesFailed);
            release.SetResult();
            var (_, frames) = await honest;
            var plain = new byte[128];
            Assert.Equal(2, frames.Count); // the sealed DATA_CHANNEL, then the DATA that waited
            Assert.True(honestKeys!.Frames.Open(frames[0], plain, out int n));
            Assert.Equal(PeerCodec.DataChannel(new GatewayId(1), 101), plain.AsSpan(0, n).ToArray());
            Assert.True(honestKeys.Frames.Open(frames[1], plain, out n));
            Assert.Equal(frame, plain.AsSpan(0, n).ToArray());
        }
    }

    [Fact]
    public void SamePortSocketsBindTcpAndUdpToOnePortAndRefuseAPortInUse()
    {
        var (tcp, udp) = SamePortSockets.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using (tcp)
        using (udp)
        {
            var port = ((IPEndPoint)tcp.LocalEndPoint!).Port;
            Assert.NotEqual(0, port);
            Assert.Equal(port, ((IPEndPoint)udp.LocalEndPoint!).Port);
            var e = Assert.Throws<SocketException>(() => SamePortSockets.Bind(new IPEndPoint(IPAddress.Loopback, port)));
            Assert.Equal(SocketError.AddressAlreadyInUse, e.SocketErrorCode);
        }
    }
}
