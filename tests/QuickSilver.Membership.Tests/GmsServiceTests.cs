using QuickSilver.Core.Stack;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership.Service;

namespace QuickSilver.Membership.Tests;

public sealed class GmsServiceTests
{
    private static readonly NetAddress GmsAddress = NetAddress.Loopback(7000);
    private static readonly GmsOptions Options = new()
    {
        BatchInterval = TimeSpan.FromMilliseconds(100),
        HeartbeatInterval = TimeSpan.FromMilliseconds(500),
        FailureTimeout = TimeSpan.FromSeconds(3),
    };

    private sealed class Cluster
    {
        public VirtualWorld World { get; } = new();
        public GmsServer Server { get; set; }
        public List<(NetAddress Address, GmsClient Client)> Nodes { get; } = new();

        public Cluster(int nodes, ulong epoch = 1)
        {
            Server = new GmsServer(World, World.Channel(GmsAddress), epoch, Options);
            for (int i = 0; i < nodes; i++)
            {
                var address = NetAddress.Loopback((ushort)(8000 + i));
                var client = new GmsClient(World, World.Channel(address), GmsAddress, (ulong)(100 + i));
                client.Start();
                Nodes.Add((address, client));
            }
        }

        public GmsClient this[int i] => Nodes[i].Client;

        public void Settle() => World.RunFor(TimeSpan.FromSeconds(1));
    }

    [Fact]
    public void Nodes_register_join_and_agree_with_the_servers_views()
    {
        var c = new Cluster(4);
        Assert.True(c.World.RunUntil(() => c.Nodes.All(n => n.Client.IsRegistered), TimeSpan.FromSeconds(5)));
        c[0].Join("prices/tech");
        c[1].Join("prices/tech");
        c[1].Join("prices/energy");
        c[2].Join("prices/energy");
        c[3].Join("prices/tech");
        c.Settle();

        foreach (var (_, client) in c.Nodes)
        {
            foreach (var view in client.Groups)
            {
                var server = c.Server.State.GroupViewOf(view.Group);
                Assert.Equal(server.ViewNumber, view.ViewNumber);
                Assert.Equal(server, view);
                foreach (var rr in view.Regions)
                {
                    var region = client.FindRegion(rr.Region);
                    Assert.NotNull(region);
                    Assert.Equal(c.Server.State.RegionViewOf(rr.Region), region);
                }
            }
        }

        Assert.Equal(2, c[1].Groups.Count());
        Assert.Equal(3, c[0].FindGroup("prices/tech")!.Regions.Sum(r => c[0].FindRegion(r.Region)!.Count));
    }

    [Fact]
    public void An_update_larger_than_one_control_message_arrives_in_parts()
    {
        var c = new Cluster(3);
        c.World.MaxMessageBytes = 2_000; // a few dozen group views per message
        Assert.True(c.World.RunUntil(() => c.Nodes.All(n => n.Client.IsRegistered), TimeSpan.FromSeconds(5)));
        var groups = Enumerable.Range(0, 300).Select(g => $"topic/{g}").ToList();
        foreach (var (_, client) in c.Nodes)
        {
            groups.ForEach(client.Join);
        }

        c.Settle();
        foreach (var (_, client) in c.Nodes)
        {
            Assert.Equal(300, client.Groups.Count());
            Assert.All(client.Groups, v => Assert.Equal(c.Server.State.GroupViewOf(v.Group), v));
            Assert.All(client.Groups.SelectMany(v => v.Regions), r => Assert.NotNull(client.FindRegion(r.Region)));
        }
    }

    [Fact]
    public void Requests_within_one_batch_interval_are_applied_as_one_batch()
    {
        var c = new Cluster(3);
        c.Settle();
        long before = c.Server.BatchesApplied;
        for (int g = 0; g < 100; g++)
        {
            foreach (var (_, client) in c.Nodes)
            {
                client.Join($"g{g}");
            }
        }

        c.Settle();
        Assert.Equal(before + 1, c.Server.BatchesApplied);
        Assert.Equal(1, c.Server.State.RegionCount);
        Assert.Equal(100, c[2].Groups.Count());
    }

    [Fact]
    public void A_silent_node_is_declared_dead_and_removed_from_every_view()
    {
        var c = new Cluster(3);
        c.Settle();
        foreach (var (_, client) in c.Nodes)
        {
            client.Join("g");
        }

        c.Settle();
        var crashed = c.Nodes[2];
        var crashedId = crashed.Client.Node!.Value;
        c.World.CutOff(crashed.Address);

        Assert.True(c.World.RunUntil(() => !c.Server.State.IsAlive(crashedId), Options.FailureTimeout * 2));
        c.Settle();
        var view = c[0].FindGroup("g")!;
        Assert.DoesNotContain(view.Regions.SelectMany(r => c[0].FindRegion(r.Region)!.Members), m => m.Node == crashedId);
        Assert.Equal(2, view.Regions.Sum(r => c[0].FindRegion(r.Region)!.Count));
        Assert.True(c.Server.FailuresDetected >= 1);
    }

    [Fact]
    public void A_node_that_loses_the_GMS_keeps_its_views_then_rejoins_a_restarted_GMS()
    {
        var c = new Cluster(2, epoch: 1);
        c.Settle();
        c[0].Join("a");
        c[1].Join("a");
        c.Settle();
        var before = c[0].FindGroup("a");
        Assert.NotNull(before);

        // The GMS process dies: clients hear of it, keep their views meanwhile.
        c.World.CutOff(GmsAddress);
        c.World.RunFor(TimeSpan.FromSeconds(3));
        Assert.False(c[0].IsRegistered);
        Assert.Same(before, c[0].FindGroup("a"));

        // A new GMS incarnation at the same address: clients register again and re-join on their own.
        c.World.Restore(GmsAddress);
        c.Server = new GmsServer(c.World, c.World.Channel(GmsAddress), 2, Options);
        Assert.True(c.World.RunUntil(() => c.Nodes.All(n => n.Client.IsRegistered && n.Client.Epoch == 2), TimeSpan.FromSeconds(5)));

        // Their Hellos named epoch 1, so the new GMS holds the joins for its restart grace, then applies them together.
        Assert.Equal(1, c.Server.RestartGraces);
        Assert.Same(before, c[0].FindGroup("a"));
        Assert.True(c.World.RunUntil(() => c.Nodes.All(n => n.Client.ViewsEpoch == 2), Options.RestartGrace + TimeSpan.FromSeconds(5)));
        c.Settle();
        var after = c[0].FindGroup("a")!;
        Assert.NotSame(before, after);
        Assert.Equal(1u, after.ViewNumber); // both joins in the first batch of the new epoch
        Assert.Equal(2, after.Regions.Sum(r => c[0].FindRegion(r.Region)!.Count));
        Assert.Equal(c.Server.State.FindGroup("a"), after);
    }

    [Fact]
    public void A_node_that_said_goodbye_stays_gone_when_the_GMS_answers()
    {
        var c = new Cluster(2);
        Assert.True(c.World.RunUntil(() => c.Nodes.All(n => n.Client.IsRegistered), TimeSpan.FromSeconds(5)));
        c[0].Join("prices/tech");
        c[1].Join("prices/tech");
        c.Settle();
        c[0].Stop();
        c.Settle();
        // A late message to the stopped node (here the GMS's "register again", which it sends to any node it no longer
        // knows that is still talking) must not make it register again.
        c.World.Inject(GmsAddress, c.Nodes[0].Address, GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Bye }));
        c.Settle();
        c.Settle();

        Assert.False(c[0].IsRegistered);
        Assert.Equal(1, c.Server.State.NodeCount);
        Assert.Equal(1, c[1].FindGroup("prices/tech")!.Regions.Sum(r => c[1].FindRegion(r.Region)!.Count));
    }

    [Fact]
    public void A_node_declared_dead_by_mistake_registers_again_and_rejoins()
    {
        var c = new Cluster(2);
        c.Settle();
        c[0].Join("x");
        c[1].Join("x");
        c.Settle();
        var oldId = c[1].Node!.Value;

        // A partition long enough for the failure detector, then healed.
        c.World.CutOff(c.Nodes[1].Address);
        Assert.True(c.World.RunUntil(() => !c.Server.State.IsAlive(oldId), TimeSpan.FromSeconds(10)));
        c.World.Restore(c.Nodes[1].Address);

        Assert.True(c.World.RunUntil(() => c[1].IsRegistered && c[1].Node != oldId, TimeSpan.FromSeconds(10)));
        c.Settle();
        Assert.Equal(2, c[0].FindGroup("x")!.Regions.Sum(r => c[0].FindRegion(r.Region)!.Count));
    }

    [Fact]
    public void Malformed_control_messages_are_dropped_and_counted()
    {
        var c = new Cluster(1);
        c.Settle();
        var random = new Random(7);
        for (int i = 0; i < 500; i++)
        {
            var junk = new byte[random.Next(0, 200)];
            random.NextBytes(junk);
            c.World.Inject(NetAddress.Loopback(9999), GmsAddress, junk);
            c.World.Inject(GmsAddress, c.Nodes[0].Address, junk);
        }

        c.World.Inject(NetAddress.Loopback(9999), GmsAddress, new byte[Options.MaxMessageBytes + 1]);
        c.Settle();
        Assert.True(c.Server.Drops[DropReason.Malformed] > 400, $"server counted {c.Server.Drops[DropReason.Malformed]}");
        Assert.True(c[0].Drops[DropReason.Malformed] > 400, $"client counted {c[0].Drops[DropReason.Malformed]}");
        Assert.True(c[0].IsRegistered);
    }

    [Fact]
    public void Bad_options_name_the_option()
    {
        var world = new VirtualWorld();
        var e = Assert.Throws<ArgumentOutOfRangeException>(() =>
            new GmsServer(world, world.Channel(GmsAddress), 1, new GmsOptions { FailureTimeout = TimeSpan.FromMilliseconds(600) }));
        Assert.Contains("FailureTimeout", e.Message, StringComparison.Ordinal);
        var e2 = Assert.Throws<ArgumentException>(() =>
            new GmsServer(world, world.Channel(GmsAddress), 1, new GmsOptions { MulticastPoolStart = NetAddress.Loopback(1) }));
        Assert.Contains("MulticastPoolStart", e2.Message, StringComparison.Ordinal);
    }
}

public sealed class GmsOverReliableUnicastTests
{
    [Fact]
    public void Thirty_nodes_in_simulation_join_overlapping_groups_and_agree_after_a_crash()
    {
        var net = new QuickSilver.Transport.Simulation.SimNetwork(21, new QuickSilver.Transport.Simulation.LinkOptions { LossRate = 0.02 });
        var gmsNode = net.AddNode();
        var gmsTransport = gmsNode.Open(7000);
        var server = new StackBuilder(gmsTransport, gmsNode).Add(new QuickSilver.Transport.Reliable.ReliableUnicast(1)).Add(new GmsServerLayer(1)).Build()
            .Get<GmsServerLayer>().Server;

        var clients = new List<(QuickSilver.Transport.Simulation.SimNode Node, GmsClient Client)>();
        for (int i = 0; i < 30; i++)
        {
            var node = net.AddNode();
            var transport = node.Open(7000);
            var client = new StackBuilder(transport, node).Add(new QuickSilver.Transport.Reliable.ReliableUnicast((uint)(100 + i)))
                .Add(new MembershipLayer(gmsTransport.LocalAddress, (ulong)(1000 + i))).Build().Get<MembershipLayer>().Client; // registers at once
            client.Join(i % 2 == 0 ? "even" : "odd");
            client.Join("all");
            clients.Add((node, client));
        }

        Assert.True(net.RunUntil(() => clients.All(c => c.Client.FindGroup("all")?.Regions.Sum(r => c.Client.FindRegion(r.Region)?.Count ?? 0) == 30),
            TimeSpan.FromSeconds(30)), "seed 21: the nodes never agreed on 30 members of 'all'");
        Assert.Equal(2, server.State.RegionCount);

        var victim = clients[3];
        victim.Node.Crash();
        Assert.True(net.RunUntil(() => clients.Where(c => c != victim).All(c =>
            c.Client.FindGroup("all")!.Regions.Sum(r => c.Client.FindRegion(r.Region)!.Count) == 29), TimeSpan.FromSeconds(30)),
            "seed 21: the crash was not reflected in every view");
    }

    [Fact]
    public void A_node_joining_more_groups_than_its_send_buffer_holds_gets_them_all()
    {
        var (net, client) = ClientWithSmallSendBuffer(22);
        for (int g = 0; g < 200; g++)
        {
            client.Join($"topic/{g}"); // far more than the 64 messages the channel buffers
        }

        Assert.True(net.RunUntil(() => client.Groups.Count() == 200, TimeSpan.FromSeconds(60)),
            $"seed 22: the node has {client.Groups.Count()} of 200 group views");
    }

    [Fact]
    public void Joins_and_leaves_waiting_for_a_full_send_buffer_stay_one_per_group_and_the_last_wish_wins()
    {
        var (net, client) = ClientWithSmallSendBuffer(23);
        for (int g = 0; g < 100; g++)
        {
            client.Join($"topic/{g}"); // fills the 64-segment buffer: the rest wait
        }

        for (int i = 0; i < 10_000; i++)
        {
            client.Join("flip"); // an application flipping one group while the buffer is full
            client.Leave("flip");
        }

        client.Join("flip");
        Assert.True(client.RequestsWaiting <= 101, $"{client.RequestsWaiting} requests wait");
        Assert.True(client.RequestsCoalesced >= 19_999, $"{client.RequestsCoalesced} coalesced");
        Assert.True(net.RunUntil(() => client.Groups.Count() == 101, TimeSpan.FromSeconds(60)),
            $"seed 23: the node has {client.Groups.Count()} of 101 group views");
        Assert.NotNull(client.FindGroup("flip"));
        Assert.Equal(0, client.RequestsWaiting);
    }

    /// <summary>A GMS and one registered node whose reliable channel buffers only 64 segments, in simulation.</summary>
    private static (QuickSilver.Transport.Simulation.SimNetwork Net, GmsClient Client) ClientWithSmallSendBuffer(int seed)
    {
        var net = new QuickSilver.Transport.Simulation.SimNetwork(seed, new QuickSilver.Transport.Simulation.LinkOptions());
        var gmsNode = net.AddNode();
        var gmsTransport = gmsNode.Open(7000);
        new StackBuilder(gmsTransport, gmsNode).Add(new QuickSilver.Transport.Reliable.ReliableUnicast(1)).Add(new GmsServerLayer(1)).Build();

        var node = net.AddNode();
        var transport = node.Open(7000);
        var reliable = new QuickSilver.Transport.Reliable.ReliableUnicast(100,
            new QuickSilver.Transport.Reliable.ReliableUnicastOptions { SendBufferSegments = 64, MaxMessageBytes = 64 * 1384 });
        var client = new StackBuilder(transport, node).Add(reliable).Add(new MembershipLayer(gmsTransport.LocalAddress, 1000)).Build()
            .Get<MembershipLayer>().Client;
        Assert.True(net.RunUntil(() => client.IsRegistered, TimeSpan.FromSeconds(5)));
        return (net, client);
    }
}
