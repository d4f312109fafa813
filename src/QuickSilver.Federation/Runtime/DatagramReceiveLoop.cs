using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Federation.Runtime;

/// <summary>The receive loop of a gateway's or a data node's UDP socket: each datagram, copied out of the one receive
/// buffer, goes to <c>onDatagram</c> with its source; a socket error skips one datagram; cancellation or disposal ends
/// the loop.</summary>
internal static class DatagramReceiveLoop
{
    public static async Task RunAsync(Socket udp, Action<IPEndPoint, byte[]> onDatagram, CancellationToken stop)
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

            onDatagram((IPEndPoint)result.RemoteEndPoint, buffer.AsSpan(0, result.ReceivedBytes).ToArray());
        }
    }
}
