using System.Net.Sockets;
using System.Runtime.InteropServices;
using static QuickSilver.Core.Io.Linux.LinuxNative;

namespace QuickSilver.Core.Io.Linux;

/// <summary>
/// A UDP endpoint on the epoll backend: non-blocking sockets, recvmmsg into preallocated native buffers and sendmmsg
/// straight from the send ring, so a datagram costs no managed allocation.
/// </summary>
internal sealed unsafe class EpollUdpEndpoint : UdpEndpoint
{
    private readonly EpollBackend _backend;
    private readonly int _batch;
    private readonly Dictionary<Socket, int> _tokens = new();

    // Receive side: batch x (MaxDatagramSize + 1) bytes, so a longer datagram shows up as MSG_TRUNC.
    private readonly int _recvSlot;
    private readonly byte* _recvBuffers;
    private readonly MMsgHdr* _recvHdrs;
    private readonly IoVec* _recvIov;
    private readonly SockAddrIn* _recvAddrs;

    // Send side: headers pointing into the ring's slots.
    private readonly MMsgHdr* _sendHdrs;
    private readonly IoVec* _sendIov;
    private readonly SockAddrIn* _sendAddrs;
    private bool _wantWritable;

    public EpollUdpEndpoint(QuickSilverCore core, EpollBackend backend, UdpEndpointOptions options)
        : base(core, options)
    {
        _backend = backend;
        _batch = core.Options.SyscallBatchSize;
        _recvSlot = options.MaxDatagramSize + 1;
        _recvBuffers = (byte*)NativeMemory.AlignedAlloc((nuint)(_batch * _recvSlot), 64);
        _recvHdrs = (MMsgHdr*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(MMsgHdr)));
        _recvIov = (IoVec*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(IoVec)));
        _recvAddrs = (SockAddrIn*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(SockAddrIn)));
        _sendHdrs = (MMsgHdr*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(MMsgHdr)));
        _sendIov = (IoVec*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(IoVec)));
        _sendAddrs = (SockAddrIn*)NativeMemory.AllocZeroed((nuint)(_batch * sizeof(SockAddrIn)));
        for (int i = 0; i < _batch; i++)
        {
            _recvIov[i].Base = _recvBuffers + (i * _recvSlot);
            _recvIov[i].Length = (nuint)_recvSlot;
            _sendHdrs[i].Header.Iov = &_sendIov[i];
            _sendHdrs[i].Header.IovLength = 1;
            _sendHdrs[i].Header.Name = &_sendAddrs[i];
            _sendHdrs[i].Header.NameLength = (uint)sizeof(SockAddrIn);
        }
    }

    private protected override void OnSocketOpened(Socket socket, NetAddress? filterGroup)
    {
        socket.Blocking = false;
        _tokens[socket] = _backend.Register(this, socket);
    }

    private protected override void OnSocketClosing(Socket socket)
    {
        if (_tokens.Remove(socket, out int token))
        {
            _backend.Unregister(socket, token);
        }

        if (socket == MainSocket)
        {
            NativeMemory.AlignedFree(_recvBuffers);
            NativeMemory.Free(_recvHdrs);
            NativeMemory.Free(_recvIov);
            NativeMemory.Free(_recvAddrs);
            NativeMemory.Free(_sendHdrs);
            NativeMemory.Free(_sendIov);
            NativeMemory.Free(_sendAddrs);
        }
    }

    /// <summary>Receives until the socket would block or the deadline passes. Returns datagrams handled.</summary>
    internal int Drain(Socket socket, TimeSpan deadline)
    {
        int fd = (int)socket.Handle;
        int handled = 0;
        while (!IsClosed)
        {
            ResetReceiveHeaders(_recvHdrs, _recvIov, _recvAddrs, _batch);
            int n = recvmmsg(fd, _recvHdrs, (uint)_batch, MSG_DONTWAIT, null);
            if (n <= 0)
            {
                // EAGAIN: drained. Other errors (e.g. ICMP-reported ECONNREFUSED on the main socket) are not fatal to a
                // datagram socket: count and stop draining this round.
                if (n < 0 && Marshal.GetLastPInvokeError() is not (EAGAIN or EINTR))
                {
                    Counters.SendErrors++;
                }

                break;
            }

            Counters.IoBatches++;
            Counters.IoEvents += n;
            for (int i = 0; i < n; i++)
            {
                var h = _recvHdrs[i];
                if ((h.Header.Flags & MSG_TRUNC) != 0 || h.Length > MaxDatagramSize)
                {
                    DropOversized();
                    continue;
                }

                Deliver(_recvAddrs[i].ToNetAddress(), new ReadOnlySpan<byte>(_recvIov[i].Base, (int)h.Length));
                if (IsClosed)
                {
                    return handled + i + 1; // the handler closed us
                }
            }

            handled += n;
            if (n < _batch || Core.Now >= deadline)
            {
                break;
            }
        }

        return handled;
    }

    private protected override bool FlushRing()
    {
        int fd = (int)MainSocket.Handle;
        while (Count > 0)
        {
            int n = Math.Min(Count, _batch);
            for (int i = 0; i < n; i++)
            {
                int slot = (Head + i) % Capacity;
                _sendIov[i].Base = SlotPointer(slot);
                _sendIov[i].Length = (nuint)SlotLength(slot);
                _sendAddrs[i] = SockAddrIn.From(SlotDestination(slot));
            }

            int sent = sendmmsg(fd, _sendHdrs, (uint)n, MSG_DONTWAIT);
            if (sent < 0)
            {
                int err = Marshal.GetLastPInvokeError();
                if (err == EAGAIN)
                {
                    SetWantWritable(true);
                    return false;
                }

                if (err == EINTR)
                {
                    continue;
                }

                DropHead(); // this datagram cannot be sent (bad destination, no route...): drop it, carry on
                continue;
            }

            long bytes = 0;
            for (int i = 0; i < sent; i++)
            {
                bytes += SlotLength((Head + i) % Capacity);
            }

            Consume(sent, bytes);
        }

        return true;
    }

    internal void OnWritable()
    {
        SetWantWritable(false);
        Core.MarkDirty(this);
    }

    private void SetWantWritable(bool want)
    {
        if (_wantWritable != want && _tokens.TryGetValue(MainSocket, out int token))
        {
            _wantWritable = want;
            _backend.SetWantWritable(MainSocket, token, want);
        }
    }
}
