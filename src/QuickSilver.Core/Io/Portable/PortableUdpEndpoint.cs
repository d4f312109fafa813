using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Core.Io.Portable;

/// <summary>A UDP endpoint on the portable backend: .NET sockets, synchronous sends from the ring, receives via <see cref="PortableReceiver"/>.</summary>
internal sealed class PortableUdpEndpoint : UdpEndpoint
{
    private readonly PortableBackend _backend;
    private readonly Dictionary<Socket, PortableReceiver> _receivers = new();
    private readonly SocketAddress _to = new(AddressFamily.InterNetwork);

    public PortableUdpEndpoint(QuickSilverCore core, PortableBackend backend, UdpEndpointOptions options)
        : base(core, options)
    {
        _backend = backend;
    }

    private protected override void OnSocketOpened(Socket socket, NetAddress? filterGroup)
    {
        var receiver = new PortableReceiver(_backend, this, socket, MaxDatagramSize);
        _receivers[socket] = receiver;
        receiver.Arm();
    }

    private protected override void OnSocketClosing(Socket socket)
    {
        if (_receivers.Remove(socket, out var receiver))
        {
            receiver.Close();
        }
    }

    internal void OnReceived(SocketAddress from, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > MaxDatagramSize)
        {
            DropOversized();
            return;
        }

        Deliver(FromSocketAddress(from), datagram);
    }

    internal void CountBatch(int handled)
    {
        Counters.IoBatches++;
        Counters.IoEvents += handled;
    }

    private protected override bool FlushRing()
    {
        while (Count > 0)
        {
            int slot = Head;
            WriteSocketAddress(_to, SlotDestination(slot));
            try
            {
                int length = SlotLength(slot);
                MainSocket.SendTo(Slot(slot)[..length], SocketFlags.None, _to);
                Consume(1, length);
            }
            catch (SocketException e) when (e.SocketErrorCode == SocketError.WouldBlock)
            {
                return false;
            }
            catch (SocketException)
            {
                DropHead();
            }
        }

        return true;
    }

    // SocketAddress for AF_INET holds sockaddr_in: family (2 bytes), port (big-endian), address (big-endian).
    private static void WriteSocketAddress(SocketAddress target, NetAddress address)
    {
        var span = target.Buffer.Span;
        BinaryPrimitives.WriteUInt16BigEndian(span[2..], address.Port);
        BinaryPrimitives.WriteUInt32BigEndian(span[4..], address.Ip);
    }

    private static NetAddress FromSocketAddress(SocketAddress address)
    {
        var span = address.Buffer.Span;
        return new NetAddress(BinaryPrimitives.ReadUInt32BigEndian(span[4..]), BinaryPrimitives.ReadUInt16BigEndian(span[2..]));
    }
}
