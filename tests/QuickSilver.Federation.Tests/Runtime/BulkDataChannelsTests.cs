using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Runtime;

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
