using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Federation.Runtime;

/// <summary>A TCP socket and a UDP socket bound to one address and port, as a gateway (peering links and bulk data
/// channels on TCP, real-time DATA and cluster frames on UDP) and a data node need. Port 0 picks a port free for both:
/// the system picks the TCP port, and when that number is already taken for UDP (another process's or test's
/// ephemeral socket) both are closed and another is tried, up to <see cref="Attempts"/> times.</summary>
internal static class SamePortSockets
{
    public const int Attempts = 64;

    /// <summary>The bound (not yet listening) TCP socket and the bound UDP socket; throws the bind's
    /// <see cref="SocketException"/> when <paramref name="listen"/> names a port in use, or after the attempts.</summary>
    public static (Socket Tcp, Socket Udp) Bind(IPEndPoint listen)
    {
        for (int attempt = 1; ; attempt++)
        {
            var tcp = new Socket(listen.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
            var udp = new Socket(listen.AddressFamily, SocketType.Dgram, ProtocolType.Udp);
            try
            {
                tcp.Bind(listen);
                udp.Bind(tcp.LocalEndPoint!);
                return (tcp, udp);
            }
            catch (SocketException e)
            {
                tcp.Dispose();
                udp.Dispose();
                if (listen.Port != 0 || attempt == Attempts || e.SocketErrorCode != SocketError.AddressAlreadyInUse)
                {
                    throw;
                }
            }
        }
    }
}
