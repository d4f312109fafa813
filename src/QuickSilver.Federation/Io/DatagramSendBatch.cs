using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using QuickSilver.Core.Io;
using static QuickSilver.Core.Io.Linux.LinuxNative;

namespace QuickSilver.Federation.Io;

/// <summary>
/// Datagrams a loop sends during one batch of work, handed to the kernel together: on Linux <see cref="Add"/> copies
/// each into one preallocated native buffer (no allocation per datagram) and <see cref="Flush"/> sends them all with
/// <c>sendmmsg</c>, up to <see cref="Slots"/> per system call; elsewhere <see cref="Add"/> sends at once. The owner calls
/// <see cref="Flush"/> when its loop has drained its queue, so a datagram waits at most one loop turn. A datagram the
/// kernel refuses (no buffer space, no route) is dropped and counted (<see cref="Failed"/>), as a failed
/// <c>sendto</c> was. One thread only.
/// </summary>
internal sealed unsafe class DatagramSendBatch : IDisposable
{
    /// <summary>Datagrams one system call can take.</summary>
    public const int Slots = 64;

    /// <summary>Bytes that can wait for a flush: a datagram that does not fit flushes what waits first.</summary>
    public const int BufferBytes = 1 << 20;

    private readonly Socket _socket;
    private readonly byte* _buffer;
    private readonly MMsgHdr* _headers;
    private readonly IoVec* _iov;
    private readonly SockAddrIn* _destinations;
    private int _count;
    private int _used;
    private bool _disposed;

    public DatagramSendBatch(Socket socket)
    {
        _socket = socket ?? throw new ArgumentNullException(nameof(socket));
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        _buffer = (byte*)NativeMemory.AlignedAlloc(BufferBytes, 64);
        _headers = (MMsgHdr*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(MMsgHdr)));
        _iov = (IoVec*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(IoVec)));
        _destinations = (SockAddrIn*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(SockAddrIn)));
        for (int i = 0; i < Slots; i++)
        {
            _headers[i].Header.Name = &_destinations[i];
            _headers[i].Header.NameLength = (uint)sizeof(SockAddrIn);
            _headers[i].Header.Iov = &_iov[i];
            _headers[i].Header.IovLength = 1;
        }
    }

    /// <summary>Datagrams handed to the kernel.</summary>
    public long Sent { get; private set; }

    /// <summary>Datagrams the kernel refused (dropped).</summary>
    public long Failed { get; private set; }

    /// <summary>Send system calls made: <see cref="Sent"/> / calls is the batching.</summary>
    public long Calls { get; private set; }

    /// <summary>Datagrams waiting for <see cref="Flush"/>.</summary>
    public int Waiting => _count;

    /// <summary>An IPv4 endpoint as <see cref="Add"/> takes it (convert once per destination, not per datagram).</summary>
    public static Destination To(IPEndPoint endpoint)
    {
        ArgumentNullException.ThrowIfNull(endpoint);
        if (endpoint.AddressFamily != AddressFamily.InterNetwork)
        {
            throw new ArgumentException($"{endpoint} is not an IPv4 endpoint", nameof(endpoint));
        }

        var bytes = endpoint.Address.GetAddressBytes();
        return new Destination(endpoint, new NetAddress((uint)(bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]), (ushort)endpoint.Port));
    }

    /// <summary>Queues <paramref name="data"/> to <paramref name="destination"/>; false when it cannot be sent (too
    /// large, the batch disposed, or, off Linux, the send failed).</summary>
    public bool Add(ReadOnlySpan<byte> data, Destination destination)
    {
        if (_disposed || data.Length > BufferBytes)
        {
            Failed++;
            return false;
        }

        if (_buffer is null)
        {
            return SendNow(data, destination.EndPoint);
        }

        if (_count == Slots || _used + data.Length > BufferBytes)
        {
            Flush();
        }

        var target = _buffer + _used;
        data.CopyTo(new Span<byte>(target, data.Length));
        _iov[_count].Base = target;
        _iov[_count].Length = (nuint)data.Length;
        _destinations[_count] = SockAddrIn.From(destination.Address);
        _count++;
        _used += data.Length;
        return true;
    }

    /// <summary>Sends everything waiting.</summary>
    public void Flush()
    {
        if (_count == 0 || _disposed)
        {
            return;
        }

        var handle = _socket.SafeHandle;
        bool added = false;
        try
        {
            handle.DangerousAddRef(ref added);
            int fd = (int)handle.DangerousGetHandle();
            int done = 0;
            while (done < _count)
            {
                int n = sendmmsg(fd, _headers + done, (uint)(_count - done), 0);
                Calls++;
                if (n < 0)
                {
                    if (Marshal.GetLastPInvokeError() == EINTR)
                    {
                        continue;
                    }

                    Failed++; // this datagram cannot be sent: drop it, carry on with the rest
                    done++;
                    continue;
                }

                Sent += n;
                done += n;
            }
        }
        catch (ObjectDisposedException)
        {
            Failed += _count;
        }
        finally
        {
            if (added)
            {
                handle.DangerousRelease();
            }

            _count = 0;
            _used = 0;
        }
    }

    private bool SendNow(ReadOnlySpan<byte> data, IPEndPoint destination)
    {
        Calls++;
        try
        {
            if (_socket.SendTo(data, SocketFlags.None, destination) == data.Length)
            {
                Sent++;
                return true;
            }
        }
        catch (SocketException)
        {
        }

        Failed++;
        return false;
    }

    public void Dispose()
    {
        if (_disposed)
        {
            return;
        }

        _disposed = true;
        if (_buffer is not null)
        {
            NativeMemory.AlignedFree(_buffer);
            NativeMemory.Free(_headers);
            NativeMemory.Free(_iov);
            NativeMemory.Free(_destinations);
        }
    }
}

/// <summary>An IPv4 destination of <see cref="DatagramSendBatch"/>: the endpoint and its address as the kernel wants it.</summary>
internal readonly record struct Destination(IPEndPoint EndPoint, NetAddress Address);
