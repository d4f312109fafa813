using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.Core.Io.Completion;

/// <summary>
/// One socket's receive loop on the completion backend: one pinned buffer and one reused
/// <see cref="SocketAsyncEventArgs"/>. The asynchronous receive only tells the core that data has arrived (and carries
/// the first datagram); the core then drains the rest with non-blocking synchronous receives into the same buffer and
/// re-arms, so the steady state costs no managed allocation per datagram on the core thread (CompletionBackendTests checks it).
/// A wildcard-bound group socket (<see cref="GroupBindStrategy.Wildcard"/>) receives with IP_PKTINFO and drops every
/// datagram not addressed to its group.
/// </summary>
[System.Diagnostics.CodeAnalysis.SuppressMessage("Design", "CA1001", Justification = "The args are disposed by Close, or by Complete when an operation was still outstanding at Close.")]
internal sealed class CompletionReceiver : ICompletion
{
    private static readonly IPEndPoint AnyEndPoint = new(IPAddress.Any, 0);

    private readonly CompletionBackend _backend;
    private readonly CompletionUdpEndpoint _endpoint;
    private readonly Socket _socket;
    private readonly byte[] _buffer;
    private readonly SocketAsyncEventArgs _args = new();
    private readonly SocketAddress _from = new(AddressFamily.InterNetwork);
    private readonly NetAddress? _group;
    private readonly uint _groupIp;
    private bool _closed;
    private int _pending; // 1 while an asynchronous receive is outstanding or its completion is queued

    public CompletionReceiver(CompletionBackend backend, CompletionUdpEndpoint endpoint, Socket socket, int maxDatagramSize, NetAddress? group)
    {
        _backend = backend;
        _endpoint = endpoint;
        _socket = socket;
        _group = group;
        _groupIp = group?.Ip ?? 0;
        _buffer = GC.AllocateArray<byte>(maxDatagramSize + 1, pinned: true); // +1 reveals oversized datagrams
        _args.SetBuffer(_buffer, 0, _buffer.Length);
        _args.RemoteEndPoint = AnyEndPoint; // replaced by the runtime only when the sender changes
        _args.Completed += (_, _) => _backend.Post(this);
    }

    /// <summary>Stops the loop; the socket is closed by the endpoint. Core thread.</summary>
    public void Close()
    {
        _closed = true;
        if (Volatile.Read(ref _pending) == 0)
        {
            _args.Dispose();
        }
    }

    /// <summary>Starts an asynchronous receive. Core thread.</summary>
    public void Arm()
    {
        if (_closed)
        {
            return;
        }

        Volatile.Write(ref _pending, 1);
        bool pending;
        try
        {
            pending = _group is null ? _socket.ReceiveFromAsync(_args) : _socket.ReceiveMessageFromAsync(_args);
        }
        catch (ObjectDisposedException)
        {
            Volatile.Write(ref _pending, 0);
            return;
        }

        if (!pending)
        {
            // Completed synchronously: queue it like an asynchronous completion, so the core handles it in its I/O phase.
            _backend.Post(this);
        }
    }

    /// <summary>Handles the completed receive, drains the socket, re-arms. Core thread. Returns datagrams handled.</summary>
    public int Complete(TimeSpan deadline)
    {
        Volatile.Write(ref _pending, 0);
        if (_closed)
        {
            _args.Dispose();
            return 0;
        }

        int handled = 0;
        try
        {
            switch (_args.SocketError)
            {
                case SocketError.Success:
                    handled++;
                    if (_group is not null && !IsForGroup(_args.ReceiveMessageFromPacketInfo.Address))
                    {
                        _endpoint.DropNotForGroup();
                    }
                    else
                    {
                        _endpoint.OnReceived(NetAddress.FromIPEndPoint((IPEndPoint)_args.RemoteEndPoint!), _buffer.AsSpan(0, _args.BytesTransferred));
                    }

                    break;
                case SocketError.MessageSize: // Windows: the datagram did not fit the buffer
                    handled++;
                    _endpoint.DropOversized(1);
                    break;
                case SocketError.OperationAborted:
                    return 0; // the socket was closed under the receive
                default:
                    break; // e.g. an ICMP error reported on the socket; not fatal for a datagram socket
            }

            // Drain what is queued in the socket before anything else (QSM §2.5).
            while (!_closed && !_endpoint.IsClosed && _socket.Available > 0 && _endpoint.Core.Now < deadline)
            {
                handled++;
                if (!ReceiveOne())
                {
                    handled--;
                    break;
                }
            }
        }
        finally
        {
            // Re-armed even when a handler threw (the core counts the fault and carries on): a socket must not go deaf.
            _endpoint.CountBatch(handled);
            if (!_closed && !_endpoint.IsClosed && _args.SocketError != SocketError.OperationAborted)
            {
                Arm();
            }
        }

        return handled;
    }

    /// <summary>One non-blocking receive. False when the socket has nothing more or reported an error.</summary>
    private bool ReceiveOne()
    {
        try
        {
            if (_group is null)
            {
                int n = _socket.ReceiveFrom(_buffer, SocketFlags.None, _from);
                _endpoint.OnReceived(ReadSocketAddress(_from), _buffer.AsSpan(0, n));
                return true;
            }

            // The wildcard path: the runtime's ReceiveMessageFrom hands back the destination as an IPAddress, so a
            // datagram on this path costs two small objects (an IPAddress and the sender's IPEndPoint).
            var flags = SocketFlags.None;
            EndPoint from = AnyEndPoint;
            int length = _socket.ReceiveMessageFrom(_buffer, ref flags, ref from, out var info);
            if ((flags & SocketFlags.Truncated) != 0)
            {
                _endpoint.DropOversized(1);
            }
            else if (!IsForGroup(info.Address))
            {
                _endpoint.DropNotForGroup();
            }
            else
            {
                _endpoint.OnReceived(NetAddress.FromIPEndPoint((IPEndPoint)from), _buffer.AsSpan(0, length));
            }

            return true;
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.MessageSize)
        {
            _endpoint.DropOversized(1);
            return true;
        }
        catch (SocketException)
        {
            return false; // WouldBlock (drained), or an ICMP error reported on the socket
        }
    }

    private bool IsForGroup(IPAddress? destination)
    {
        if (destination is null || destination.AddressFamily != AddressFamily.InterNetwork)
        {
            return false;
        }

        Span<byte> bytes = stackalloc byte[4];
        return destination.TryWriteBytes(bytes, out _) && BinaryPrimitives.ReadUInt32BigEndian(bytes) == _groupIp;
    }

    // SocketAddress for AF_INET holds sockaddr_in: family (2 bytes), port (big-endian), address (big-endian).
    internal static NetAddress ReadSocketAddress(SocketAddress address)
    {
        var span = address.Buffer.Span;
        return new NetAddress(BinaryPrimitives.ReadUInt32BigEndian(span[4..]), BinaryPrimitives.ReadUInt16BigEndian(span[2..]));
    }

    internal static void WriteSocketAddress(SocketAddress target, NetAddress address)
    {
        var span = target.Buffer.Span;
        BinaryPrimitives.WriteUInt16BigEndian(span[2..], address.Port);
        BinaryPrimitives.WriteUInt32BigEndian(span[4..], address.Ip);
    }
}
