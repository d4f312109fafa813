using System.Net;
using System.Net.Sockets;
using System.Runtime.CompilerServices;

namespace QuickSilver.Core.Io.Portable;

/// <summary>
/// One socket's receive loop on the portable backend. The asynchronous receive only tells the core that data has
/// arrived (and carries the first datagram); the core then drains the rest with synchronous receives, so the
/// steady state costs one system call per datagram and no allocation.
/// </summary>
internal sealed class PortableReceiver : ICompletion
{
    private readonly PortableBackend _backend;
    private readonly PortableUdpEndpoint _endpoint;
    private readonly byte[] _buffer;
    private readonly SocketAddress _from = new(AddressFamily.InterNetwork);
    private readonly Action _onCompleted;
    private ValueTask<int> _pending;
    private volatile bool _closed;

    public PortableReceiver(PortableBackend backend, PortableUdpEndpoint endpoint, Socket socket, int maxDatagramSize)
    {
        _backend = backend;
        _endpoint = endpoint;
        Socket = socket;
        _buffer = GC.AllocateArray<byte>(maxDatagramSize + 1, pinned: true); // +1 reveals oversized datagrams
        _onCompleted = () => _backend.Post(this);
    }

    public Socket Socket { get; }

    public void Close() => _closed = true;

    /// <summary>Starts the first asynchronous receive. Core thread.</summary>
    public void Arm()
    {
        while (!_closed)
        {
            // Stored, not awaited: it is consumed exactly once, by TakeResult on the core thread after completion.
#pragma warning disable CA2012
            _pending = Socket.ReceiveFromAsync(_buffer, SocketFlags.None, _from);
#pragma warning restore CA2012
            if (!_pending.IsCompleted)
            {
                _pending.ConfigureAwait(false).GetAwaiter().UnsafeOnCompleted(_onCompleted);
                return;
            }

            // Completed synchronously: queue it like an asynchronous completion, so the core handles it in its I/O phase.
            _backend.Post(this);
            return;
        }
    }

    /// <summary>Handles the completed receive, drains the socket, re-arms. Core thread. Returns datagrams handled.</summary>
    public int Complete(TimeSpan deadline)
    {
        if (_closed)
        {
            return 0;
        }

        int handled = 0;
        try
        {
            if (TakeResult(out int length))
            {
                handled++;
                Handle(length);
            }

            // Drain what is queued in the socket before anything else (QSM §2.5).
            while (!_closed && Socket.Available > 0)
            {
                int n;
                try
                {
                    n = Socket.ReceiveFrom(_buffer, SocketFlags.None, _from);
                }
                catch (SocketException)
                {
                    break; // e.g. an ICMP error reported on the socket; not fatal for a datagram socket
                }

                handled++;
                Handle(n);
                if (_endpoint.Core.Now >= deadline)
                {
                    break;
                }
            }
        }
        finally
        {
            // Re-armed even when a handler threw (the core counts the fault and carries on): a socket must not go deaf.
            _endpoint.CountBatch(handled);
            if (!_closed)
            {
                Arm();
            }
        }

        return handled;
    }

    private bool TakeResult(out int length)
    {
        try
        {
            length = _pending.GetAwaiter().GetResult();
            return true;
        }
        catch (SocketException)
        {
            length = 0;
            return false;
        }
        catch (ObjectDisposedException)
        {
            length = 0;
            return false;
        }
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void Handle(int length) => _endpoint.OnReceived(_from, _buffer.AsSpan(0, length));
}
