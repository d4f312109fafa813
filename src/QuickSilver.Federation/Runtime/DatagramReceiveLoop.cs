using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Federation.Runtime;

/// <summary>A datagram and its source, as a span over the receive buffer: valid only during the call.</summary>
internal delegate void DatagramHandler(IPEndPoint from, ReadOnlySpan<byte> datagram);

/// <summary>The receive loop of a gateway's or a data node's UDP socket: each datagram goes to <c>onDatagram</c> with its
/// source, as a span over the one receive buffer (the handler copies what it keeps); a socket error skips one datagram;
/// cancellation or disposal ends the loop.</summary>
internal static class DatagramReceiveLoop
{
    public static async Task RunAsync(Socket udp, DatagramHandler onDatagram, CancellationToken stop)
    {
        var buffer = new byte[65_536];
        EndPoint any = new IPEndPoint(IPAddress.Any, 0);
        while (!stop.IsCancellationRequested)
        {
            SocketReceiveFromResult result;
            try
            {
                result = await udp.ReceiveFromAsync(buffer, SocketFlags.None, any, stop).ConfigureAwait(false);
            }
            catch (Exception e) when (e is OperationCanceledException or ObjectDisposedException)
            {
                return;
            }
            catch (SocketException)
            {
                continue;
            }

            onDatagram((IPEndPoint)result.RemoteEndPoint, buffer.AsSpan(0, result.ReceivedBytes));
        }
    }
}
