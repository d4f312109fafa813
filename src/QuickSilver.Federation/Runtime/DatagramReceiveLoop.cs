using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Io;

namespace QuickSilver.Federation.Runtime;

/// <summary>A datagram and its source, as a span over the receive buffer: valid only during the call.</summary>
internal delegate void DatagramHandler(IPEndPoint from, ReadOnlySpan<byte> datagram);

/// <summary>The receive loop of a gateway's or a data node's UDP socket: every datagram ready per wake-up
/// (<see cref="DatagramReceiveBatch"/>: recvmmsg on Linux) goes to <c>onDatagram</c> with its source, as a span over the
/// batch's slot (the handler copies what it keeps); a socket error skips a batch; cancellation or disposal ends the
/// loop.</summary>
internal static class DatagramReceiveLoop
{
    public static async Task RunAsync(Socket udp, DatagramHandler onDatagram, CancellationToken stop)
    {
        using var batch = new DatagramReceiveBatch();
        DatagramReceiveBatch.Handler handler = (from, datagram) => onDatagram(from.ToEndPoint(), datagram);
        while (!stop.IsCancellationRequested)
        {
            try
            {
                await batch.DrainAsync(udp, handler, stop).ConfigureAwait(false);
            }
            catch (Exception e) when (e is OperationCanceledException or ObjectDisposedException)
            {
                return;
            }
            catch (SocketException)
            {
            }
        }
    }
}
