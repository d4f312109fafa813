using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Io;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Runtime;
using Xunit.Abstractions;

namespace QuickSilver.Federation.Tests.Io;

/// <summary>Real-time datagrams between gateways cost no allocation for their addresses (principle 5), measured with
/// <see cref="GC.GetAllocatedBytesForCurrentThread"/> around the receive path (recvmmsg, the source resolved, the
/// datagram copied into a loop inbox and its peer looked up, as <c>GatewayRuntime</c> does) and the send path.</summary>
public class DatagramAddressBookTests(ITestOutputHelper output)
{
    private const int Rounds = 20;
    private const int PerRound = 100;

    private static (Socket Receiver, Socket Sender) Pair()
    {
        var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp) { ReceiveBufferSize = 4 << 20 };
        receiver.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return (receiver, sender);
    }

    /// <summary>Bytes allocated on this thread by the receive path for <see cref="Rounds"/> × <see cref="PerRound"/>
    /// datagrams of 1,000 B (after a warm-up round), and how many arrived from the expected peer.</summary>
    private static (long Allocated, int FromPeer) MeasureReceive(bool senderInBook)
    {
        var (receiver, sender) = Pair();
        using (receiver)
        using (sender)
        using (var batch = new DatagramReceiveBatch())
        {
            var peerEndpoint = new IPEndPoint(IPAddress.Loopback, ((IPEndPoint)sender.LocalEndPoint!).Port);
            var book = new DatagramAddressBook(AddressFamily.InterNetwork);
            book.Replace(senderInBook ? [peerEndpoint] : []);
            var sources = new Dictionary<IPEndPoint, GatewayId> { [peerEndpoint] = new GatewayId(1) }; // as _datagramSources
            var inbox = new LoopInbox();
            int fromPeer = 0;
            var handler = DatagramReceiveLoop.Handler(book, (from, datagram) =>
            {
                inbox.TryWrite(1, 0, from, datagram);
                fromPeer += sources.TryGetValue(from, out _) ? 1 : 0;
            });
            var to = ((IPEndPoint)receiver.LocalEndPoint!).Serialize();
            var datagram = new byte[1_000];
            var drainer = new Drainer();
            long allocated = 0;
            for (int round = 0; round <= Rounds; round++)
            {
                for (int i = 0; i < PerRound; i++)
                {
                    sender.SendTo(datagram, SocketFlags.None, to);
                }

                long before = GC.GetAllocatedBytesForCurrentThread();
                int got = 0;
                for (int tries = 0; got < PerRound && tries < 1_000; tries++)
                {
                    got += batch.Drain(receiver, handler);
                }

                long after = GC.GetAllocatedBytesForCurrentThread();
                Assert.Equal(PerRound, got);
                allocated += round == 0 ? 0 : after - before; // round 0 warms up
                inbox.Drain(ref drainer);
            }

            Assert.Equal(senderInBook ? 0 : (Rounds + 1) * PerRound, book.Misses);
            return (allocated, fromPeer);
        }
    }

    [Fact]
    public void ReceivingADatagramFromAKnownPeerAllocatesNothing()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // recvmmsg; elsewhere each receive allocates its source
        }

        var (allocated, fromPeer) = MeasureReceive(senderInBook: true);
        Assert.Equal((Rounds + 1) * PerRound, fromPeer);
        Assert.Equal(0, allocated); // 0 bytes a datagram over 2,000 datagrams

        // The measurement does see an endpoint made per datagram: a source not in the book (what every source cost before).
        var (strangerBytes, strangerFromPeer) = MeasureReceive(senderInBook: false);
        Assert.Equal((Rounds + 1) * PerRound, strangerFromPeer); // equal endpoints still match the tables
        Assert.True(strangerBytes >= Rounds * PerRound * 24, $"{strangerBytes} bytes for {Rounds * PerRound} datagrams from a stranger");
        output.WriteLine($"receive: 0 B a datagram from a booked source, {strangerBytes / (double)(Rounds * PerRound):F0} B from one not in the book");
    }

    [Fact]
    public void SendingADatagramToAnAddressInTheBookAllocatesNothing()
    {
        var (receiver, sender) = Pair();
        using (receiver)
        using (sender)
        {
            var target = (IPEndPoint)receiver.LocalEndPoint!;
            var book = new DatagramAddressBook(AddressFamily.InterNetwork);
            book.Replace([target]);
            var datagram = new byte[1_000];
            var buffer = new byte[2_000];
            long Measure(IPEndPoint to)
            {
                long total = 0;
                int sent = 0;
                for (int round = 0; round <= Rounds; round++)
                {
                    long before = GC.GetAllocatedBytesForCurrentThread();
                    for (int i = 0; i < PerRound; i++)
                    {
                        sent += book.SendTo(sender, datagram, to) == datagram.Length ? 1 : 0; // no Assert here: it allocates
                    }

                    long after = GC.GetAllocatedBytesForCurrentThread();
                    total += round == 0 ? 0 : after - before;
                    for (int i = 0; i < PerRound; i++)
                    {
                        receiver.Receive(buffer);
                    }
                }

                Assert.Equal((Rounds + 1) * PerRound, sent);
                return total;
            }

            Assert.Equal(0, Measure(target)); // 0 bytes a datagram over 2,000 datagrams
            // Not in the book: Socket.SendTo(…, EndPoint) serialises the endpoint on every call (what every send cost before).
            book.Replace([]);
            long unbooked = Measure(target);
            output.WriteLine($"send: 0 B a datagram to a booked address, {unbooked / (double)(Rounds * PerRound):F0} B to one not in the book");
            Assert.True(unbooked >= Rounds * PerRound * 24);
        }
    }

    [Fact]
    public void TheBookHoldsEachAddressOnceAndForgetsWhatIsReplaced()
    {
        var a = IPEndPoint.Parse("127.0.0.1:5000");
        var b = IPEndPoint.Parse("127.0.0.2:5001");
        var book = new DatagramAddressBook(AddressFamily.InterNetwork);
        book.Replace([a, b, IPEndPoint.Parse("127.0.0.1:5000")]);
        Assert.Equal(2, book.Count);
        Assert.Same(a, book.Resolve(DatagramReceiveBatch.Source.Of(a)));
        Assert.Same(b, book.Resolve(DatagramReceiveBatch.Source.Of(b)));
        book.Replace([b]);
        var made = book.Resolve(DatagramReceiveBatch.Source.Of(a));
        Assert.NotSame(a, made);
        Assert.Equal(a, made);
        Assert.Equal(1, book.Misses);
    }

    private struct Drainer : IInboxHandler
    {
        public readonly void Handle(in InboxRecord record, ReadOnlySpan<byte> payload)
        {
        }
    }
}
