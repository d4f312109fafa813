using System.Net.Sockets;
using System.Runtime.InteropServices;
using static QuickSilver.Core.Io.Linux.LinuxNative;

namespace QuickSilver.Core.Io.Linux;

/// <summary>
/// The Linux I/O queue: one epoll instance with level-triggered registrations for every socket, plus an eventfd that
/// downcalls write to wake the core. A ready socket is drained with recvmmsg until it would block (or the I/O quantum ends).
/// </summary>
internal sealed unsafe class EpollBackend : IIoBackend
{
    private const ulong WakeToken = ulong.MaxValue;
    private const int MaxEvents = 64;

    private readonly QuickSilverCore _core;
    private readonly int _epfd;
    private readonly int _eventfd;
    private readonly byte* _events;
    private readonly List<Registration?> _registrations = new();
    private readonly Stack<int> _freeTokens = new();
    private int _wakePending;

    public EpollBackend(QuickSilverCore core)
    {
        _core = core;
        _epfd = epoll_create1(EPOLL_CLOEXEC);
        if (_epfd < 0)
        {
            throw new SocketException(Marshal.GetLastPInvokeError());
        }

        _eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (_eventfd < 0)
        {
            int err = Marshal.GetLastPInvokeError();
            close(_epfd);
            throw new SocketException(err);
        }

        _events = (byte*)NativeMemory.Alloc((nuint)(MaxEvents * EpollEventSize));
        Ctl(EPOLL_CTL_ADD, _eventfd, EPOLLIN, WakeToken);
    }

    public IoBackendKind Kind => IoBackendKind.Epoll;

    public bool HasPendingEvents => true;

    public UdpEndpoint CreateUdp(UdpEndpointOptions options) => new EpollUdpEndpoint(_core, this, options);

    internal int Register(EpollUdpEndpoint endpoint, Socket socket)
    {
        int token;
        if (_freeTokens.Count > 0)
        {
            token = _freeTokens.Pop();
            _registrations[token] = new Registration(endpoint, socket);
        }
        else
        {
            token = _registrations.Count;
            _registrations.Add(new Registration(endpoint, socket));
        }

        Ctl(EPOLL_CTL_ADD, (int)socket.Handle, EPOLLIN, (ulong)token);
        return token;
    }

    internal void SetWantWritable(Socket socket, int token, bool want)
        => Ctl(EPOLL_CTL_MOD, (int)socket.Handle, want ? EPOLLIN | EPOLLOUT : EPOLLIN, (ulong)token);

    internal void Unregister(Socket socket, int token)
    {
        epoll_ctl(_epfd, EPOLL_CTL_DEL, (int)socket.Handle, null);
        _registrations[token] = null;
        _freeTokens.Push(token);
    }

    public int PollAndDispatch(int timeoutMs, TimeSpan deadline)
    {
        int handled = 0;
        while (true)
        {
            int n = epoll_wait(_epfd, _events, MaxEvents, timeoutMs);
            if (n < 0)
            {
                int err = Marshal.GetLastPInvokeError();
                if (err == EINTR)
                {
                    continue;
                }

                throw new SocketException(err);
            }

            for (int i = 0; i < n; i++)
            {
                ReadEpollEvent(_events + (i * EpollEventSize), out uint events, out ulong token);
                if (token == WakeToken)
                {
                    ulong value;
                    read(_eventfd, &value, sizeof(ulong));
                    Volatile.Write(ref _wakePending, 0);
                    continue;
                }

                var registration = _registrations[(int)token];
                if (registration is null)
                {
                    continue; // closed earlier in this batch
                }

                if ((events & EPOLLOUT) != 0)
                {
                    registration.Endpoint.OnWritable();
                }

                if ((events & (EPOLLIN | EPOLLERR)) != 0)
                {
                    handled += registration.Endpoint.Drain(registration.Socket, deadline);
                }
            }

            // Keep going while sockets are still ready and the quantum lasts (they drained up to the deadline).
            if (n < MaxEvents || _core.Now >= deadline)
            {
                return handled;
            }

            timeoutMs = 0;
        }
    }

    public void Wake()
    {
        if (Interlocked.Exchange(ref _wakePending, 1) == 1)
        {
            return; // a wake-up is already in flight
        }

        ulong one = 1;
        write(_eventfd, &one, sizeof(ulong));
    }

    private void Ctl(int op, int fd, uint events, ulong token)
    {
        byte* ev = stackalloc byte[16];
        WriteEpollEvent(ev, events, token);
        if (epoll_ctl(_epfd, op, fd, ev) != 0)
        {
            throw new SocketException(Marshal.GetLastPInvokeError());
        }
    }

    public void Dispose()
    {
        close(_eventfd);
        close(_epfd);
        NativeMemory.Free(_events);
    }

    private sealed record Registration(EpollUdpEndpoint Endpoint, Socket Socket);
}
