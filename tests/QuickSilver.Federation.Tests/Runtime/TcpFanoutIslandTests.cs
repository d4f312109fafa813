using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Threading.Channels;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Plugins;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Transport.Framing;

namespace QuickSilver.Federation.Tests.Runtime;

/// <summary>A multicast island federated with an island without multicast (TCP fan-out), on loopback.</summary>
public class TcpFanoutIslandTests(Xunit.Abstractions.ITestOutputHelper output)
{

    [Fact]
    public async Task AMemberOfATcpFanoutIslandReceivesAMulticastIslandsSession()
    {
        int ports = 40_000 + (Environment.ProcessId % 400) * 10;
        using var n1 = new MulticastNativeNet(new MulticastNativeNetOptions { PoolBase = IPAddress.Parse("239.255.74.0"), PortBase = ports, PoolSize = 2 });
        var n2 = new TcpFanoutNativeNet(new IPEndPoint(IPAddress.Loopback, 0));
        await using var n2Owner = n2;
        var (g1, g2) = await LoopbackGatewayPair.StartAsync(n1, n2, TimeSpan.FromSeconds(5));
        await using (g1)
        await using (g2)
        {
            var inbox = Channel.CreateUnbounded<byte[]>();
            var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            await socket.ConnectAsync(n2.Endpoint);
            var member = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
            await using (member)
            {
                using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
                var run = member.RunAsync(f => inbox.Writer.TryWrite(f), cts.Token);
                var session = SessionName.Parse($"bfed://1/239.255.75.1/{ports + 5}");
                member.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Join, session.Text));
                var reply = await inbox.Reader.ReadAsync(cts.Token);
                Assert.True(TcpFanoutNativeNet.TryDecode(reply, out byte op, out string text, out _));
                Assert.Equal(TcpFanoutNativeNet.Reply, op);
                Assert.Equal("TRANSLATION fanout/0", text);
                member.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Sub, "fanout/0"));
                for (int i = 0; i < 100 && (await g1.SnapshotAsync()).Sessions.Count == 0; i++)
                {
                    await Task.Delay(50);
                }

                using var source = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
                source.SetSocketOption(SocketOptionLevel.IP, SocketOptionName.MulticastInterface, IPAddress.Loopback.GetAddressBytes());
                await Task.Delay(200); // let the SUB reach the hub before the first message
                for (int i = 0; i < 100; i++)
                {
                    var p = new byte[200];
                    BinaryPrimitives.WriteInt32LittleEndian(p, i);
                    source.SendTo(p, IPEndPoint.Parse($"239.255.75.1:{ports + 5}"));
                }

                var got = new List<int>();
                while (got.Count < 100)
                {
                    var frame = await inbox.Reader.ReadAsync(cts.Token);
                    Assert.True(TcpFanoutNativeNet.TryDecode(frame, out op, out text, out var payload));
                    Assert.Equal(TcpFanoutNativeNet.Pub, op);
                    Assert.Equal("fanout/0", text);
                    got.Add(BinaryPrimitives.ReadInt32LittleEndian(payload.Span));
                }

                Assert.Equal(Enumerable.Range(0, 100), got);

                // A malformed body (op 9) ends the member's connection and is counted.
                member.TrySend([9, 1, 0, (byte)'x']);
                await run.WaitAsync(TimeSpan.FromSeconds(10));
                Assert.Equal(1, n2.BadFrames);
            }
        }
    }

    /// <summary>The hub fans a packet out to every subscribed member with no allocation per packet (the PUB header is
    /// encoded once per address and gathered with the payload into each member's send queue) and each member gets every
    /// packet once, in order, in far fewer socket writes than packets.</summary>
    [Fact]
    public async Task FanningPacketsOutToMembersAllocatesNothingPerPacketAndBatchesWrites()
    {
        var hub = new TcpFanoutNativeNet(new IPEndPoint(IPAddress.Loopback, 0), poolSize: 2);
        await using var hubOwner = hub;
        var loop = new QueuedLoop();
        hub.Bind(new NoUpcalls(), loop);
        var channel = hub.AllocateChannel(SessionName.Parse("bfed://1/x/1"), 0, ChannelDirection.Down)!;
        Assert.Equal("fanout/0", channel.Address);
        const int Members = 3;
        const int Count = 13_000;
        var counts = new int[Members];
        var inOrder = new bool[Members];
        var members = new List<(FramedConnection Connection, Task Run)>();
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        for (int k = 0; k < Members; k++)
        {
            int index = k;
            inOrder[k] = true;
            var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            await socket.ConnectAsync(hub.Endpoint);
            var member = new FramedConnection(socket, PeerCodec.MaxFrameBytes);
            var run = member.RunAsync(new FrameSpanHandler(frame =>
            {
                int expected = counts[index];
                inOrder[index] &= frame[0] == TcpFanoutNativeNet.Pub && BinaryPrimitives.ReadInt32LittleEndian(frame[^100..]) == expected;
                counts[index] = expected + 1;
            }), cts.Token);
            member.TrySend(TcpFanoutNativeNet.Encode(TcpFanoutNativeNet.Sub, "fanout/0"));
            members.Add((member, run));
        }

        // Three connections posted themselves, then three SUBs: run them on this thread (the gateway's, in a runtime).
        for (int i = 0; i < 500 && loop.Ran < 2 * Members; i++)
        {
            loop.RunAll();
            await Task.Delay(10);
        }

        Assert.Equal(2 * Members, loop.Ran);
        var packet = new byte[100];
        // In bursts of 500, each left to drain (no await: the allocation counter is this thread's), so the pipes reuse
        // their pooled segments rather than outrun the sockets and rent more.
        void Send(int from, int to)
        {
            for (int burst = from; burst < to; burst += 500)
            {
                for (int i = burst; i < burst + 500; i++)
                {
                    BinaryPrimitives.WriteInt32LittleEndian(packet, i);
                    hub.SendData(channel, packet);
                }

                for (int spins = 0; spins < 10_000 && counts.Any(c => Volatile.Read(ref c) < burst + 500); spins++)
                {
                    Thread.Sleep(1);
                }
            }
        }

        Send(0, 1_000); // warm-up: the pipes' segments
        long before = GC.GetAllocatedBytesForCurrentThread();
        Send(1_000, Count);
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;

        Assert.All(counts, c => Assert.Equal(Count, c));
        Assert.All(inOrder, Assert.True);
        // 12,000 packets to 3 members: no array per packet (before: one 111-byte array each, 136 B a packet, 1.6 MB in
        // all, measured). The pipes rent 64 KiB segments (about 60 here) from the shared array pool, which misses now and
        // then when other threads hold its arrays, and then allocates exactly one 65,536-byte array (65,560 B with its
        // header; seen 0 to 4 times a run). So: at most 8 such misses, and under 1 B a packet besides.
        const long SegmentMiss = 65_536 + 24;
        output.WriteLine($"{allocated} bytes allocated fanning out {Count - 1_000} packets of 100 B to {Members} members: {allocated / SegmentMiss} pool misses and {allocated % SegmentMiss} B");
        Assert.True(allocated / SegmentMiss <= 8 && allocated % SegmentMiss < Count - 1_000, $"{allocated} bytes allocated fanning out {Count - 1_000} packets to {Members} members");
        var (sent, dropped, writes) = hub.MemberSends();
        output.WriteLine($"{sent:N0} packets queued to members in {writes:N0} socket writes, {dropped} dropped");
        Assert.Equal((long)Count * Members, sent);
        Assert.Equal(0, dropped);
        Assert.True(writes < sent / 4, $"{writes} socket writes for {sent} packets");
        foreach (var (connection, run) in members)
        {
            connection.Close();
            await run;
            await connection.DisposeAsync();
        }
    }

    private sealed class QueuedLoop : INativeNetLoop
    {
        private readonly System.Collections.Concurrent.ConcurrentQueue<Action> _actions = new();

        public int Ran { get; private set; }

        public bool TryPost(Action action)
        {
            _actions.Enqueue(action);
            return true;
        }

        public bool TryPostData(NativeChannel channel, ReadOnlySpan<byte> data) => false;

        public void RunAll()
        {
            while (_actions.TryDequeue(out var action))
            {
                action();
                Ran++;
            }
        }
    }

    private sealed class NoUpcalls : INativeNetUpcalls
    {
        public void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data)
        {
        }

        public void RecvdJoinRequest(JoinRequest request)
        {
        }

        public void RecvdLeaveRequest(SessionName session)
        {
        }
    }
}
