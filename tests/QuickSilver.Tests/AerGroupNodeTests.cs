using System.Buffers.Binary;
using QuickSilver.Core.Feeds;
using QuickSilver.Core.Io;
using Xunit.Abstractions;

namespace QuickSilver.Tests;

/// <summary>AER groups through the public API of <see cref="QuickSilverNode"/>, over real loopback UDP and IP multicast
/// in one process: delivery beside a QSM group with an in-node repair server, and the errors misuse gets. The timeouts
/// are hang guards, not assertions about speed.</summary>
public sealed class AerGroupNodeTests(ITestOutputHelper output)
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(90);

    private static QuickSilverNodeOptions Options(NetAddress gms, bool embedded) => NodeTests.Options(gms, embedded);

    private static NetAddress FreeGmsAddress() => NodeTests.FreeGmsAddress();

    private static NetAddress RandomAerGroup() => new(0xEFFE0000u | (uint)Random.Shared.Next(1, 65535), (ushort)Random.Shared.Next(20000, 60000));

    [Fact]
    public async Task An_AER_group_and_a_QSM_group_over_loopback_deliver_every_message_in_order_with_an_in_node_repair_server()
    {
        const int Messages = 3_000;
        const int QsmMessages = 1_000;
        var gms = FreeGmsAddress();
        var wan = RandomAerGroup();
        const uint Session = 7;
        using var cts = new CancellationTokenSource(Guard);
        await using var source = await QuickSilverNode.StartAsync(Options(gms, embedded: true), cts.Token);
        // The receiver drops 2 % of what arrives (every protocol's datagrams): AER and QSM both repair it.
        await using var receiver = await QuickSilverNode.StartAsync(Options(gms, embedded: false) with { InjectedLossRate = 0.02 }, cts.Token);
        await using var server = await QuickSilverNode.StartAsync(Options(gms, embedded: false) with
        {
            RepairServers = [new AerRepairServerOptions { Session = Session, Group = wan, Source = source.Address, Children = [receiver.Address] }],
        }, cts.Token);

        var lanOut = await source.JoinGroupAsync("lan", cts.Token);
        var lanIn = await receiver.JoinGroupAsync("lan", cts.Token);
        var wanIn = await receiver.JoinGroupAsync("wan", GroupOptions.ForAer(new AerGroupOptions { Session = Session, Group = wan, Source = source.Address }), cts.Token);
        var wanOut = await source.JoinGroupAsync("wan", GroupOptions.ForAer(new AerGroupOptions { Session = Session, Group = wan, Source = source.Address, Children = [server.Address] }), cts.Token);
        Assert.Equal(GroupTransport.Aer, wanOut.Transport);
        Assert.Equal(GroupTransport.Qsm, lanOut.Transport);
        Assert.Null(wanIn.View);
        while (await receiver.GetViewMemberCountAsync(lanIn) < 2 || await source.GetViewMemberCountAsync(lanOut) < 2)
        {
            await Task.Delay(20, cts.Token);
        }

        await Task.Delay(300, cts.Token); // the first SPMs reach the repair server and the receiver

        var readWan = ReadNumbered(wanIn, Messages, cts.Token);
        var readLan = ReadNumbered(lanIn, QsmMessages, cts.Token);
        var payload = new byte[200];
        for (int i = 1; i <= Messages; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(payload, i);
            await wanOut.PublishAsync(payload, cts.Token);
            if (i <= QsmMessages)
            {
                await lanOut.PublishAsync(payload, cts.Token);
            }
        }

        var (wanSenders, wanDisorder) = await readWan;
        var (lanSenders, lanDisorder) = await readLan;
        output.WriteLine(await receiver.DescribeAsync());
        output.WriteLine(await server.DescribeAsync());
        Assert.Equal(0, wanDisorder);
        Assert.Equal(0, lanDisorder);
        Assert.Equal(new[] { AerGroupSession.SourceSender }, wanSenders);
        Assert.Equal(new[] { source.Id }, lanSenders);
        Assert.Equal(Messages, wanIn.Delivered);
        long repairs = await receiver.Core.InvokeAsync(() => receiver.AerGroups.Layer.Counters.RepairsReceived);
        long naksAtServer = await server.Core.InvokeAsync(() => server.AerGroups.Layer.Counters.NaksReceived);
        Assert.True(repairs > 0, "the injected loss never touched the AER group");
        Assert.True(naksAtServer > 0, "the receiver never NAKed the in-node repair server");

        // The same counters on the "QuickSilver.Aer" meter, per node, and the per-session gauges.
        var atReceiver = ReadAerMeters(receiver);
        var atServer = ReadAerMeters(server);
        var atSource = ReadAerMeters(source);
        output.WriteLine(string.Join(", ", atServer.Select(kv => $"{kv.Key}={kv.Value}")));
        Assert.True(atReceiver["qs.aer.naks.sent"] > 0, "qs.aer.naks.sent");
        Assert.True(atReceiver["qs.aer.repairs.received"] >= repairs, "qs.aer.repairs.received");
        Assert.Equal(Messages, atReceiver["qs.aer.delivered"]);
        Assert.True(atServer["qs.aer.naks.received"] >= naksAtServer, "qs.aer.naks.received");
        Assert.True(atServer["qs.aer.cache.bytes|repair-server"] > 0, "qs.aer.cache.bytes at the repair server");
        Assert.True(atSource["qs.aer.data.sent"] >= Messages, "qs.aer.data.sent");
        Assert.True(atSource["qs.aer.cache.bytes|source"] > 0, "qs.aer.cache.bytes at the source");
        Assert.True(atSource["qs.aer.nca.window|source"] >= 1, "qs.aer.nca.window");
        Assert.False(atReceiver.ContainsKey("qs.aer.nca.window|receiver"), "a receiver has no NCA window");
    }

    /// <summary>One reading of <paramref name="node"/>'s "QuickSilver.Aer" instruments through a <see cref="System.Diagnostics.Metrics.MeterListener"/>:
    /// the node-wide counters by name, the per-session gauges as "name|role" (session 7 only).</summary>
    private static Dictionary<string, double> ReadAerMeters(QuickSilverNode node)
    {
        string address = node.Address.ToString();
        var seen = new Dictionary<string, double>();
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == QuickSilverTelemetry.AerMeterName)
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        void Record(System.Diagnostics.Metrics.Instrument instrument, double value, ReadOnlySpan<KeyValuePair<string, object?>> tags)
        {
            string? at = null, role = null;
            long session = -1;
            foreach (var tag in tags)
            {
                switch (tag.Key)
                {
                    case "node": at = tag.Value as string; break;
                    case "role": role = tag.Value as string; break;
                    case "session": session = (long)tag.Value!; break;
                }
            }

            if (at == address && (role is null || session == 7))
            {
                seen[role is null ? instrument.Name : $"{instrument.Name}|{role}"] = value;
            }
        }

        listener.SetMeasurementEventCallback<long>((instrument, value, tags, _) => Record(instrument, value, tags));
        listener.SetMeasurementEventCallback<double>((instrument, value, tags, _) => Record(instrument, value, tags));
        listener.Start();
        listener.RecordObservableInstruments();
        return seen;
    }

    /// <summary>Reads <paramref name="count"/> messages numbered 1..count; returns the senders seen and how many arrived
    /// out of order (sequence or number not the next one).</summary>
    private static async Task<(HashSet<uint> Senders, int Disorder)> ReadNumbered(QuickSilverGroup group, int count, CancellationToken token)
    {
        var senders = new HashSet<uint>();
        int disorder = 0;
        int next = 1;
        await foreach (var message in group.ReadAllAsync(token))
        {
            senders.Add(message.Sender);
            if (BinaryPrimitives.ReadInt32LittleEndian(message.Payload) != next || message.Sequence != (ulong)next)
            {
                disorder++;
            }

            if (++next > count)
            {
                break;
            }
        }

        return (senders, disorder);
    }

    [Fact]
    public async Task Misusing_an_AER_group_gets_specific_errors()
    {
        var gms = FreeGmsAddress();
        var wan = RandomAerGroup();
        using var cts = new CancellationTokenSource(Guard);
        await using var a = await QuickSilverNode.StartAsync(Options(gms, embedded: true), cts.Token);
        await using var b = await QuickSilverNode.StartAsync(Options(gms, embedded: false) with
        {
            RepairServers = [new AerRepairServerOptions { Session = 9, Group = wan, Source = a.Address, Children = [NetAddress.Loopback(9)] }],
        }, cts.Token);
        var options = new AerGroupOptions { Session = 1, Group = wan, Source = a.Address };

        // Bad options name themselves.
        var e = await Assert.ThrowsAsync<ArgumentException>(() => a.JoinGroupAsync("x", new GroupOptions { Transport = GroupTransport.Aer }));
        Assert.Contains("GroupOptions.Aer", e.Message);
        e = await Assert.ThrowsAsync<ArgumentException>(() => a.JoinGroupAsync("x", new GroupOptions { Aer = options }));
        Assert.Contains("GroupOptions.Transport", e.Message);
        e = await Assert.ThrowsAsync<ArgumentException>(() => a.JoinGroupAsync("x", GroupOptions.ForAer(options with { Group = NetAddress.Loopback(5000) })));
        Assert.Contains("AerGroupOptions.Group", e.Message);
        e = await Assert.ThrowsAsync<ArgumentException>(() => a.JoinGroupAsync("x", GroupOptions.ForAer(options with { Source = wan })));
        Assert.Contains("AerGroupOptions.Source", e.Message);

        // A receiver does not publish: every publishing call says who the source is.
        var received = await b.JoinGroupAsync("wan", GroupOptions.ForAer(options));
        var notSource = Assert.Throws<InvalidOperationException>(() => received.TryPublish([1]));
        Assert.Contains("AerGroupOptions.Source", notSource.Message);
        await Assert.ThrowsAsync<InvalidOperationException>(async () => await received.PublishAsync(new byte[] { 1 }));
        Assert.Throws<InvalidOperationException>(() => received.RegisterFeed(new EmptyFeed()));

        // The source: no empty or oversized messages, one feed.
        var sent = await a.JoinGroupAsync("wan", GroupOptions.ForAer(options));
        Assert.True(sent.MaxMessageBytes > 1000);
        Assert.Throws<ArgumentException>(() => sent.TryPublish([]));
        await Assert.ThrowsAsync<ArgumentException>(async () => await sent.PublishAsync(new byte[sent.MaxMessageBytes + 1]));
        Assert.True(sent.TryPublish(new byte[sent.MaxMessageBytes]));
        using (sent.RegisterFeed(new EmptyFeed()))
        {
            Assert.Throws<InvalidOperationException>(() => sent.RegisterFeed(new EmptyFeed()));
        }

        // A name is one group, QSM or AER; a session is one role per node (b runs session 9's repair server).
        var twice = await Assert.ThrowsAsync<InvalidOperationException>(() => a.JoinGroupAsync("wan"));
        Assert.Contains("already joined group 'wan'", twice.Message);
        await a.JoinGroupAsync("lan", cts.Token);
        await Assert.ThrowsAsync<InvalidOperationException>(() => a.JoinGroupAsync("lan", GroupOptions.ForAer(options with { Session = 2 })));
        await Assert.ThrowsAsync<InvalidOperationException>(() => a.JoinGroupAsync("other", GroupOptions.ForAer(options)));
        var busy = await Assert.ThrowsAsync<InvalidOperationException>(() => b.JoinGroupAsync("nine", GroupOptions.ForAer(options with { Session = 9 })));
        Assert.Contains("RepairServers", busy.Message);

        // Leaving: publishing afterwards and leaving again are errors, as in a QSM group; ReadAllAsync ends.
        await received.LeaveAsync();
        await sent.LeaveAsync();
        Assert.Throws<InvalidOperationException>(() => sent.TryPublish([1]));
        await Assert.ThrowsAsync<InvalidOperationException>(() => sent.LeaveAsync());
        await foreach (var _ in received.ReadAllAsync(cts.Token))
        {
        }

        // The session is free again once left.
        var again = await a.JoinGroupAsync("wan-again", GroupOptions.ForAer(options));
        Assert.Equal(GroupTransport.Aer, again.Transport);
    }

    [Fact]
    public void Bad_repair_server_options_fail_at_start_naming_the_option()
    {
        var wan = RandomAerGroup();
        var ok = new AerRepairServerOptions { Session = 1, Group = wan, Source = NetAddress.Loopback(5000), Children = [NetAddress.Loopback(5001)] };
        new QuickSilverNodeOptions { RepairServers = [ok] }.Validate();
        var e = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { RepairServers = [ok, ok] }.Validate());
        Assert.Contains("QuickSilverNodeOptions.RepairServers", e.Message);
        e = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { RepairServers = [ok with { Children = [] }] }.Validate());
        Assert.Contains("AerRepairServerOptions.Children", e.Message);
        e = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { RepairServers = [ok with { Group = NetAddress.Loopback(1) }] }.Validate());
        Assert.Contains("AerRepairServerOptions.Group", e.Message);
        var range = Assert.Throws<ArgumentOutOfRangeException>(() => new QuickSilverNodeOptions { Aer = new Aer.AerOptions { SpmInterval = TimeSpan.Zero } }.Validate());
        Assert.Contains("SpmInterval", range.Message);
    }

    private sealed class EmptyFeed : IFeed<ReadOnlyMemory<byte>>
    {
        public bool TryPull(out ReadOnlyMemory<byte> item)
        {
            item = default;
            return false;
        }
    }
}
