using System.Net;
using System.Net.Sockets;
using QuickSilver.Federation.Io;

namespace QuickSilver.Federation.Runtime;

/// <summary>A datagram and its source, as a span over the receive buffer: valid only during the call.</summary>
internal delegate void DatagramHandler(IPEndPoint from, ReadOnlySpan<byte> datagram);

/// <summary>The receive loop of a gateway's or a data node's UDP socket: every datagram ready per wake-up
/// (<see cref="DatagramReceiveBatch"/>: recvmmsg on Linux) goes to <c>onDatagram</c> with its source, as a span over the
/// batch's slot (the handler copies what it keeps), and its source as the runtime's own endpoint object for that address
/// (<see cref="DatagramAddressBook"/>: nothing allocated for a known source); a socket error skips a batch; cancellation
/// or disposal ends the loop.</summary>
internal static class DatagramReceiveLoop
{
    public static async Task RunAsync(Socket udp, DatagramAddressBook addresses, DatagramHandler onDatagram, CancellationToken stop)
    {
        using var batch = new DatagramReceiveBatch();
        var handler = Handler(addresses, onDatagram);
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

    /// <summary>What the batch hands each datagram to: its source resolved in <paramref name="addresses"/>.</summary>
    internal static DatagramReceiveBatch.Handler Handler(DatagramAddressBook addresses, DatagramHandler onDatagram)
    {
        ArgumentNullException.ThrowIfNull(addresses);
        return (from, datagram) => onDatagram(addresses.Resolve(from), datagram);
    }
}
