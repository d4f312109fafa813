using System.Runtime.InteropServices;

namespace QuickSilver.Core.Io.Linux;

/// <summary>
/// The few libc calls the epoll backend needs. Socket set-up (bind, options, multicast membership) goes through
/// <see cref="System.Net.Sockets.Socket"/>; only the hot path (epoll, eventfd, recvmmsg, sendmmsg) is called directly.
/// Struct layouts are those of glibc on 64-bit Linux.
/// </summary>
internal static unsafe partial class LinuxNative
{
    private const string Libc = "libc";

    public const int EAGAIN = 11;
    public const int EINTR = 4;

    public const int EPOLL_CTL_ADD = 1;
    public const int EPOLL_CTL_DEL = 2;
    public const int EPOLL_CTL_MOD = 3;
    public const uint EPOLLIN = 0x001;
    public const uint EPOLLOUT = 0x004;
    public const uint EPOLLERR = 0x008;
    public const int EPOLL_CLOEXEC = 0x80000;

    public const int EFD_NONBLOCK = 0x800;
    public const int EFD_CLOEXEC = 0x80000;

    public const int MSG_DONTWAIT = 0x40;
    public const int MSG_TRUNC = 0x20;

    public const ushort AF_INET = 2;

    /// <summary>x86-64 packs epoll_event to 12 bytes; other 64-bit ABIs pad it to 16.</summary>
    public static readonly int EpollEventSize = RuntimeInformation.ProcessArchitecture == Architecture.X64 ? 12 : 16;

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int epoll_create1(int flags);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int epoll_ctl(int epfd, int op, int fd, byte* ev);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int epoll_wait(int epfd, byte* events, int maxevents, int timeout);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int eventfd(uint initval, int flags);

    public const int CLOCK_MONOTONIC = 1;

    /// <summary>clock_nanosleep(2) on a relative interval; req is a struct timespec (two 64-bit fields on 64-bit Linux).</summary>
    [LibraryImport(Libc)]
    public static partial int clock_nanosleep(int clockId, int flags, long* req, long* rem);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial nint read(int fd, void* buf, nint count);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial nint write(int fd, void* buf, nint count);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int close(int fd);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int recvmmsg(int sockfd, MMsgHdr* msgvec, uint vlen, int flags, void* timeout);

    [LibraryImport(Libc, SetLastError = true)]
    public static partial int sendmmsg(int sockfd, MMsgHdr* msgvec, uint vlen, int flags);

    /// <summary>Fills a 12- or 16-byte epoll_event: events, then the 64-bit user data.</summary>
    public static void WriteEpollEvent(byte* ev, uint events, ulong data)
    {
        *(uint*)ev = events;
        if (EpollEventSize == 12)
        {
            *(ulong*)(ev + 4) = data; // packed, unaligned is fine on x86-64
        }
        else
        {
            *(ulong*)(ev + 8) = data;
        }
    }

    public static void ReadEpollEvent(byte* ev, out uint events, out ulong data)
    {
        events = *(uint*)ev;
        data = EpollEventSize == 12 ? *(ulong*)(ev + 4) : *(ulong*)(ev + 8);
    }

    /// <summary>Makes <paramref name="count"/> recvmmsg headers ready for a call: header i receives into
    /// <paramref name="iov"/>[i] and its source address into <paramref name="sources"/>[i] (the kernel overwrites the
    /// lengths and flags, so this runs before every call).</summary>
    public static void ResetReceiveHeaders(MMsgHdr* headers, IoVec* iov, SockAddrIn* sources, int count)
    {
        for (int i = 0; i < count; i++)
        {
            ref var h = ref headers[i].Header;
            h.Name = &sources[i];
            h.NameLength = (uint)sizeof(SockAddrIn);
            h.Iov = &iov[i];
            h.IovLength = 1;
            h.Control = null;
            h.ControlLength = 0;
            h.Flags = 0;
        }
    }

    [StructLayout(LayoutKind.Sequential)]
    public struct IoVec
    {
        public void* Base;
        public nuint Length;
    }

    [StructLayout(LayoutKind.Sequential)]
    public struct MsgHdr
    {
        public void* Name;
        public uint NameLength;
        public IoVec* Iov;
        public nuint IovLength;
        public void* Control;
        public nuint ControlLength;
        public int Flags;
    }

    [StructLayout(LayoutKind.Sequential)]
    public struct MMsgHdr
    {
        public MsgHdr Header;
        public uint Length;
    }

    /// <summary>struct sockaddr_in: family, port (network order), address (network order), 8 bytes of zero.</summary>
    [StructLayout(LayoutKind.Sequential, Size = 16)]
    public struct SockAddrIn
    {
        public ushort Family;
        public ushort PortBigEndian;
        public uint AddrBigEndian;
        public ulong Zero;

        public static SockAddrIn From(NetAddress address) => new()
        {
            Family = AF_INET,
            PortBigEndian = System.Buffers.Binary.BinaryPrimitives.ReverseEndianness(address.Port),
            AddrBigEndian = System.Buffers.Binary.BinaryPrimitives.ReverseEndianness(address.Ip),
        };

        public readonly NetAddress ToNetAddress() => new(
            System.Buffers.Binary.BinaryPrimitives.ReverseEndianness(AddrBigEndian),
            System.Buffers.Binary.BinaryPrimitives.ReverseEndianness(PortBigEndian));
    }
}
