using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Tests.Stack;

public sealed class StackTests
{
    private static readonly NetAddress Peer = NetAddress.Loopback(5000);
    private const PacketType TypeA = (PacketType)200;
    private const PacketType TypeB = (PacketType)201;

    /// <summary>A transport that records what is sent and lets a test feed datagrams in.</summary>
    private sealed class LoopTransport : IDatagramTransport
    {
        public IDatagramHandler? Handler;

        public NetAddress LocalAddress => NetAddress.Loopback(4000);

        public int MaxDatagramSize => 1500;

        public void SetHandler(IDatagramHandler handler) => Handler = handler;

        public bool TrySend(NetAddress to, ReadOnlySpan<byte> datagram) => true;

        public bool TryClaim(out Span<byte> slot)
        {
            slot = new byte[MaxDatagramSize];
            return true;
        }

        public void Commit(NetAddress to, int length)
        {
        }

        public Span<byte> ClaimedSlot => throw new NotSupportedException();

        public IFeedChannel RegisterFeed(IDatagramFeed feed) => throw new NotSupportedException();

        public void JoinGroup(NetAddress group)
        {
        }

        public void LeaveGroup(NetAddress group)
        {
        }
    }

    private sealed class Recording(string name, params PacketType[] types) : IProtocolLayer, IPacketHandler
    {
        public readonly List<(PacketType Type, uint Sender, int Length)> Packets = new();
        public LayerContext? Context;
        public bool Stopped;
        public List<string>? StopOrder;

        public string Name => name;

        public void Attach(LayerContext context)
        {
            Context = context;
            foreach (var type in types)
            {
                context.RegisterPacketType(type, this);
            }
        }

        public void Stop()
        {
            Stopped = true;
            StopOrder?.Add(name);
        }

        public string Describe() => $"{Packets.Count} packets";

        public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
            => Packets.Add((header.Type, header.Sender, datagram.Length));
    }

    private static byte[] Datagram(PacketType type, uint sender, int length)
    {
        var bytes = new byte[length];
        new PacketHeader(type, sender, (ushort)length).Write(bytes);
        return bytes;
    }

    [Fact]
    public void The_dispatcher_routes_each_type_to_its_layer_with_the_header_parsed_and_counts_unknown_ids()
    {
        var transport = new LoopTransport();
        var a = new Recording("a", TypeA);
        var b = new Recording("b", TypeB);
        var stack = new StackBuilder(transport, new VirtualScheduler()).Add(a).Add(b).Build();
        Assert.Same(stack.Dispatcher, transport.Handler);

        transport.Handler!.OnDatagram(Peer, Datagram(TypeA, 7, 40));
        transport.Handler.OnDatagram(Peer, Datagram(TypeB, 8, 20));
        transport.Handler.OnDatagram(Peer, Datagram((PacketType)202, 9, 20)); // no layer owns 202
        transport.Handler.OnDatagram(Peer, Datagram(TypeA, 7, 40).AsSpan(0, 30)); // length field disagrees

        Assert.Equal([(TypeA, 7u, 40)], a.Packets);
        Assert.Equal([(TypeB, 8u, 20)], b.Packets);
        Assert.Equal(1, stack.Drops[DropReason.UnknownType]);
        Assert.Equal(1, stack.Drops[DropReason.Truncated]);
        Assert.Equal(2, stack.Dispatcher.Dispatched);
        Assert.Equal("b", stack.Dispatcher.OwnerOf(TypeB));
    }

    [Fact]
    public void Two_layers_cannot_own_one_packet_type_and_the_error_names_both()
    {
        var builder = new StackBuilder(new LoopTransport(), new VirtualScheduler()).Add(new Recording("first", TypeA)).Add(new Recording("second", TypeA));
        var e = Assert.Throws<ArgumentException>(() => builder.Build());
        Assert.Contains("first", e.Message, StringComparison.Ordinal);
        Assert.Contains("second", e.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Random_datagrams_never_throw_and_are_counted(int seed)
    {
        var a = new Recording("a", TypeA);
        var stack = new StackBuilder(new LoopTransport(), new VirtualScheduler()).Add(a).Build();
        var random = new Random(seed);
        var junk = new byte[300];
        int accepted = 0;
        for (int i = 0; i < 10_000; i++)
        {
            int length = random.Next(0, junk.Length);
            random.NextBytes(junk);
            if (i % 3 == 0 && length >= PacketHeader.Size)
            {
                new PacketHeader(random.Next(2) == 0 ? TypeA : (PacketType)random.Next(1, 256), 0, (ushort)length).Write(junk);
            }

            stack.Dispatcher.OnDatagram(Peer, junk.AsSpan(0, length));
            accepted = a.Packets.Count;
        }

        Assert.True(accepted > 1_000, $"seed {seed}: only {accepted} well-formed datagrams routed");
        Assert.Equal(10_000, a.Packets.Count + stack.Drops.Total);
    }

    [Fact]
    public void Layers_see_only_the_layers_below_them_and_stop_top_first()
    {
        var order = new List<string>();
        var bottom = new Recording("bottom") { StopOrder = order };
        var top = new Recording("top") { StopOrder = order };
        var stack = new StackBuilder(new LoopTransport(), new VirtualScheduler()).Add(bottom).Add(top).Build();

        Assert.Same(bottom, top.Context!.Below<Recording>());
        var e = Assert.Throws<InvalidOperationException>(() => bottom.Context!.Below<Recording>());
        Assert.Contains("bottom", e.Message, StringComparison.Ordinal);
        Assert.Null(bottom.Context!.FindBelow<Recording>());
        Assert.Equal(["bottom", "top"], stack.Layers.Select(l => l.Name));
        Assert.Throws<InvalidOperationException>(() => top.Context.OpenControlChannel(9)); // no control transport below

        stack.Stop();
        stack.Stop();
        Assert.Equal(["top", "bottom"], order);
    }
}
