using System.Net.Sockets;

namespace QuickSilver.Transport.Framing;

/// <summary>The accept loop the project's TCP listeners share (gateway peering, the fan-out island, the admin
/// endpoint).</summary>
public static class TcpAcceptor
{
    /// <summary>Takes connections until <paramref name="stop"/> or the listener closes, skips a failed accept (a peer
    /// that reset before it was taken), and hands each socket to <paramref name="accepted"/>, which owns it from then on
    /// (and disposes it to refuse it).</summary>
    public static async Task RunAsync(Socket listener, Action<Socket> accepted, CancellationToken stop)
    {
        ArgumentNullException.ThrowIfNull(listener);
        ArgumentNullException.ThrowIfNull(accepted);
        while (!stop.IsCancellationRequested)
        {
            Socket socket;
            try
            {
                socket = await listener.AcceptAsync(stop).ConfigureAwait(false);
            }
            catch (Exception e) when (e is OperationCanceledException or ObjectDisposedException)
            {
                return;
            }
            catch (SocketException)
            {
                continue;
            }

            accepted(socket);
        }
    }
}
