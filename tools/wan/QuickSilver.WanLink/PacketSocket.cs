using System.ComponentModel;
using System.Runtime.InteropServices;

namespace QuickSilver.WanLink;

/// <summary>A Linux AF_PACKET socket bound to one interface: every frame that arrives on it (not the ones this host
/// sends, PACKET_IGNORE_OUTGOING), and raw frames sent out of it.</summary>
internal sealed partial class PacketSocket : IDisposable
{
    private const int AfPacket = 17;
    private const int SockRaw = 3;
    private const ushort EthPAllNetworkOrder = 0x0300; // htons(ETH_P_ALL = 3)
    private const int SolPacket = 263;
    private const int PacketIgnoreOutgoing = 23;
    private const int SolSocket = 1;
    private const int SoRcvbuf = 8;
    private const int SoRcvtimeo = 20;

    private readonly int _fd;

    public PacketSocket(string interfaceName)
    {
        Name = interfaceName;
        uint index = IfNameToIndex(interfaceName);
        if (index == 0)
        {
            throw new ArgumentException($"--link: no interface '{interfaceName}' in this network namespace", nameof(interfaceName));
        }

        _fd = Socket(AfPacket, SockRaw, EthPAllNetworkOrder);
        if (_fd < 0)
        {
            throw new Win32Exception(Marshal.GetLastPInvokeError(), $"socket(AF_PACKET) failed (needs CAP_NET_RAW)");
        }

        int one = 1;
        Check(SetSockOpt(_fd, SolPacket, PacketIgnoreOutgoing, ref one, sizeof(int)), "PACKET_IGNORE_OUTGOING");
        int buffer = 4 << 20;
        Check(SetSockOpt(_fd, SolSocket, SoRcvbuf, ref buffer, sizeof(int)), "SO_RCVBUF");
        var timeout = new TimeVal { Seconds = 0, Microseconds = 200_000 };
        Check(SetSockOptTime(_fd, SolSocket, SoRcvtimeo, ref timeout, Marshal.SizeOf<TimeVal>()), "SO_RCVTIMEO");
        var address = new SockaddrLl { Family = AfPacket, Protocol = EthPAllNetworkOrder, IfIndex = (int)index };
        Check(Bind(_fd, ref address, Marshal.SizeOf<SockaddrLl>()), $"bind to {interfaceName}");
    }

    public string Name { get; }

    /// <summary>The next frame's length, or 0 when the receive timeout (200 ms) passed with none.</summary>
    public unsafe int Receive(Span<byte> buffer)
    {
        fixed (byte* p = buffer)
        {
            nint n = Recv(_fd, p, buffer.Length, 0);
            if (n >= 0)
            {
                return (int)n;
            }

            int errno = Marshal.GetLastPInvokeError();
            return errno is 11 or 4 ? 0 : throw new Win32Exception(errno, $"recv on {Name}"); // EAGAIN, EINTR
        }
    }

    /// <summary>Sends one frame; false when the interface's queue refused it (a full qdisc, ENOBUFS).</summary>
    public unsafe bool Send(ReadOnlySpan<byte> frame)
    {
        fixed (byte* p = frame)
        {
            return Send(_fd, p, frame.Length, 0) == frame.Length;
        }
    }

    public void Dispose() => _ = Close(_fd);

    private static void Check(int result, string what)
    {
        if (result != 0)
        {
            throw new Win32Exception(Marshal.GetLastPInvokeError(), $"{what} failed");
        }
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct SockaddrLl
    {
        public ushort Family;
        public ushort Protocol;
        public int IfIndex;
        public ushort HaType;
        public byte PktType;
        public byte HaLen;
        public ulong Address;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct TimeVal
    {
        public long Seconds;
        public long Microseconds;
    }

    [LibraryImport("libc", EntryPoint = "socket", SetLastError = true)]
    private static partial int Socket(int domain, int type, int protocol);

    [LibraryImport("libc", EntryPoint = "bind", SetLastError = true)]
    private static partial int Bind(int fd, ref SockaddrLl address, int length);

    [LibraryImport("libc", EntryPoint = "setsockopt", SetLastError = true)]
    private static partial int SetSockOpt(int fd, int level, int name, ref int value, int length);

    [LibraryImport("libc", EntryPoint = "setsockopt", SetLastError = true)]
    private static partial int SetSockOptTime(int fd, int level, int name, ref TimeVal value, int length);

    [LibraryImport("libc", EntryPoint = "recv", SetLastError = true)]
    private static unsafe partial nint Recv(int fd, byte* buffer, nint length, int flags);

    [LibraryImport("libc", EntryPoint = "send", SetLastError = true)]
    private static unsafe partial nint Send(int fd, byte* buffer, nint length, int flags);

    [LibraryImport("libc", EntryPoint = "close", SetLastError = true)]
    private static partial int Close(int fd);

    [LibraryImport("libc", EntryPoint = "if_nametoindex", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial uint IfNameToIndex(string name);
}
