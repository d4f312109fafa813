using System.Collections.Immutable;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Membership;
using QuickSilver.Qsm.Region;
using QuickSilver.Testing.Fuzz;
using QuickSilver.Transport.Reliable;

namespace QuickSilver.Qsm.Tests.Fuzz;

/// <summary>
/// A region-only stack (QsmStack.BuildRegion) of node 1 in a three-member region, with a sender into the region, on a
/// <see cref="CaptureTransport"/> and virtual time: a test hands it datagrams as a hostile peer would send them (raw,
/// or region control messages inside reliable-unicast segments that the peer numbers in order, as a peer that opened a
/// conversation can).
/// </summary>
internal sealed class RegionRig
{
    public static readonly NetAddress Self = NetAddress.Loopback(5001);
    public static readonly NetAddress Peer2 = NetAddress.Loopback(5002);
    public static readonly NetAddress Peer3 = NetAddress.Loopback(5003);
    public static readonly NetAddress Group = new(0xEF0A0001, 6000);

    private readonly Dictionary<NetAddress, (uint Epoch, ulong Next)> _conversations = new();
    private readonly byte[] _datagram = new byte[1500];
    private readonly byte[] _message = new byte[256 * 1024];
    private uint _epochs = 0x1000;

    public RegionRig(RegionOptions? options = null, bool multicast = true)
    {
        Options = options ?? new RegionOptions { MaxSenders = 8, MaxNakRanges = 8, SenderWindow = 256, MaxHeldPackets = 1024, TokenInterval = TimeSpan.FromMilliseconds(100) };
        Transport = new CaptureTransport(Self, 1500);
        Stack = QsmStack.BuildRegion(Transport, Time, 1, new QsmStackOptions
        {
            Region = Options,
            RateControl = new RateControl.RateControlOptions { MinRate = 1_000_000, Credits = 1_000_000, CreditsHigh = 1_000_000 },
            Reliable = new ReliableUnicastOptions { MaxSegmentBytes = 1400, MaxPeers = 64 },
        });
        Layer = Stack.Get<RegionLayer>();
        View = new RegionView(new RegionId(1), 1,
            ImmutableArray.Create(new ViewMember(new NodeId(1), Self), new ViewMember(new NodeId(2), Peer2), new ViewMember(new NodeId(3), Peer3)),
            multicast ? Group : null);
        Layer.InstallView(View);
        Sender = Layer.Sender(View);
        Sender.Source = Source;
    }

    public RegionOptions Options { get; }

    public VirtualScheduler Time { get; } = new();

    public CaptureTransport Transport { get; }

    public ProtocolStack Stack { get; }

    public RegionLayer Layer { get; }

    public RegionView View { get; }

    public RegionSender Sender { get; }

    public RecordSource Source { get; } = new();

    public RegionMember Member => Layer.Member!;

    public ReliableUnicast Reliable => Stack.Get<ReliableUnicast>();

    /// <summary>A region data packet (or any datagram) arriving from <paramref name="from"/>.</summary>
    public void Datagram(NetAddress from, ReadOnlySpan<byte> datagram) => Transport.Receive(from, datagram);

    public void Data(NetAddress from, in DataHeader header, ReadOnlySpan<byte> payload)
    {
        var datagram = new byte[RegionWire.DataHeaderSize + payload.Length];
        RegionWire.WriteData(datagram, header, payload);
        Transport.Receive(from, datagram);
    }

    /// <summary>A region control message (kind byte first) from <paramref name="from"/>, in the peer's next reliable
    /// segments (fragmented as the reliable layer would).</summary>
    public void Control(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (!_conversations.TryGetValue(from, out var conversation))
        {
            conversation = (++_epochs, 0);
        }

        _message[0] = RegionWire.ControlChannel;
        message.CopyTo(_message.AsSpan(1));
        int total = message.Length + 1;
        int offset = 0;
        do
        {
            int length = Math.Min(1400, total - offset);
            bool last = offset + length == total;
            int size = ReliableWire.WriteData(_datagram, last ? ReliableWire.DataType : ReliableWire.FragmentType, 0, conversation.Epoch, 0,
                conversation.Next++, _message.AsSpan(offset, length));
            Transport.Receive(from, _datagram.AsSpan(0, size));
            offset += length;
        }
        while (offset < total);

        _conversations[from] = conversation;
    }

    /// <summary>Lets the stack work: virtual time passes (alarms fire) and the sender's feed is pulled a little.</summary>
    public void Run(TimeSpan duration, int pulls = 16)
    {
        Transport.PullFeeds(pulls);
        Time.RunFor(duration);
    }

    /// <summary>Writes records of 100 bytes, as many as fit, forever.</summary>
    internal sealed class RecordSource : IRegionPacketSource
    {
        public int WritePayload(Span<byte> payload)
        {
            int written = Math.Min(payload.Length, 400);
            payload[..written].Fill(0x5A);
            return written;
        }
    }
}
