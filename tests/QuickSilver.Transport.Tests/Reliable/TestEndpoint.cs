using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Transport.Tests.Reliable;

internal delegate void TestMessageHandler(NetAddress peer, ReadOnlySpan<byte> message);

/// <summary>A stack of one reliable unicast layer with one control channel open, as the tests drive it.</summary>
internal sealed class TestEndpoint
{
    public const byte Channel = 200;
    private readonly IControlChannel _channel;

    public TestEndpoint(IDatagramTransport transport, IAlarmScheduler scheduler, uint epoch, ReliableUnicastOptions? options = null)
    {
        Reliable = new ReliableUnicast(epoch, options);
        Stack = new StackBuilder(transport, scheduler).Add(Reliable).Build();
        _channel = Reliable.OpenChannel(Channel, "test");
        _channel.SetReceiver((peer, message) => MessageReceived?.Invoke(peer, message), _ => { });
    }

    public ReliableUnicast Reliable { get; }

    public ProtocolStack Stack { get; }

    public event TestMessageHandler? MessageReceived;

    public event Action<NetAddress, int>? PeerFailed
    {
        add => Reliable.PeerFailed += value;
        remove => Reliable.PeerFailed -= value;
    }

    public event Action<ReliableConnection>? SpaceAvailable
    {
        add => Reliable.SpaceAvailable += value;
        remove => Reliable.SpaceAvailable -= value;
    }

    public NetAddress LocalAddress => Reliable.LocalAddress;

    public int MaxMessageBytes => _channel.MaxMessageBytes;

    /// <summary>Every drop on this endpoint: the dispatcher's (bad headers, unknown types) and the reliable layer's.</summary>
    public long DropsTotal => Stack.Drops.Total + Reliable.Drops.Total;

    public bool TrySend(NetAddress to, ReadOnlySpan<byte> message) => _channel.Send(to, message);

    public ReliableConnection Connection(NetAddress peer) => Reliable.Connection(peer);
}
