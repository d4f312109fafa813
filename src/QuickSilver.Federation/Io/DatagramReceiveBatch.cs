using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using static QuickSilver.Core.Io.Linux.LinuxNative;

namespace QuickSilver.Federation.Io;

/// <summary>
/// Takes every datagram ready on a UDP socket in as few system calls as it can: on Linux one <c>recvmmsg</c> fills up to
/// <see cref="Slots"/> preallocated native slots (the core's <c>EpollUdpEndpoint</c> does the same with the core's
/// declarations), elsewhere one <c>ReceiveFrom</c> at a time. <see cref="DrainAsync"/> waits for readiness with a zero-byte
/// peek (nothing is consumed), then drains the socket until it is empty, handing each datagram to the caller as a span
/// over its slot: no allocation per datagram. A datagram larger than a slot (<see cref="SlotBytes"/>) is cut off by the
/// kernel; it is dropped and counted (<see cref="Truncated"/>).
/// </summary>
internal sealed class DatagramReceiveBatch : IDisposable
{
    /// <summary>Datagrams one system call can take.</summary>
    public const int Slots = 16;

    /// <summary>The largest datagram kept (IPv4 UDP's maximum payload).</summary>
    public const int SlotBytes = 65_536;

    private readonly unsafe byte* _buffers;
    private readonly unsafe MMsgHdr* _headers;
    private readonly unsafe IoVec* _iov;
    private readonly unsafe SockAddrIn* _sources;
    private readonly byte[]? _portable;
    private bool _disposed;

    public unsafe DatagramReceiveBatch()
    {
        if (!OperatingSystem.IsLinux())
        {
            _portable = new byte[SlotBytes];
            return;
        }

        _buffers = (byte*)NativeMemory.AlignedAlloc((nuint)(Slots * SlotBytes), 64);
        _headers = (MMsgHdr*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(MMsgHdr)));
        _iov = (IoVec*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(IoVec)));
        _sources = (SockAddrIn*)NativeMemory.AllocZeroed((nuint)(Slots * sizeof(SockAddrIn)));
        for (int i = 0; i < Slots; i++)
        {
            _iov[i].Base = _buffers + (i * SlotBytes);
            _iov[i].Length = SlotBytes;
        }
    }

    /// <summary>Datagrams dropped because they did not fit a slot.</summary>
    public long Truncated { get; private set; }

    /// <summary>Receive system calls made (recvmmsg, or ReceiveFrom off Linux): datagrams / calls is the batching.</summary>
    public long Calls { get; private set; }

    /// <summary>A datagram's IPv4 source, host byte order, as the handler sees it.</summary>
    public readonly record struct Source(uint Ip, ushort Port)
    {
        /// <summary>An IPv4 endpoint as a source, to compare datagrams' sources with (convert once, compare per
        /// datagram without allocating).</summary>
        public static Source Of(IPEndPoint endpoint)
        {
            ArgumentNullException.ThrowIfNull(endpoint);
            var b = endpoint.Address.MapToIPv4().GetAddressBytes();
            return new Source((uint)(b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]), (ushort)endpoint.Port);
        }

        public IPEndPoint ToEndPoint() => new(new IPAddress(System.Buffers.Binary.BinaryPrimitives.ReverseEndianness(Ip)), Port);
    }

    /// <summary>What the caller does with one datagram (the span is valid only during the call).</summary>
    public delegate void Handler(Source from, ReadOnlySpan<byte> datagram);

    /// <summary>Waits until <paramref name="socket"/> has a datagram, then hands every ready datagram to
    /// <paramref name="onDatagram"/>, in arrival order; returns how many. Throws what the socket throws
    /// (<see cref="ObjectDisposedException"/>, <see cref="OperationCanceledException"/>, <see cref="SocketException"/>).</summary>
    public async ValueTask<int> DrainAsync(Socket socket, Handler onDatagram, CancellationToken cancellationToken)
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (_portable is { } buffer)
        {
            EndPoint any = new IPEndPoint(IPAddress.Any, 0);
            var result = await socket.ReceiveFromAsync(buffer, SocketFlags.None, any, cancellationToken).ConfigureAwait(false);
            Calls++;
            onDatagram(Source.Of((IPEndPoint)result.RemoteEndPoint), buffer.AsSpan(0, result.ReceivedBytes));
            return 1;
        }

        // Readiness: a zero-byte peek completes when a datagram is queued and leaves it there.
        await socket.ReceiveAsync(Memory<byte>.Empty, SocketFlags.Peek, cancellationToken).ConfigureAwait(false);
        return Drain(socket, onDatagram);
    }

    /// <summary>Hands every datagram ready now to <paramref name="onDatagram"/> without waiting (Linux; the tests drive
    /// the batch with it on their own thread). Returns how many.</summary>
    internal int Drain(Socket socket, Handler onDatagram)
    {
        var handle = socket.SafeHandle;
        bool added = false;
        handle.DangerousAddRef(ref added); // the descriptor stays ours while we use it (throws once disposed)
        try
        {
            return Drain((int)handle.DangerousGetHandle(), onDatagram);
        }
        finally
        {
            if (added)
            {
                handle.DangerousRelease();
            }
        }
    }

    private unsafe int Drain(int fd, Handler onDatagram)
    {
        int handled = 0;
        while (!_disposed)
        {
            ResetReceiveHeaders(_headers, _iov, _sources, Slots);
            int n = recvmmsg(fd, _headers, Slots, MSG_DONTWAIT, null);
            Calls++;
            if (n <= 0)
            {
                if (n < 0 && Marshal.GetLastPInvokeError() is not (EAGAIN or EINTR))
                {
                    throw new SocketException(Marshal.GetLastPInvokeError());
                }

                break; // drained
            }

            for (int i = 0; i < n; i++)
            {
                var h = _headers[i];
                if ((h.Header.Flags & MSG_TRUNC) != 0)
                {
                    Truncated++;
                    continue;
                }

                var address = _sources[i].ToNetAddress();
                onDatagram(new Source(address.Ip, address.Port), new ReadOnlySpan<byte>(_iov[i].Base, (int)h.Length));
            }

            handled += n;
            if (n < Slots)
            {
                break;
            }
        }

        return handled;
    }

    public unsafe void Dispose()
    {
        if (_disposed)
        {
            return;
        }

        _disposed = true;
        if (_portable is null)
        {
            NativeMemory.AlignedFree(_buffers);
            NativeMemory.Free(_headers);
            NativeMemory.Free(_iov);
            NativeMemory.Free(_sources);
        }
    }
}
