using System.Net;
using System.Net.Sockets;
using QuickSilver.Core.Diagnostics;

namespace QuickSilver.Core.Io.Completion;

/// <summary>
/// A UDP endpoint on the completion backend. Every socket is non-blocking. Sends go from the ring with synchronous
/// <c>SendTo</c> until the kernel's send buffer is full (WouldBlock); then the head datagram is handed to one reused
/// <see cref="SocketAsyncEventArgs"/> (<c>SendToAsync</c>), the ring backs up (and with it <c>TrySend</c> and the
/// feeds: the endpoint's ordinary back-pressure), and the core thread carries on. The send's completion is posted into
/// the backend's queue; the core then takes the datagram off the ring and resumes the flush. A full send buffer never
/// blocks the core thread.
/// </summary>
internal sealed class CompletionUdpEndpoint : UdpEndpoint
{
    private readonly CompletionBackend _backend;
    private readonly Dictionary<Socket, CompletionReceiver> _receivers = new();
    private readonly SocketAddress _to = new(AddressFamily.InterNetwork);
    private readonly SendCompletion _send;

    public CompletionUdpEndpoint(QuickSilverCore core, CompletionBackend backend, UdpEndpointOptions options)
        : base(core, options)
    {
        _backend = backend;
        _send = new SendCompletion(this, options.MaxDatagramSize);
    }

    /// <summary>Sends parked on a full socket buffer so far (each resumed by a send completion). Core thread.</summary>
    internal long ParkedSends { get; private set; }

    private protected override bool SupportsGroupFilter => true;

    private protected override void OnSocketOpened(Socket socket, NetAddress? filterGroup)
    {
        socket.Blocking = false;
        var receiver = new CompletionReceiver(_backend, this, socket, MaxDatagramSize, filterGroup);
        _receivers[socket] = receiver;
        receiver.Arm();
    }

    private protected override void OnSocketClosing(Socket socket)
    {
        if (_receivers.Remove(socket, out var receiver))
        {
            receiver.Close();
        }

        if (socket == MainSocket)
        {
            _send.Close();
        }
    }

    internal void OnReceived(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (datagram.Length > MaxDatagramSize)
        {
            DropOversized();
            return;
        }

        Deliver(from, datagram);
    }

    internal void DropOversized(int count)
    {
        for (int i = 0; i < count; i++)
        {
            DropOversized();
        }
    }

    internal void DropNotForGroup() => Counters.Drops.Increment(DropReason.NotForThisNode);

    internal void CountBatch(int handled)
    {
        Counters.IoBatches++;
        Counters.IoEvents += handled;
    }

    private protected override bool FlushRing()
    {
        if (_send.Pending)
        {
            return false; // the head datagram is with the kernel; its completion resumes the flush
        }

        while (Count > 0)
        {
            int slot = Head;
            int length = SlotLength(slot);
            CompletionReceiver.WriteSocketAddress(_to, SlotDestination(slot));
            try
            {
                MainSocket.SendTo(Slot(slot)[..length], SocketFlags.None, _to);
                Consume(1, length);
            }
            catch (SocketException e) when (e.SocketErrorCode == SocketError.WouldBlock)
            {
                ParkedSends++;
                _send.Start(Slot(slot)[..length], SlotDestination(slot));
                return false;
            }
            catch (SocketException)
            {
                DropHead(); // this datagram cannot be sent (bad destination, no route...): drop it, carry on
            }
            catch (ObjectDisposedException)
            {
                return false;
            }
        }

        return true;
    }

    /// <summary>The send completion came back (core thread): the head datagram left, or failed; resume the flush.</summary>
    private void OnSendCompleted(SocketError error, int length)
    {
        if (IsClosed || Count == 0)
        {
            return;
        }

        if (error == SocketError.Success)
        {
            Consume(1, length);
        }
        else
        {
            DropHead();
        }

        Core.MarkDirty(this);
    }

    /// <summary>The one asynchronous send of an endpoint: a copy of the ring's head datagram in a pinned buffer.</summary>
    [System.Diagnostics.CodeAnalysis.SuppressMessage("Design", "CA1001", Justification = "The args are disposed by Close, or by Complete when the send was still outstanding at Close.")]
    private sealed class SendCompletion : ICompletion
    {
        private readonly CompletionUdpEndpoint _endpoint;
        private readonly SocketAsyncEventArgs _args = new();
        private readonly byte[] _buffer;
        private bool _closed;

        public SendCompletion(CompletionUdpEndpoint endpoint, int maxDatagramSize)
        {
            _endpoint = endpoint;
            _buffer = GC.AllocateArray<byte>(maxDatagramSize, pinned: true);
            _args.Completed += (_, _) => _endpoint._backend.Post(this);
        }

        public bool Pending { get; private set; }

        /// <summary>Hands a copy of <paramref name="datagram"/> to the socket asynchronously. Core thread; only on a
        /// full send buffer, so the copy and the endpoint object it takes are off the steady-state path.</summary>
        public void Start(ReadOnlySpan<byte> datagram, NetAddress to)
        {
            datagram.CopyTo(_buffer);
            _args.SetBuffer(_buffer, 0, datagram.Length);
            _args.RemoteEndPoint = to.ToIPEndPoint();
            Pending = true;
            bool pending;
            try
            {
                pending = _endpoint.MainSocket.SendToAsync(_args);
            }
            catch (ObjectDisposedException)
            {
                Pending = false;
                return;
            }

            if (!pending)
            {
                _endpoint._backend.Post(this); // completed at once: handle it in the I/O phase like any other
            }
        }

        public int Complete(TimeSpan deadline)
        {
            Pending = false;
            if (_closed)
            {
                _args.Dispose();
                return 0;
            }

            _endpoint.OnSendCompleted(_args.SocketError, _args.BytesTransferred);
            return 0;
        }

        public void Close()
        {
            _closed = true;
            if (!Pending)
            {
                _args.Dispose();
            }
        }
    }
}
