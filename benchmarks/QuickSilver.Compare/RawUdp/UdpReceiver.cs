using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Compare.RawUdp;

/// <summary>The raw UDP receiver: one socket per group bound to the group's address and joined on loopback; counts
/// datagrams (sequence numbers below <see cref="UdpPassOptions.Warmup"/> are warm-up, the rest measured) and acks the
/// highest sequence seen (and says hello until data arrives) to the blaster.</summary>
internal sealed class UdpReceiver
{
    private readonly ArrivalCounter _count = new();
    private long _highest;

    public sealed record Summary(ArrivalCounter Count, int ReceiveBuffer)
    {
        public long Received => Count.Received;
    }

    public static async Task<Summary> RunAsync(UdpPassOptions options, int id, IPEndPoint blaster, CancellationToken cancellationToken)
    {
        options.Validate();
        var receiver = new UdpReceiver();
        using var deadline = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        deadline.CancelAfter(options.Timeout);
        using var ack = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        ack.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var sockets = Enumerable.Range(0, options.Groups).Select(g => Open(options.Group(g))).ToList();
        try
        {
            var loops = sockets.Select(s => receiver.ReceiveLoopAsync(s, options, id, ack, blaster, deadline.Token)).ToList();
            await receiver.WaitAsync(options, id, ack, blaster, deadline.Token);
            await deadline.CancelAsync();
            await Task.WhenAll(loops);
            receiver.Ack(ack, blaster, id);
            return new Summary(receiver._count, sockets[0].ReceiveBufferSize);
        }
        finally
        {
            sockets.ForEach(s => s.Dispose());
        }
    }

    private static Socket Open(IPEndPoint group)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        socket.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
        socket.ReceiveBufferSize = 4 << 20;
        socket.Bind(group);
        socket.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group.Address, IPAddress.Loopback));
        return socket;
    }

    /// <summary>Says hello until data arrives, then waits until everything arrived, the stream went idle, or time ran out.</summary>
    private async Task WaitAsync(UdpPassOptions options, int id, Socket ack, IPEndPoint blaster, CancellationToken cancellationToken)
    {
        try
        {
            while (_count.Received < options.Total)
            {
                long last = _count.LastMicros;
                if (last == 0)
                {
                    Ack(ack, blaster, id);
                }
                else if (ResultLine.NowMicros() - last > options.Idle.Ticks / 10)
                {
                    return;
                }

                await Task.Delay(20, cancellationToken);
            }
        }
        catch (OperationCanceledException)
        {
        }
    }

    private async Task ReceiveLoopAsync(Socket socket, UdpPassOptions options, int id, Socket ack, IPEndPoint blaster, CancellationToken cancellationToken)
    {
        var buffer = new byte[Math.Max(options.Size, 64)];
        try
        {
            while (true)
            {
                int n = await socket.ReceiveAsync(buffer, SocketFlags.None, cancellationToken);
                if (n < 8)
                {
                    continue;
                }

                long seq = BinaryPrimitives.ReadInt64LittleEndian(buffer);
                long next = seq + 1;
                long seen = Interlocked.Read(ref _highest);
                while (next > seen && Interlocked.CompareExchange(ref _highest, next, seen) != seen)
                {
                    seen = Interlocked.Read(ref _highest);
                }

                if (_count.Arrived(seq >= options.Warmup) % options.AckEvery == 0)
                {
                    Ack(ack, blaster, id);
                }
            }
        }
        catch (OperationCanceledException)
        {
        }
    }

    private void Ack(Socket ack, IPEndPoint blaster, int id)
    {
        Span<byte> bytes = stackalloc byte[12];
        BinaryPrimitives.WriteInt32LittleEndian(bytes, id);
        BinaryPrimitives.WriteInt64LittleEndian(bytes[4..], Interlocked.Read(ref _highest));
        ack.SendTo(bytes, SocketFlags.None, blaster);
    }
}
