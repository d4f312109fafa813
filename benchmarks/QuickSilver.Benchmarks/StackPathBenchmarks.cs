using System.Buffers.Binary;
using System.Collections.Immutable;
using BenchmarkDotNet.Attributes;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;

namespace QuickSilver.Benchmarks;

/// <summary>
/// Stack v2's steady-state path on the core thread, per MESSAGE (issue 10, "Show"): what one group message costs the
/// sender to put into a send slot and the receiver to take from a datagram to the application's callback. Every
/// benchmark runs <see cref="MessagesPerInvoke"/> messages per invocation and declares them as its operations, so
/// <c>Mean</c> is core-thread time per message and <c>Allocated</c> is bytes allocated per message (0 B is the
/// target: DESIGN.md principle 5). No sockets, no threads: transports are doubles, time is virtual and frozen (no
/// alarm fires: token rounds, ACKs and purges are driven by the harness), so the figures are the protocol code's own.
/// <list type="bullet">
/// <item><see cref="Send"/>: the group layer's <c>RegionFeed</c> (round robin over groups, the group's outbox,
/// numbering, the application's pull feed) writing records straight into the send slot behind the
/// <see cref="RegionSender"/>'s header, the copy into the sender's window ring, rate-control credit, and the region's
/// ACK releasing the window each time it fills (the sender's window, 4,096 packets by default, bounds a token round's
/// traffic, so this is the back-pressured steady state).</item>
/// <item><see cref="SendRegionOnly"/>: the same sender fed by a source that writes the same group records from a
/// pre-made message (no group layer): the difference to <see cref="Send"/> is the group layer's share.</item>
/// <item><see cref="Receive"/>: a region stack built by <see cref="QsmStack.BuildRegion"/>; datagrams enter through the
/// transport's handler (the stack's dispatcher: common header parsed once), then the region layer, the member's
/// receive store and in-order delivery, then the group records are decoded as the group layer does (record header,
/// group lookup, per-sender FIFO check on the group's state) and handed to a span callback. A token visits the member
/// every <see cref="PacketsPerRound"/> packets with the previous round's purge point, so the receive store is purged
/// as in a live region.</item>
/// </list>
/// Not included: the publish side (<c>TryPublish</c>'s copy into a pooled buffer, the MPSC queue, the wake-up), the
/// sender's self-delivery to its own member, socket system calls, and the asynchronous queue: the end-to-end
/// <c>pathcost</c> mode (PathCost.cs) covers those.
/// </summary>
[MemoryDiagnoser]
public class StackPathBenchmarks
{
    /// <summary>Messages per invocation (the benchmarks' OperationsPerInvoke).</summary>
    public const int MessagesPerInvoke = 20_000;

    /// <summary>Data packets between two token visits at the receiver: one default sender window. A sender's ACKs come
    /// once a token round, so it puts at most one window into a round; a saturated sender puts exactly that, which is
    /// also when the send harness ACKs. Slower senders put fewer packets into a round, and per-round costs weigh more
    /// per message (the receive harness prints what a token visit allocates).</summary>
    public static readonly int PacketsPerRound = new RegionOptions().SenderWindow;

    private const uint Region = 1;
    private const uint SenderNode = 1;
    private const uint ReceiverNode = 2;
    private const uint GroupIdValue = 7;
    private static readonly NetAddress SenderAddress = NetAddress.Loopback(40001);
    private static readonly NetAddress ReceiverAddress = NetAddress.Loopback(40002);
    private static readonly NetAddress RegionGroup = new(0xEF0A0001, 40000);

    private SendHarness? _send;
    private ReceiveHarness? _receive;

    /// <summary>Bytes of application payload per group message.</summary>
    [Params(100, 1000)]
    public int MessageBytes { get; set; }

    /// <summary>The endpoint's largest datagram: 1,472 (a real network's default) or 16,384 (loopback's default). It
    /// sets how many messages share a packet, and so what per-packet costs are divided by.</summary>
    [Params(1472, 16384)]
    public int DatagramBytes { get; set; }

    [GlobalSetup(Targets = [nameof(Send)])]
    public void SetupSend() => _send = SendHarness.WithGroupLayer(MessageBytes, DatagramBytes);

    [GlobalSetup(Targets = [nameof(SendRegionOnly)])]
    public void SetupSendRegionOnly() => _send = SendHarness.RegionOnly(MessageBytes, DatagramBytes);

    [GlobalSetup(Targets = [nameof(Receive)])]
    public void SetupReceive() => _receive = new ReceiveHarness(MessageBytes, DatagramBytes);

    [GlobalCleanup]
    public void Cleanup()
    {
        _send?.Check();
        _receive?.Check();
    }

    [Benchmark(OperationsPerInvoke = MessagesPerInvoke)]
    public long Send() => _send!.Run(MessagesPerInvoke);

    [Benchmark(OperationsPerInvoke = MessagesPerInvoke)]
    public long SendRegionOnly() => _send!.Run(MessagesPerInvoke);

    [Benchmark(OperationsPerInvoke = MessagesPerInvoke)]
    public long Receive() => _receive!.Run(MessagesPerInvoke);

    private static RegionView TwoMemberView() => new(new RegionId(Region), 1,
        ImmutableArray.Create(new ViewMember(new NodeId(SenderNode), SenderAddress), new ViewMember(new NodeId(ReceiverNode), ReceiverAddress)),
        RegionGroup);

    private static GroupView OneRegionGroupView(uint group = GroupIdValue)
        => new(new GroupId(group), $"bench{group}", 1, ImmutableArray.Create(new RegionRef(new RegionId(Region), 1)));

    /// <summary>Rate control that never runs out in a benchmark-length run (μ_min and the credit pool at their
    /// bounds): credits are spent per packet as always, but no refill timer is needed.</summary>
    private static RateControlOptions Unthrottled() => new()
    {
        MinRate = 1e9,
        Credits = 1e9,
        CreditsHigh = 1e9,
        CreditsLow = 0,
        MaxRefill = 1e9,
    };

    /// <summary>
    /// A region sender over <see cref="PullTransport"/>, pulled slot by slot into a ring like the endpoint's send ring;
    /// when the window is full (the transport's pull gets nothing), the region's collective ACK releases everything
    /// sent and pulling goes on.
    /// </summary>
    internal sealed class SendHarness
    {
        private readonly PullTransport _transport;
        private readonly VirtualScheduler _scheduler;
        private readonly RegionSender _sender;
        private readonly Func<long> _taken;
        private readonly byte[] _ack = new byte[RegionWire.AckSize];
        private long _target;
        private long _acks;

        private SendHarness(PullTransport transport, VirtualScheduler scheduler, RegionSender sender, Func<long> taken, int messageBytes)
        {
            _transport = transport;
            _scheduler = scheduler;
            _sender = sender;
            _taken = taken;
            _target = taken();

            // Warm-up: the window wraps twice, so every slot of the window ring has its buffer before measuring.
            int perPacket = Math.Max(1, sender.MaxPayload / (GroupWire.HeaderSize + messageBytes));
            Run(2 * new RegionOptions().SenderWindow * perPacket);
        }

        /// <summary>The real group layer as the sender's source: a node stack (QsmStack.BuildNode) on the transport
        /// double, its GroupLayer's RegionFeed for the region, <paramref name="groups"/> groups mapped to it, each with
        /// a pull feed its application registered (all of them handing out the same pre-made message, as the comparison
        /// runner's feeds do). The GMS never answers (nobody is there), so the groups and their views are set up here
        /// by hand as the group layer does when a view arrives; its hello waits a day of virtual time, which never
        /// passes.</summary>
        public static SendHarness WithGroupLayer(int messageBytes, int datagramBytes, int groups = 1)
        {
            var transport = new PullTransport(SenderAddress, datagramBytes);
            var scheduler = new VirtualScheduler();
            var stack = QsmStack.BuildNode(transport, scheduler, new QsmStackOptions
            {
                Gms = NetAddress.Loopback(40099),
                RateControl = Unthrottled(),
                GmsClient = new GmsClientOptions { RetryInterval = TimeSpan.FromDays(1) },
            });
            var regions = stack.Get<RegionLayer>();
            regions.SetNode(SenderNode);
            var sender = regions.Sender(TwoMemberView());
            var feed = new GroupLayer.RegionFeed(stack.Get<GroupLayer>(), Region) { Sender = sender };
            ReadOnlyMemory<byte> message = Enumerable.Range(0, messageBytes).Select(i => (byte)i).ToArray();
            var pulled = new PullCount();
            for (int g = 0; g < groups; g++)
            {
                var group = new NodeGroup($"bench{g}", new RecordingGroup($"bench{g}") { KeepPayloads = false })
                {
                    View = OneRegionGroupView((uint)(GroupIdValue + g)),
                    Feed = new RepeatingFeed(message, pulled),
                    FeedActive = true,
                };
                group.Outbox.SetRegions([Region]);
                feed.Groups.Add(group);
            }

            sender.Source = feed;
            return new SendHarness(transport, scheduler, sender, () => pulled.Value, messageBytes);
        }

        /// <summary>The sender alone (as RegionSenderTests builds it), fed group records of a pre-made message.</summary>
        public static SendHarness RegionOnly(int messageBytes, int datagramBytes)
        {
            var transport = new PullTransport(SenderAddress, datagramBytes);
            var scheduler = new VirtualScheduler();
            var sender = new RegionSender(SenderNode, TwoMemberView(), transport, scheduler, new RegionOptions(), Unthrottled());
            var source = new RecordSource(messageBytes);
            sender.Source = source;
            return new SendHarness(transport, scheduler, sender, () => source.Written, messageBytes);
        }

        public long Run(int messages)
        {
            _target += messages;
            while (_taken() < _target)
            {
                if (_transport.PullOne() > 0)
                {
                    continue;
                }

                Ack(); // the window is full: the region's ACK for everything sent signals the sender again
                if (_transport.PullOne() > 0)
                {
                    continue;
                }

                _scheduler.RunFor(TimeSpan.FromSeconds(1)); // out of credit (never in a benchmark-length run): refill
                if (_transport.PullOne() <= 0)
                {
                    throw new InvalidOperationException($"The sender stopped: {_sender.LastSequence} sent, {_sender.Acknowledged} acknowledged.");
                }
            }

            return (long)_sender.LastSequence;
        }

        private void Ack()
        {
            ulong stable = _sender.LastSequence;
            RegionWire.WriteAck(_ack, new RegionAck(Region, SenderNode, 1, stable, stable, 1e9, 0));
            _sender.OnControl(ReceiverAddress, _ack);
            _acks++;
        }

        public void Check()
        {
            if (_sender.Retransmissions != 0 || _sender.Drops.Total != 0)
            {
                throw new InvalidOperationException($"Unexpected: {_sender.Retransmissions} retransmissions, {_sender.Drops.Total} drops.");
            }

            Console.WriteLine($"// send: {_sender.LastSequence} packets, {_taken()} messages, {_acks} ACKs, " +
                $"{(double)_taken() / _sender.LastSequence:F1} messages/packet, {_transport.ControlDatagrams} control datagrams");
        }
    }

    /// <summary>Messages pulled over all of a harness's feeds.</summary>
    private sealed class PullCount
    {
        public long Value;
    }

    /// <summary>The application's pull feed: the same pre-made message, as often as asked (no copy, no allocation).</summary>
    private sealed class RepeatingFeed(ReadOnlyMemory<byte> message, PullCount pulled) : IFeed<ReadOnlyMemory<byte>>
    {
        public bool TryPull(out ReadOnlyMemory<byte> item)
        {
            item = message;
            pulled.Value++;
            return true;
        }
    }

    /// <summary>Writes as many group records of a pre-made message as fit (the group layer's wire format, numbered).</summary>
    private sealed class RecordSource(int messageBytes) : IRegionPacketSource
    {
        private readonly byte[] _message = Enumerable.Range(0, messageBytes).Select(i => (byte)i).ToArray();

        public long Written;

        public int WritePayload(Span<byte> payload)
        {
            int written = 0;
            while (written + GroupWire.HeaderSize + _message.Length <= payload.Length)
            {
                written += GroupWire.Write(payload[written..], GroupIdValue, (ulong)++Written, _message);
            }

            return written;
        }
    }

    /// <summary>
    /// A region stack of the receiving node (QsmStack.BuildRegion: reliable unicast and the region layer) in a
    /// two-member region whose other member (the leader, index 0) is the sender. Datagrams come from a ring of
    /// pre-built ones, renumbered in place before each is handed to the transport's handler (the stack's dispatcher).
    /// </summary>
    private sealed class ReceiveHarness
    {
        private const int RingSlots = 64;
        private readonly BenchTransport _transport;
        private readonly RegionLayer _regions;
        private readonly Dictionary<uint, NodeGroup> _groupsById = new();
        private readonly byte[][] _ring = new byte[RingSlots][];
        private readonly int _recordBytes;
        private readonly int _recordsPerPacket;
        private readonly int _length;
        private readonly Token _token = new() { Region = Region, View = 1, Partition = 0, Step = 1 };
        private readonly TokenSection _section;
        private readonly byte[] _tokenBytes = new byte[64 * 1024];
        private readonly bool _fifo;
        private ulong _seq;
        private ulong _groupSeq;
        private ulong _lastRoundEnd;
        private long _target;
        private long _delivered;
        private long _checksum;
        private long _duplicates;
        private long _malformed;
        private long _tokenAllocated;

        public ReceiveHarness(int messageBytes, int datagramBytes)
        {
            _transport = new BenchTransport(ReceiverAddress, datagramBytes);
            var stack = QsmStack.BuildRegion(_transport, new VirtualScheduler(), ReceiverNode, new QsmStackOptions());
            _regions = stack.Get<RegionLayer>();
            _regions.InstallView(TwoMemberView());
            _regions.Delivered += OnRegionDelivery;
            _fifo = _regions.Options.FifoDelivery;
            var group = new NodeGroup("bench", new RecordingGroup("bench") { KeepPayloads = false }) { View = OneRegionGroupView() };
            _groupsById.Add(GroupIdValue, group);

            _recordBytes = GroupWire.HeaderSize + messageBytes;
            int payloadCapacity = RegionSender.PayloadCapacity(datagramBytes, _regions.Options);
            _recordsPerPacket = payloadCapacity / _recordBytes;
            _length = RegionWire.DataHeaderSize + (_recordsPerPacket * _recordBytes);
            var message = Enumerable.Range(0, messageBytes).Select(i => (byte)(i + 1)).ToArray();
            for (int slot = 0; slot < RingSlots; slot++)
            {
                _ring[slot] = new byte[datagramBytes];
                for (int r = 0; r < _recordsPerPacket; r++)
                {
                    GroupWire.Write(_ring[slot].AsSpan(RegionWire.DataHeaderSize + (r * _recordBytes)), GroupIdValue, 1, message);
                }
            }

            _section = new TokenSection(SenderNode, _regions.Options.MaxNakRanges);
            _token.Sections.Add(_section);
            Run(4 * PacketsPerRound * _recordsPerPacket); // the store reaches its steady size, pools fill, the JIT settles
        }

        public long Run(int messages)
        {
            _target += messages;
            var handler = _transport.Handler!;
            while (_delivered < _target)
            {
                var datagram = _ring[(int)(_seq % RingSlots)];
                ulong seq = ++_seq;
                RegionWire.WriteHeader(datagram, new DataHeader(SenderNode, Region, 1, 1, seq), _length - RegionWire.DataHeaderSize);
                for (int r = 0; r < _recordsPerPacket; r++)
                {
                    BinaryPrimitives.WriteUInt64LittleEndian(datagram.AsSpan(RegionWire.DataHeaderSize + (r * _recordBytes) + 4), ++_groupSeq);
                }

                handler.OnDatagram(SenderAddress, datagram.AsSpan(0, _length));
                if (seq % (ulong)PacketsPerRound == 0)
                {
                    TokenVisit(seq);
                }
            }

            return _delivered;
        }

        /// <summary>The token arrives from the leader (the sender, step 0 of partition 0) as it would after a round in
        /// which everyone received everything up to the previous visit: the region purges up to there. The member
        /// processes it and passes it on (into reliable unicast, whose peer never answers here: once its window is full
        /// those sends are refused and counted, a per-round cost).</summary>
        private void TokenVisit(ulong seq)
        {
            _token.Round++;
            _section.ResetAccumulators();
            _section.Cutoff = _section.PurgeUpTo = _section.StableBefore = _lastRoundEnd;
            _section.MaxSeen = _section.StableMin = _section.ReceivedMin = seq;
            _section.RateMin = 1e6;
            int length = _token.Write(_tokenBytes);
            long before = GC.GetAllocatedBytesForCurrentThread();
            _regions.Member!.OnControl(SenderAddress, _tokenBytes.AsSpan(0, length));
            _tokenAllocated += GC.GetAllocatedBytesForCurrentThread() - before;
            _lastRoundEnd = seq;
        }

        /// <summary>What the group layer does with a delivered region packet: its records, each checked against the
        /// group's per-sender FIFO state, to the application's span callback.</summary>
        private void OnRegionDelivery(uint sender, ulong seq, ReadOnlySpan<byte> packet)
        {
            while (!packet.IsEmpty)
            {
                if (!GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out var payload, out int consumed))
                {
                    _malformed++;
                    return;
                }

                packet = packet[consumed..];
                if (!_groupsById.TryGetValue(group, out var target))
                {
                    continue;
                }

                if (!target.Advance(sender, groupSeq, _fifo))
                {
                    _duplicates++;
                    continue;
                }

                Application(sender, groupSeq, payload);
            }
        }

        /// <summary>The application's callback: reads the message, keeps nothing.</summary>
        private void Application(uint sender, ulong sequence, ReadOnlySpan<byte> payload)
        {
            _delivered++;
            _checksum += payload[0] + payload[^1];
        }

        public void Check()
        {
            if (_duplicates != 0 || _malformed != 0 || _delivered != (long)(_seq * (ulong)_recordsPerPacket))
            {
                throw new InvalidOperationException($"Unexpected: {_delivered} delivered of {_seq} packets, {_duplicates} duplicates, {_malformed} malformed.");
            }

            Console.WriteLine($"// receive: {_seq} packets, {_delivered} messages ({_recordsPerPacket}/packet), {_token.Round} token visits " +
                $"(each allocated {_tokenAllocated / Math.Max(1, (long)_token.Round)} B: the token's parse and processing, per round), " +
                $"member drops {_regions.Member!.Drops.Total} (token forwards refused by the unanswered reliable channel), checksum {_checksum}");
        }
    }

    /// <summary>A transport double: control datagrams (reliable unicast) are taken and dropped; the handler is kept so
    /// the harness can hand datagrams to the stack.</summary>
    private class BenchTransport(NetAddress local, int maxDatagram) : IDatagramTransport
    {
        private readonly byte[] _scratch = new byte[maxDatagram];

        public IDatagramHandler? Handler { get; private set; }

        public long ControlDatagrams { get; private set; }

        public NetAddress LocalAddress => local;

        public int MaxDatagramSize => maxDatagram;

        public void SetHandler(IDatagramHandler handler) => Handler = handler;

        public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram)
        {
            ControlDatagrams++;
            return true;
        }

        public bool TryClaim(out Span<byte> slot)
        {
            slot = _scratch;
            return true;
        }

        public void Commit(NetAddress to, int length) => ControlDatagrams++;

        public Span<byte> ClaimedSlot => _scratch;

        public virtual IFeedChannel RegisterFeed(IDatagramFeed feed) => new FeedChannel(feed);

        public void JoinGroup(NetAddress group)
        {
        }

        public void LeaveGroup(NetAddress group)
        {
        }
    }

    /// <summary>The double with a send ring (as many slots as the endpoint's default send queue): the harness pulls the
    /// one registered data feed, the region sender, a slot at a time.</summary>
    private sealed class PullTransport(NetAddress local, int maxDatagram) : BenchTransport(local, maxDatagram)
    {
        private readonly byte[][] _ring = Enumerable.Range(0, new UdpEndpointOptions().SendQueueCapacity).Select(_ => new byte[maxDatagram]).ToArray();
        private FeedChannel? _feed;
        private int _next;

        public override IFeedChannel RegisterFeed(IDatagramFeed feed)
        {
            var channel = new FeedChannel(feed);
            if (feed is RegionSender)
            {
                _feed = channel;
            }

            return channel;
        }

        /// <summary>Pulls one datagram into the next slot; 0 (and the feed goes inactive) when it has nothing now.</summary>
        public int PullOne()
        {
            if (_feed is not { IsActive: true, Feed: { } feed })
            {
                return 0;
            }

            int length = feed.Pull(_ring[_next], out _);
            if (length <= 0)
            {
                _feed.IsActive = false;
                return 0;
            }

            _next = (_next + 1) % _ring.Length;
            return length;
        }
    }

    private sealed class FeedChannel(IDatagramFeed feed) : IFeedChannel
    {
        public IDatagramFeed? Feed { get; private set; } = feed;

        public bool IsActive { get; set; } = true;

        public void Signal() => IsActive = Feed is not null;

        public void Dispose()
        {
            Feed = null;
            IsActive = false;
        }
    }
}
