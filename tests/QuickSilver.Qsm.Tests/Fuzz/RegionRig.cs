using System.Buffers.Binary;
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

    /// <summary>A host outside the region's view (it can still open a reliable conversation: it receives at its address).</summary>
    public static readonly NetAddress Outsider = NetAddress.Loopback(5009);
    public static readonly NetAddress Group = new(0xEF0A0001, 6000);

    private readonly Dictionary<NetAddress, (uint Epoch, uint Theirs, ulong Next)> _conversations = new();
    private (NetAddress To, UInt128? Cookie, uint? AckFrom, uint AckTo) _heard;
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
        Transport.Observer = OnSent;
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
        Open(from);
        var conversation = _conversations[from];

        _message[0] = RegionWire.ControlChannel;
        message.CopyTo(_message.AsSpan(1));
        int total = message.Length + 1;
        int offset = 0;
        do
        {
            int length = Math.Min(1400, total - offset);
            bool last = offset + length == total;
            int size = ReliableWire.WriteData(_datagram, last ? ReliableWire.DataType : ReliableWire.FragmentType, 0, conversation.Epoch,
                conversation.Theirs, conversation.Next++, _message.AsSpan(offset, length));
            Transport.Receive(from, _datagram.AsSpan(0, size));
            offset += length;
        }
        while (offset < total);

        _conversations[from] = conversation;
    }

    /// <summary>A token of this rig's region and view, at its start (partition 0, step 0), with one section for
    /// <paramref name="sender"/> whose cutoff, purge point and stability point are all <paramref name="purgeUpTo"/>.</summary>
    public byte[] Token(uint sender, ulong purgeUpTo, ulong round)
    {
        var token = new Token { Region = View.Region.Value, View = View.ViewNumber, Round = round, Partition = 0, Step = 0 };
        token.Sections.Add(new TokenSection(sender, Options.MaxNakRanges) { Cutoff = purgeUpTo, PurgeUpTo = purgeUpTo, StableBefore = purgeUpTo });
        var message = new byte[4096];
        return message.AsSpan(0, token.Write(message)).ToArray();
    }

    /// <summary>Opens the reliable conversation <see cref="Control"/> uses from <paramref name="from"/>, unless it is open.</summary>
    public void Open(NetAddress from)
    {
        if (!_conversations.ContainsKey(from))
        {
            _conversations[from] = Handshake(from);
        }
    }

    /// <summary>Opens a conversation from <paramref name="from"/> as a peer that receives there does: a connect, the
    /// stack's challenge and a connect echoing its cookie, then the stack's acknowledgement names its own number (both
    /// read off the transport).</summary>
    private (uint Epoch, uint Theirs, ulong Next) Handshake(NetAddress from)
    {
        uint epoch = ++_epochs;
        Span<byte> cookie = stackalloc byte[16];
        _heard = default;
        Transport.Receive(from, _datagram.AsSpan(0, ReliableWire.WriteHandshake(_datagram, ReliableWire.ConnectType, 0, epoch, 0, cookie)));
        if (_heard.Cookie is not { } challenge || _heard.To != from)
        {
            throw new InvalidOperationException($"The stack did not challenge a connect from {from}.");
        }

        BinaryPrimitives.WriteUInt128LittleEndian(cookie, challenge);
        Transport.Receive(from, _datagram.AsSpan(0, ReliableWire.WriteHandshake(_datagram, ReliableWire.ConnectType, 0, epoch, 0, cookie)));
        if (_heard.AckFrom is not { } theirs || _heard.AckTo != epoch)
        {
            throw new InvalidOperationException($"The stack did not accept the handshake from {from}.");
        }

        return (epoch, theirs, 0);
    }

    private void OnSent(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (PacketHeader.TryRead(datagram, out var header) != WireError.None)
        {
            return;
        }

        var body = datagram[PacketHeader.Size..];
        if (header.Type == ReliableWire.ChallengeType && ReliableWire.TryReadChallenge(body, out _) == WireError.None)
        {
            _heard = _heard with { To = to, Cookie = BinaryPrimitives.ReadUInt128LittleEndian(datagram[ReliableWire.CookieOffset..]) };
        }
        else if (header.Type == ReliableWire.AckType && ReliableWire.TryReadAck(body, out var ack) == WireError.None)
        {
            _heard = _heard with { AckFrom = ack.SenderEpoch, AckTo = ack.ReceiverEpoch };
        }
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
