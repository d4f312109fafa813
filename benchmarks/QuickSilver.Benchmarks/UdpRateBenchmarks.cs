using System.Net;
using System.Net.Sockets;
using BenchmarkDotNet.Attributes;
using QuickSilver.Core;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Probe;

namespace QuickSilver.Benchmarks;

/// <summary>
/// Loopback UDP datagram rate through the core: one sender core multicasts flow-controlled probe datagrams to one
/// receiver core over loopback IP multicast, which acknowledges every 1,000 over unicast. One benchmark operation is
/// one datagram delivered, so Mean is time per datagram and Allocated is bytes per datagram (all threads).
/// The baseline does the same with plain blocking .NET sockets: a receiver thread and a sender loop.
/// </summary>
[MemoryDiagnoser]
[Config(typeof(ThroughputConfig))]
public class UdpRateBenchmarks
{
    private const int DatagramsPerInvoke = 20_000;

    private QuickSilverCore? _senderCore;
    private QuickSilverCore? _receiverCore;
    private ProbeSender? _sender;
    private ProbeReceiver? _receiver;
    private PlainSocketPair? _plain;
    private readonly ManualResetEventSlim _reached = new();
    private long _target;

    [Params(100, 1400)]
    public int Size { get; set; }

    [GlobalSetup(Target = nameof(Epoll))]
    public void SetupEpoll() => SetupCore(IoBackendKind.Epoll);

    [GlobalSetup(Target = nameof(Portable))]
    public void SetupPortable() => SetupCore(IoBackendKind.Portable);

    [GlobalSetup(Target = nameof(Completion))]
    public void SetupCompletion() => SetupCore(IoBackendKind.Completion);

    [GlobalSetup(Target = nameof(PlainSocket))]
    public void SetupPlain()
    {
        (int window, int ackEvery) = MulticastProbeRun.SizeWindow(Size);
        _plain = new PlainSocketPair(RandomGroup(), window, ackEvery, Size);
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = DatagramsPerInvoke)]
    public void PlainSocket() => _plain!.Send(DatagramsPerInvoke);

    [Benchmark(OperationsPerInvoke = DatagramsPerInvoke)]
    public void Epoll() => SendThroughCore();

    [Benchmark(OperationsPerInvoke = DatagramsPerInvoke)]
    public void Portable() => SendThroughCore();

    [Benchmark(OperationsPerInvoke = DatagramsPerInvoke)]
    public void Completion() => SendThroughCore();

    [GlobalCleanup]
    public void Cleanup()
    {
        _senderCore?.Dispose();
        _receiverCore?.Dispose();
        _plain?.Dispose();
    }

    private void SetupCore(IoBackendKind backend)
    {
        (int window, int ackEvery) = MulticastProbeRun.SizeWindow(Size);
        var group = RandomGroup();
        _receiverCore = QuickSilverCore.Start(new CoreOptions { Name = "bench-receiver", Backend = backend });
        _senderCore = QuickSilverCore.Start(new CoreOptions { Name = "bench-sender", Backend = backend });
        var receiverEndpoint = _receiverCore.OpenUdp(new UdpEndpointOptions());
        var senderEndpoint = _senderCore.OpenUdp(new UdpEndpointOptions());
        _receiver = ProbeReceiver.CountingOnly(receiverEndpoint, senderEndpoint.LocalAddress, ackEvery);
        _receiverCore.Invoke(() =>
        {
            receiverEndpoint.SetHandler(_receiver);
            receiverEndpoint.JoinGroup(group);
        });
        _sender = new ProbeSender(group, 0, window, Size, receivers: 1);
        _senderCore.Invoke(() =>
        {
            senderEndpoint.SetHandler(_sender);
            _sender.Channel = senderEndpoint.RegisterFeed(_sender);
        });
    }

    private void SendThroughCore()
    {
        _target += DatagramsPerInvoke;
        _reached.Reset();
        _receiver!.SetTarget(_target, _reached);
        if (!_senderCore!.TryPost(static s => ((ProbeSender)s!).Extend(DatagramsPerInvoke), _sender))
        {
            throw new InvalidOperationException("downcall queue full");
        }

        if (!_reached.Wait(TimeSpan.FromSeconds(30)))
        {
            throw new TimeoutException($"only {_receiver.Received} of {_target} datagrams arrived: a datagram was lost");
        }
    }

    private static NetAddress RandomGroup()
        => new(0xEFFE0000u | (uint)Random.Shared.Next(1, 0xFFFF), (ushort)Random.Shared.Next(20000, 60000));

    /// <summary>The baseline: blocking sockets, a receiver thread and a sender loop, with the same window and acks.</summary>
    private sealed class PlainSocketPair : IDisposable
    {
        private readonly Socket _send = new(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        private readonly Socket _receive = new(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
        private readonly SocketAddress _groupAddress;
        private readonly SocketAddress _senderAddress;
        private readonly Thread _receiverThread;
        private readonly byte[] _datagram;
        private readonly byte[] _ackBuffer = new byte[64];
        private readonly SocketAddress _ackFrom = new(AddressFamily.InterNetwork);
        private readonly int _window;
        private readonly int _ackEvery;
        private long _sent;
        private long _acked;
        private volatile bool _stop;

        public PlainSocketPair(NetAddress group, int window, int ackEvery, int size)
        {
            _window = window;
            _ackEvery = ackEvery;
            _datagram = new byte[size];
            var options = new UdpEndpointOptions();
            _send.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            _send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
            _send.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastLoopback, true);
            _send.ReceiveBufferSize = options.SocketReceiveBufferBytes;
            _receive.ReceiveBufferSize = options.SocketReceiveBufferBytes;
            _receive.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
            _receive.Bind(group.ToIPEndPoint());
            _receive.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.AddMembership, new MulticastOption(group.ToIPAddress(), IPAddress.Loopback));
            _groupAddress = group.ToIPEndPoint().Serialize();
            _senderAddress = ((IPEndPoint)_send.LocalEndPoint!).Serialize();
            _receiverThread = new Thread(ReceiveLoop) { IsBackground = true, Name = "plain-receiver" };
            _receiverThread.Start();
        }

        public void Send(int count)
        {
            long end = _sent + count;
            while (_sent < end)
            {
                while (_sent - _acked >= _window)
                {
                    int n = _send.ReceiveFrom(_ackBuffer, SocketFlags.None, _ackFrom); // blocks until an ack
                    if (ProbeWire.TryReadAck(_ackBuffer.AsSpan(0, n), out long acked))
                    {
                        _acked = Math.Max(_acked, acked);
                    }
                }

                ProbeWire.WriteData(_datagram, 1, _sent);
                _send.SendTo(_datagram, SocketFlags.None, _groupAddress);
                _sent++;
            }

            // Wait until the receiver acknowledges the whole batch, like the core benchmarks wait for delivery.
            while (_acked < end)
            {
                int n = _send.ReceiveFrom(_ackBuffer, SocketFlags.None, _ackFrom);
                if (ProbeWire.TryReadAck(_ackBuffer.AsSpan(0, n), out long acked))
                {
                    _acked = Math.Max(_acked, acked);
                }
            }
        }

        private void ReceiveLoop()
        {
            var buffer = new byte[2048];
            var ack = new byte[ProbeWire.MinSize];
            var from = new SocketAddress(AddressFamily.InterNetwork);
            long count = 0;
            while (!_stop)
            {
                int n;
                try
                {
                    n = _receive.ReceiveFrom(buffer, SocketFlags.None, from);
                }
                catch (SocketException)
                {
                    return;
                }
                catch (ObjectDisposedException)
                {
                    return;
                }

                if (ProbeWire.TryReadData(buffer.AsSpan(0, n), out _) && ++count % _ackEvery == 0)
                {
                    ProbeWire.WriteAck(ack, 2, count);
                    _receive.SendTo(ack, SocketFlags.None, _senderAddress);
                }
            }
        }

        public void Dispose()
        {
            _stop = true;
            _receive.Dispose();
            _send.Dispose();
            _receiverThread.Join(TimeSpan.FromSeconds(5));
        }
    }
}
