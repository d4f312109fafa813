using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Tests;

/// <summary>Nodes with their own cores in one process, over real loopback UDP and IP multicast, with an embedded GMS.
/// Correctness only; the timeouts are hang guards.</summary>
public sealed class NodeTests
{
    /// <summary>Loopback test options: a short token interval and GMS batch, a random multicast pool (shared with AerGroupNodeTests).</summary>
    internal static QuickSilverNodeOptions Options(NetAddress gms, bool embedded) => new()
    {
        Gms = gms,
        EmbeddedGms = embedded,
        Region = new() { TokenInterval = TimeSpan.FromMilliseconds(100) },
        GmsServer = new GmsOptions
        {
            BatchInterval = TimeSpan.FromMilliseconds(20),
            MulticastPoolStart = new NetAddress(0xEFFC0000u | ((uint)Random.Shared.Next(1, 200) << 8), (ushort)Random.Shared.Next(20000, 60000)),
        },
    };

    internal static NetAddress FreeGmsAddress() => NetAddress.Loopback((ushort)Random.Shared.Next(30000, 60000));

    [Fact]
    public async Task The_embedded_GMS_answers_a_public_snapshot_and_a_node_without_one_refuses()
    {
        var gms = FreeGmsAddress();
        await using var a = await QuickSilverNode.StartAsync(Options(gms, embedded: true));
        await using var b = await QuickSilverNode.StartAsync(Options(gms, embedded: false));
        await a.JoinGroupAsync("prices/all");
        await b.JoinGroupAsync("prices/all");
        await b.JoinGroupAsync("prices/tech");
        GmsSnapshot snapshot;
        var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(30);
        do
        {
            snapshot = await a.GetGmsSnapshotAsync();
            await Task.Delay(20);
        }
        while ((snapshot.Groups < 2 || snapshot.GroupsByName["prices/all"].Members < 2) && DateTime.UtcNow < deadline);

        Assert.Equal(2, snapshot.Nodes);
        Assert.Equal(2, snapshot.Groups);
        Assert.Equal(2, snapshot.Regions); // {all} and {all, tech}
        Assert.Equal((2, 2), (snapshot.GroupsByName["prices/all"].Regions, snapshot.GroupsByName["prices/all"].Members));
        Assert.Equal(1, snapshot.GroupsByName["prices/tech"].Members);
        await Assert.ThrowsAsync<InvalidOperationException>(() => b.GetGmsSnapshotAsync());
    }

    [Fact]
    public async Task Every_member_of_overlapping_groups_gets_every_message_in_order()
    {
        const int Messages = 20_000;
        var gms = FreeGmsAddress();
        await using var publisher = await QuickSilverNode.StartAsync(Options(gms, embedded: true));
        var receivers = new List<QuickSilverNode>();
        try
        {
            for (int i = 0; i < 3; i++)
            {
                receivers.Add(await QuickSilverNode.StartAsync(Options(gms, embedded: false)));
            }

            // publisher and receiver 0 and 2 are in {all, tech}; receiver 1 only in {all}: two regions of overlap.
            var pubAll = await publisher.JoinGroupAsync("prices/all");
            await publisher.JoinGroupAsync("prices/tech");
            var groups = new List<QuickSilverGroup>();
            for (int i = 0; i < 3; i++)
            {
                groups.Add(await receivers[i].JoinGroupAsync("prices/all"));
                if (i != 1)
                {
                    await receivers[i].JoinGroupAsync("prices/tech");
                }
            }

            // Wait until the publisher's view of "all" covers every receiver (two regions).
            var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(30);
            while ((pubAll.View?.RegionCount ?? 0) < 2 && DateTime.UtcNow < deadline)
            {
                await Task.Delay(20);
            }

            Assert.Equal(2, pubAll.View!.RegionCount);
            foreach (var g in groups)
            {
                g.QueueMessages = false;
            }

            var orderOk = groups.Select(_ => true).ToArray();
            for (int i = 0; i < groups.Count; i++)
            {
                int index = i;
                long expected = 1;
                groups[i].OnMessage = (_, _, payload) =>
                {
                    if (BitConverter.ToInt32(payload) != expected++)
                    {
                        orderOk[index] = false;
                    }
                };
            }

            var payload = new byte[100];
            for (int n = 1; n <= Messages; n++)
            {
                BitConverter.TryWriteBytes(payload, n);
                await pubAll.PublishAsync(payload);
            }

            deadline = DateTime.UtcNow + TimeSpan.FromMinutes(3);
            while (groups.Any(g => g.Delivered < Messages) && DateTime.UtcNow < deadline)
            {
                await Task.Delay(50);
            }

            Assert.All(groups, g => Assert.Equal(Messages, g.Delivered));
            Assert.All(orderOk, Assert.True);
        }
        finally
        {
            foreach (var r in receivers)
            {
                await r.DisposeAsync();
            }
        }
    }

    [Fact]
    public async Task Misuse_raises_specific_errors()
    {
        var gms = FreeGmsAddress();
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        await using var node = await QuickSilverNode.StartAsync(Options(gms, embedded: true), cts.Token);
        var group = await node.JoinGroupAsync("x", cts.Token);
        Assert.Throws<ArgumentException>(() => group.TryPublish(new byte[100_000]));
        await Assert.ThrowsAsync<InvalidOperationException>(() => node.JoinGroupAsync("x"));
        await group.LeaveAsync();
        var e = Assert.Throws<InvalidOperationException>(() => group.TryPublish(new byte[10]));
        Assert.Contains("left", e.Message, StringComparison.Ordinal);
        e = await Assert.ThrowsAsync<InvalidOperationException>(() => group.LeaveAsync());
        Assert.Contains("not in group 'x'", e.Message, StringComparison.Ordinal);
        var longName = await Assert.ThrowsAsync<ArgumentException>(() => node.JoinGroupAsync(new string('n', QuickSilverNode.MaxGroupNameBytes + 1)));
        Assert.Contains("MaxGroupNameBytes", longName.Message, StringComparison.Ordinal);
        var bad = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { Gms = NetAddress.Loopback(0) }.Validate());
        Assert.Contains("Gms", bad.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_GMS_limits_reach_the_application_as_specific_errors()
    {
        var gms = FreeGmsAddress();
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        var withGms = Options(gms, embedded: true);
        withGms = withGms with { GmsServer = withGms.GmsServer with { MaxNodes = 2, MaxGroupsPerNode = 2, MaxGroupNameBytes = 8 } };
        await using var a = await QuickSilverNode.StartAsync(withGms, cts.Token); // the embedded GMS's own node is one
        await using var b = await QuickSilverNode.StartAsync(Options(gms, embedded: false), cts.Token);

        var full = await Assert.ThrowsAsync<GmsRefusedException>(() => QuickSilverNode.StartAsync(Options(gms, embedded: false), cts.Token));
        Assert.Equal((GmsRefusal.TooManyNodes, 2L), (full.Reason, full.Limit));
        Assert.Contains("GmsOptions.MaxNodes", full.Message, StringComparison.Ordinal);

        var name = await Assert.ThrowsAsync<GmsRefusedException>(() => b.JoinGroupAsync("123456789", cts.Token)); // 9 bytes
        Assert.Equal((GmsRefusal.GroupNameTooLong, "123456789"), (name.Reason, name.GroupName));
        var g1 = await b.JoinGroupAsync("g1", cts.Token);
        await b.JoinGroupAsync("g2", cts.Token);
        var many = await Assert.ThrowsAsync<GmsRefusedException>(() => b.JoinGroupAsync("g3", cts.Token));
        Assert.Equal((GmsRefusal.TooManyGroups, 2L), (many.Reason, many.Limit));

        // A refused join leaves nothing behind: once the node has room, the same name joins.
        await g1.LeaveAsync();
        var g3 = await b.JoinGroupAsync("g3", cts.Token);
        Assert.NotNull(g3.View);
    }

    [Fact]
    public async Task A_pull_feed_delivers_in_order_and_garbage_from_a_peer_is_dropped_and_counted()
    {
        const int Messages = 5_000;
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        await using var pair = await NodePair.StartAsync("feed", cts.Token);
        var (receiver, pub, sub) = (pair.B, pair.GroupA, pair.GroupB);

        // A peer that sends garbage: random bytes, a truncated QSM data header, an empty datagram.
        using (var garbage = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp))
        {
            var target = new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, receiver.Address.Port);
            var random = new Random(5);
            for (int i = 0; i < 200; i++)
            {
                var bytes = new byte[random.Next(0, 300)];
                random.NextBytes(bytes);
                garbage.SendTo(bytes, target);
            }
        }

        var order = new List<int>();
        sub.QueueMessages = false;
        sub.OnMessage = (_, _, payload) => order.Add(BitConverter.ToInt32(payload));
        int next = 1;
        using var channel = pub.RegisterFeed(new DelegateFeed(() =>
        {
            if (next > Messages)
            {
                return null;
            }

            var bytes = new byte[64];
            BitConverter.TryWriteBytes(bytes, next++);
            return bytes;
        }));
        Assert.Throws<InvalidOperationException>(() => pub.RegisterFeed(new DelegateFeed(() => null)));
        while (sub.Delivered < Messages && !cts.IsCancellationRequested)
        {
            await Task.Delay(20);
        }

        Assert.True(sub.Delivered == Messages, $"{sub.Delivered} of {Messages} delivered; {await pair.DescribeAsync()}");
        Assert.Equal(Enumerable.Range(1, Messages), await receiver.Core.InvokeAsync(() => order.ToList()));
        long dropped = await receiver.Core.InvokeAsync(() => receiver.Core.Counters.Drops.Total + receiver.Stack.Drops.Total
            + receiver.Groups.Drops.Total + (receiver.Stack.Get<RegionLayer>().Member?.Drops.Total ?? 0) + receiver.Stack.Get<ReliableUnicast>().Drops.Total);
        Assert.True(dropped > 0, "the garbage datagrams were not counted as drops");
    }

    [Fact]
    public async Task Rate_control_state_is_published_on_the_Qsm_meter()
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(1));
        await using var pair = await NodePair.StartAsync("metered", cts.Token);
        await pair.GroupA.PublishAsync(new byte[100], cts.Token);
        while (pair.GroupB.Delivered < 1)
        {
            await Task.Delay(20, cts.Token);
        }

        // The same state, as text for diagnostics: the publisher's sender numbered one packet, the receiver delivered it.
        Assert.Contains("last 1,", await pair.A.DescribeAsync(), StringComparison.Ordinal);
        Assert.Contains($"sender {pair.A.Id}: delivered 1,", await pair.B.DescribeAsync(), StringComparison.Ordinal);

        string node = pair.A.Address.ToString();
        var seen = new Dictionary<string, double>();
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == QsmCounters.MeterName)
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<double>((instrument, value, tags, _) =>
        {
            foreach (var tag in tags)
            {
                if (tag.Key == "node" && Equals(tag.Value, node))
                {
                    seen[instrument.Name] = value;
                }
            }
        });
        listener.Start();
        listener.RecordObservableInstruments();
        Assert.True(seen.TryGetValue("qs.qsm.target_rate", out var target) && target >= 1000, $"μ_snd not published: {string.Join(", ", seen)}");
        Assert.True(seen.ContainsKey("qs.qsm.alpha") && seen.ContainsKey("qs.qsm.credits") && seen.ContainsKey("qs.qsm.reported_loss"));
    }

    /// <summary>Two nodes (the first with the embedded GMS) in one group, once each sees the other in its region: the
    /// publisher's too, since a message is owed to a receiver only once the publisher's view includes it (a test that
    /// waited for the receiver's view alone sometimes published into the publisher's older view, alone, and the
    /// receiver, rightly, started after that message).</summary>
    private sealed class NodePair : IAsyncDisposable
    {
        private NodePair(QuickSilverNode a, QuickSilverNode b, QuickSilverGroup groupA, QuickSilverGroup groupB)
            => (A, B, GroupA, GroupB) = (a, b, groupA, groupB);

        public QuickSilverNode A { get; }
        public QuickSilverNode B { get; }
        public QuickSilverGroup GroupA { get; }
        public QuickSilverGroup GroupB { get; }

        public static async Task<NodePair> StartAsync(string group, CancellationToken cancellationToken, Func<QuickSilverNodeOptions, QuickSilverNodeOptions>? configure = null)
        {
            var gms = FreeGmsAddress();
            configure ??= o => o;
            var a = await QuickSilverNode.StartAsync(configure(Options(gms, embedded: true)), cancellationToken);
            var b = await QuickSilverNode.StartAsync(configure(Options(gms, embedded: false)), cancellationToken);
            var pair = new NodePair(a, b, await a.JoinGroupAsync(group, cancellationToken), await b.JoinGroupAsync(group, cancellationToken));
            while ((b.Stack.Get<RegionLayer>().Member?.View?.Count ?? 0) < 2 || (a.Stack.Get<RegionLayer>().Member?.View?.Count ?? 0) < 2
                   || (pair.GroupA.View?.RegionCount ?? 0) == 0)
            {
                await Task.Delay(20, cancellationToken);
            }

            return pair;
        }

        public async ValueTask DisposeAsync()
        {
            await B.DisposeAsync();
            await A.DisposeAsync();
        }

        /// <summary>The protocol state of both nodes, for a failure message (a stalled transfer says where it stalled).</summary>
        public async Task<string> DescribeAsync() => $"A: {await A.DescribeAsync()} || B: {await B.DescribeAsync()}";
    }

    private sealed class DelegateFeed(Func<byte[]?> next) : Core.Feeds.IFeed<ReadOnlyMemory<byte>>
    {
        public bool TryPull(out ReadOnlyMemory<byte> item)
        {
            var bytes = next();
            item = bytes;
            return bytes is not null;
        }
    }

    [Fact]
    public async Task A_node_logs_through_the_logger_in_its_options()
    {
        // A malformed reliable-unicast datagram (a ReliableData header with a truncated body) is dropped, counted and
        // reported through QuickSilverNodeOptions.LoggerFactory (here with Serilog as the provider), not the global logger.
        var sink = new CollectingSink();
        var logger = new Serilog.LoggerConfiguration().MinimumLevel.Debug().WriteTo.Sink(sink).CreateLogger();
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(1));
        await using var node = await QuickSilverNode.StartAsync(Options(FreeGmsAddress(), embedded: true) with { LoggerFactory = new Serilog.Extensions.Logging.SerilogLoggerFactory(logger) }, cts.Token);
        var junk = new byte[Core.Wire.PacketHeader.Size + 3];
        new Core.Wire.PacketHeader(ReliableWire.DataType, 99, (ushort)junk.Length).Write(junk);
        using (var socket = new System.Net.Sockets.Socket(System.Net.Sockets.AddressFamily.InterNetwork, System.Net.Sockets.SocketType.Dgram, System.Net.Sockets.ProtocolType.Udp))
        {
            socket.SendTo(junk, node.Address.ToIPEndPoint());
        }

        while (!sink.Contains("malformed") && !cts.IsCancellationRequested)
        {
            await Task.Delay(20);
        }

        Assert.True(sink.Contains("malformed"), $"nothing about the malformed datagram was logged; got: {sink}");
        Assert.True(await node.Core.InvokeAsync(() => node.Stack.Get<ReliableUnicast>().Drops.Total) > 0);
    }

    private sealed class CollectingSink : Serilog.Core.ILogEventSink
    {
        private readonly System.Collections.Concurrent.ConcurrentQueue<string> _lines = new();

        public void Emit(Serilog.Events.LogEvent logEvent) => _lines.Enqueue(logEvent.RenderMessage(System.Globalization.CultureInfo.InvariantCulture));

        public bool Contains(string text) => _lines.Any(l => l.Contains(text, StringComparison.Ordinal));

        public override string ToString() => string.Join(" | ", _lines);
    }

    [Fact]
    public async Task Nodes_with_ethernet_sized_datagrams_deliver_everything_in_order()
    {
        // MaxDatagramSize = 1,472 (what a LAN deployment sets): packets are packed to 1,472 bytes and control messages
        // larger than that travel as several reliable-unicast segments.
        const int Messages = 5_000;
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        await using var pair = await NodePair.StartAsync("lan", cts.Token, o => o with { MaxDatagramSize = 1472 });
        var order = new List<int>();
        pair.GroupB.QueueMessages = false;
        pair.GroupB.OnMessage = (_, _, payload) => order.Add(BitConverter.ToInt32(payload));
        var payload = new byte[200];
        for (int i = 1; i <= Messages; i++)
        {
            BitConverter.TryWriteBytes(payload, i);
            await pair.GroupA.PublishAsync(payload, cts.Token);
        }

        while (pair.GroupB.Delivered < Messages && !cts.IsCancellationRequested)
        {
            await Task.Delay(20);
        }

        Assert.True(pair.GroupB.Delivered == Messages, $"{pair.GroupB.Delivered} of {Messages} delivered; {await pair.DescribeAsync()}");
        Assert.Equal(Enumerable.Range(1, Messages), await pair.B.Core.InvokeAsync(() => order.ToList()));
        Assert.True(await pair.A.Core.InvokeAsync(() => pair.A.Stack.Get<RegionLayer>().Senders.Values.Single().MaxPayload) < 1472);
    }

    [Fact]
    public async Task A_reader_that_does_not_read_for_a_while_loses_nothing_and_then_gets_every_message_in_order()
    {
        // A receive buffer of 64 messages: the reader takes nothing until the node has paused delivery and held packets
        // back; then it reads everything. Nothing may be lost, duplicated or reordered, and the queue stays bounded.
        const int Messages = 5_000;
        const int ReceiveBuffer = 64;
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        await using var pair = await NodePair.StartAsync("slow-reader", cts.Token, o => o with { ReceiveBuffer = ReceiveBuffer });
        pair.GroupA.QueueMessages = false; // the publisher reads nothing itself
        var payload = new byte[100];
        for (int i = 1; i <= Messages; i++)
        {
            BitConverter.TryWriteBytes(payload, i);
            await pair.GroupA.PublishAsync(payload, cts.Token);
        }

        // Delivery pauses at the bound, and packets that arrive afterwards are held, not delivered.
        var member = pair.B.Stack.Get<RegionLayer>().Member!;
        while (await pair.B.Core.InvokeAsync(() => member.DeliveriesRefused) == 0 && pair.GroupB.Delivered < Messages && !cts.IsCancellationRequested)
        {
            await Task.Delay(20);
        }

        int bound = ReceiveBuffer + await pair.B.Core.InvokeAsync(() => pair.B.Groups.MaxRecordsPerPacket);
        Assert.True(pair.GroupB.DeliveryPauses > 0, $"the queue never filled; {await pair.DescribeAsync()}");
        Assert.True(pair.GroupB.QueuedMessages <= bound, $"{pair.GroupB.QueuedMessages} messages queued, bound {bound}");
        Assert.True(pair.GroupB.Delivered < Messages, "everything was delivered although nobody read");

        var numbers = new List<int>();
        await foreach (var m in pair.GroupB.ReadAllAsync(cts.Token))
        {
            Assert.True(pair.GroupB.QueuedMessages <= bound, $"{pair.GroupB.QueuedMessages} messages queued, bound {bound}");
            numbers.Add(BitConverter.ToInt32(m.Payload));
            if (numbers.Count == Messages)
            {
                break;
            }
        }

        Assert.Equal(Enumerable.Range(1, Messages), numbers);
        Assert.Equal(Messages, pair.GroupB.Delivered);
        Assert.Equal(0, pair.GroupB.QueuedMessages);
        Assert.Equal(0, await pair.B.Core.InvokeAsync(() => pair.B.Groups.PausedGroups));
        Assert.True(pair.GroupB.DeliveryPauses > 1, $"delivery paused only {pair.GroupB.DeliveryPauses} time(s)");
    }

    [Fact]
    public async Task Typed_messages_round_trip_through_the_MessagePack_wrapper()
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(1));
        await using var pair = await NodePair.StartAsync("quotes", cts.Token);
        var (ga, gb) = (pair.GroupA, pair.GroupB);

        var codec = new Core.Wire.MessagePackObjectCodec<Quote>(300);
        await ga.PublishAsync(codec, new Quote("QSM", 42.5m), cts.Token);
        await foreach (var m in gb.ReadAllAsync(cts.Token))
        {
            Assert.Equal(Core.Wire.WireError.None, m.TryRead(codec, out var quote));
            Assert.Equal(new Quote("QSM", 42.5m), quote);
            Assert.Equal(Core.Wire.WireError.UnknownClassId, m.TryRead(new Core.Wire.MessagePackObjectCodec<Quote>(301), out _));
            Assert.Equal(Core.Wire.WireError.None, TypedMessages.TryRead(m.Payload.AsSpan(), codec, out var fromSpan)); // what an OnMessage handler decodes
            Assert.Equal(quote, fromSpan);
            break;
        }
    }
}

[MessagePack.MessagePackObject]
public sealed record Quote([property: MessagePack.Key(0)] string Symbol, [property: MessagePack.Key(1)] decimal Price);
