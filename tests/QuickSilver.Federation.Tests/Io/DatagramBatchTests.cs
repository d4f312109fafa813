using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Io;

namespace QuickSilver.Federation.Tests.Io;

/// <summary>The batched datagram calls (sendmmsg / recvmmsg on Linux) on loopback: every datagram once, in order, from
/// the right source, in fewer system calls than datagrams.</summary>
public class DatagramBatchTests
{
    [Fact]
    public async Task DatagramsSentInOneBatchArriveInOrderThroughOneDrain()
    {
        using var receiver = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp) { ReceiveBufferSize = 4 << 20 };
        receiver.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var send = new DatagramSendBatch(sender);
        using var receive = new DatagramReceiveBatch();
        var to = DatagramSendBatch.To((IPEndPoint)receiver.LocalEndPoint!);
        const int Count = 200;
        var random = new Random(16);
        var sizes = Enumerable.Range(0, Count).Select(_ => random.Next(4, 1400)).ToArray();
        for (int i = 0; i < Count; i++)
        {
            var datagram = new byte[sizes[i]];
            BinaryPrimitives.WriteInt32LittleEndian(datagram, i);
            Assert.True(send.Add(datagram, to));
        }

        send.Flush();
        Assert.Equal(Count, send.Sent);
        Assert.Equal(0, send.Failed);
        Assert.Equal(0, send.Waiting);

        var got = new List<(int Index, int Length)>();
        bool fromSender = true;
        var senderSource = DatagramReceiveBatch.Source.Of((IPEndPoint)sender.LocalEndPoint!);
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        while (got.Count < Count)
        {
            await receive.DrainAsync(receiver, (from, datagram) =>
            {
                fromSender &= from == senderSource;
                got.Add((BinaryPrimitives.ReadInt32LittleEndian(datagram), datagram.Length));
            }, cts.Token);
        }

        Assert.True(fromSender);
        Assert.Equal(Enumerable.Range(0, Count).Select(i => (i, sizes[i])), got);
        if (OperatingSystem.IsLinux())
        {
            Assert.Equal((Count + DatagramSendBatch.Slots - 1) / DatagramSendBatch.Slots, send.Calls);
            Assert.True(receive.Calls < Count / 4, $"{receive.Calls} receive calls for {Count} datagrams");
        }
    }

    [Fact]
    public void ADatagramThatCannotBeSentIsCountedNotThrown()
    {
        using var sender = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        sender.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var send = new DatagramSendBatch(sender);
        Assert.False(send.Add(new byte[DatagramSendBatch.BufferBytes + 1], DatagramSendBatch.To(new IPEndPoint(IPAddress.Loopback, 9))));
        Assert.Equal(1, send.Failed);
        Assert.Throws<ArgumentException>(() => DatagramSendBatch.To(new IPEndPoint(IPAddress.IPv6Loopback, 9)));
    }
}
