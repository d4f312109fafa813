using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;
using QuickSilver.Membership.Service;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Membership.Tests;

/// <summary>What a client can make the GMS do is bounded (issue 12, item 4): each limit refuses with an error that names
/// it, the client reports it as a <see cref="GmsRefusedException"/>, and nothing of the request is applied.</summary>
public sealed class GmsLimitsTests
{
    private static readonly NetAddress GmsAddress = NetAddress.Loopback(7000);

    private static GmsOptions Options(GmsOptions? limits = null) => (limits ?? new GmsOptions()) with
    {
        BatchInterval = TimeSpan.FromMilliseconds(100),
        HeartbeatInterval = TimeSpan.FromMilliseconds(500),
        FailureTimeout = TimeSpan.FromSeconds(3),
    };

    private static GmsClient Client(VirtualWorld world, NetAddress address, ulong incarnation)
    {
        var client = new GmsClient(world, world.Channel(address), GmsAddress, incarnation);
        client.Start();
        return client;
    }

    [Fact]
    public void Registrations_beyond_the_node_limits_are_refused_and_the_client_says_which_limit()
    {
        var world = new VirtualWorld();
        var server = new GmsServer(world, world.Channel(GmsAddress), 1, Options(new GmsOptions { MaxNodes = 3, MaxNodesPerIp = 2 }));
        var hostA = Enumerable.Range(0, 3).Select(i => Client(world, new NetAddress(0x0A000001, (ushort)(8000 + i)), (ulong)(100 + i))).ToList();
        world.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.True(hostA[0].IsRegistered && hostA[1].IsRegistered);
        Assert.False(hostA[2].IsRegistered);
        var perIp = Assert.IsType<GmsRefusedException>(hostA[2].RegistrationRefusal);
        Assert.Equal(GmsRefusal.TooManyNodesFromAddress, perIp.Reason);
        Assert.Equal(2, perIp.Limit);
        Assert.Contains("GmsOptions.MaxNodesPerIp", perIp.Message, StringComparison.Ordinal);

        var b = Client(world, new NetAddress(0x0A000002, 8000), 200);
        var c = Client(world, new NetAddress(0x0A000003, 8000), 300);
        world.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.True(b.IsRegistered);
        Assert.False(c.IsRegistered);
        Assert.Equal(GmsRefusal.TooManyNodes, c.RegistrationRefusal!.Reason);
        Assert.Contains("GmsOptions.MaxNodes", c.RegistrationRefusal.Message, StringComparison.Ordinal);
        Assert.Equal(3, server.State.NodeCount);
        Assert.True(server.Refusals(GmsRefusal.TooManyNodes) >= 1 && server.Refusals(GmsRefusal.TooManyNodesFromAddress) >= 1);

        // A node leaves: the refused ones keep asking, and one of them gets in.
        hostA[0].Stop();
        Assert.True(world.RunUntil(() => hostA[2].IsRegistered || c.IsRegistered, TimeSpan.FromSeconds(3)));
        Assert.Equal(3, server.State.NodeCount);
        Assert.True(hostA[2].IsRegistered ? hostA[2].RegistrationRefusal is null : c.RegistrationRefusal is null);
    }

    [Fact]
    public void Joins_beyond_the_groups_per_node_or_with_names_too_long_in_UTF8_bytes_are_refused_and_not_applied()
    {
        var world = new VirtualWorld();
        var server = new GmsServer(world, world.Channel(GmsAddress), 1, Options(new GmsOptions { MaxGroupsPerNode = 5, MaxGroupNameBytes = 16 }));
        var client = Client(world, NetAddress.Loopback(8000), 100);
        var refused = new List<(string Group, GmsRefusedException Error)>();
        client.JoinRefused += (group, error) => refused.Add((group, error));
        Assert.True(world.RunUntil(() => client.IsRegistered, TimeSpan.FromSeconds(1)));

        for (int g = 0; g < 7; g++)
        {
            client.Join($"g{g}");
        }

        client.Join(new string('é', 8));  // 16 UTF-8 bytes: at the limit, but the node already asked for 7 groups
        client.Join(new string('é', 9));  // 18 UTF-8 bytes in 9 characters
        world.RunFor(TimeSpan.FromSeconds(1));

        Assert.Equal(5, client.Groups.Count());
        Assert.Equal(5, server.State.GroupsOf(client.Node!.Value).Count);
        Assert.Equal(["g5", "g6", new string('é', 8), new string('é', 9)], refused.Select(r => r.Group));
        Assert.All(refused.Take(3), r => Assert.Equal(GmsRefusal.TooManyGroups, r.Error.Reason));
        var tooLong = refused[3].Error;
        Assert.Equal((GmsRefusal.GroupNameTooLong, 16L), (tooLong.Reason, tooLong.Limit));
        Assert.Contains("GmsOptions.MaxGroupNameBytes", tooLong.Message, StringComparison.Ordinal);
        Assert.Contains("GmsOptions.MaxGroupsPerNode", refused[0].Error.Message, StringComparison.Ordinal);

        // Leaving one makes room; a name of 16 bytes is accepted.
        client.Leave("g0");
        client.Join(new string('é', 8));
        world.RunFor(TimeSpan.FromSeconds(1));
        Assert.NotNull(client.FindGroup(new string('é', 8)));
        Assert.Null(client.FindGroup("g0"));
        Assert.Equal(4, refused.Count);
    }

    [Fact]
    public void A_node_that_joins_faster_than_its_request_rate_is_refused_until_its_bucket_refills()
    {
        var world = new VirtualWorld();
        var server = new GmsServer(world, world.Channel(GmsAddress), 1, Options(new GmsOptions { MaxRequestsPerSecond = 10, RequestBurst = 20 }));
        var client = Client(world, NetAddress.Loopback(8000), 100);
        var refused = new List<string>();
        client.JoinRefused += (group, error) =>
        {
            Assert.Equal(GmsRefusal.RateLimited, error.Reason);
            refused.Add(group);
        };
        Assert.True(world.RunUntil(() => client.IsRegistered, TimeSpan.FromSeconds(1)));

        for (int g = 0; g < 30; g++)
        {
            client.Join($"g{g}");
        }

        world.RunFor(TimeSpan.FromMilliseconds(500));
        Assert.Equal(20, client.Groups.Count());
        Assert.Equal(Enumerable.Range(20, 10).Select(g => $"g{g}"), refused);
        Assert.Equal(10, server.Refusals(GmsRefusal.RateLimited));

        world.RunFor(TimeSpan.FromSeconds(1)); // 10 requests' worth refill
        foreach (var group in refused)
        {
            client.Join(group);
        }

        world.RunFor(TimeSpan.FromMilliseconds(500));
        Assert.Equal(30, client.Groups.Count());
        Assert.True(client.IsRegistered);
    }

    [Fact]
    public void Bad_limits_name_the_option()
    {
        var world = new VirtualWorld();
        foreach (var (options, name) in new (GmsOptions, string)[]
        {
            (new GmsOptions { MaxNodes = 0 }, "MaxNodes"),
            (new GmsOptions { MaxNodesPerIp = 0 }, "MaxNodesPerIp"),
            (new GmsOptions { MaxGroupsPerNode = 0 }, "MaxGroupsPerNode"),
            (new GmsOptions { MaxGroupNameBytes = 40_000 }, "MaxGroupNameBytes"),
            (new GmsOptions { MaxRequestsPerSecond = 0 }, "MaxRequestsPerSecond"),
            (new GmsOptions { RequestBurst = 0 }, "RequestBurst"),
        })
        {
            var e = Assert.Throws<ArgumentOutOfRangeException>(() => new GmsServer(world, world.Channel(GmsAddress), 1, options));
            Assert.Contains($"GmsOptions.{name}", e.Message, StringComparison.Ordinal);
        }
    }
}

/// <summary>The GMS over reliable unicast in simulation, against a host that forges a member's source address (issue 12:
/// "one spoofed reliable-unicast segment evicts a member and stalls the group").</summary>
public sealed class GmsSpoofingTests
{
    private sealed class Node(SimNode sim, IDatagramTransport transport, GmsClient client)
    {
        public SimNode Sim { get; } = sim;
        public IDatagramTransport Transport { get; } = transport;
        public GmsClient Client { get; set; } = client;
    }

    private static GmsClient Start(IDatagramTransport transport, SimNode sim, NetAddress gms, uint epoch, ulong incarnation)
        => new StackBuilder(transport, sim).Add(new ReliableUnicast(epoch)).Add(new MembershipLayer(gms, incarnation)).Build()
            .Get<MembershipLayer>().Client;

    private static byte[] ReliableData(uint senderEpoch, uint receiverEpoch, ulong seq, ReadOnlySpan<byte> message)
    {
        var datagram = new byte[PacketHeader.Size + ReliableWire.DataHeaderSize + message.Length];
        ReliableWire.WriteData(datagram, ReliableWire.DataType, 0, senderEpoch, receiverEpoch, seq, message);
        return datagram;
    }

    [Fact]
    public void A_spoofed_Hello_with_a_new_incarnation_from_a_members_address_evicts_nobody_and_a_real_restart_still_replaces_it()
    {
        var net = new SimNetwork(41, new LinkOptions { LossRate = 0.01 });
        var gmsSim = net.AddNode();
        var gmsTransport = gmsSim.Open(7000);
        var server = new StackBuilder(gmsTransport, gmsSim).Add(new ReliableUnicast(1)).Add(new GmsServerLayer(1)).Build().Get<GmsServerLayer>().Server;
        var gms = gmsTransport.LocalAddress;
        var nodes = new List<Node>();
        for (int i = 0; i < 3; i++)
        {
            var sim = net.AddNode();
            var transport = sim.Open(7000);
            var client = Start(transport, sim, gms, (uint)(100 + i), (ulong)(1000 + i));
            client.Join("prices");
            nodes.Add(new Node(sim, transport, client));
        }

        Assert.True(net.RunUntil(() => nodes.All(n => n.Client.FindGroup("prices")?.Regions.Sum(r => n.Client.FindRegion(r.Region)?.Count ?? 0) == 3),
            TimeSpan.FromSeconds(10)), "seed 41: the nodes never agreed on the group");
        var victim = nodes[1];
        var victimId = victim.Client.Node!.Value;

        // The GMS message a restarted node would send, with the channel byte in front, in reliable segments whose
        // epochs a host that cannot see the conversation has to invent; and connects with forged cookies.
        var hello = GmsCodec.Encode(new GmsMessage { Kind = GmsMessageKind.Hello, Number = 999_999 });
        var message = new byte[hello.Length + 1];
        message[0] = MembershipChannels.Gms;
        hello.CopyTo(message, 1);
        var attacker = net.AddNode().Open(6000);
        var random = new Random(41);
        for (int i = 0; i < 2_000; i++)
        {
            uint fresh = (uint)random.Next(1, int.MaxValue);
            byte[] forged = (i % 3) switch
            {
                0 => ReliableData(fresh, 0, 0, message),
                1 => ReliableData(fresh, (uint)random.Next(1, int.MaxValue), (ulong)random.Next(0, 64), message),
                _ => Connect(fresh, random),
            };
            net.SendSpoofed(attacker, victim.Transport.LocalAddress, gms, forged);
            net.RunFor(TimeSpan.FromMilliseconds(1));
        }

        net.RunFor(TimeSpan.FromSeconds(5));
        Assert.Equal(0, server.FailuresDetected);
        Assert.Equal(3, server.State.NodeCount);
        Assert.True(server.State.IsAlive(victimId));
        Assert.Equal(victimId, victim.Client.Node);
        Assert.All(nodes, n => Assert.Equal(3, n.Client.FindGroup("prices")!.Regions.Sum(r => n.Client.FindRegion(r.Region)!.Count)));

        // The real thing: the process at that address restarts (new reliable epoch, new incarnation). Its handshake
        // completes, so it replaces the old member.
        victim.Sim.Crash();
        victim.Sim.Restart();
        victim.Client = Start(victim.Sim.Open(7000), victim.Sim, gms, 777, 7777);
        Assert.True(net.RunUntil(() => victim.Client.IsRegistered, TimeSpan.FromSeconds(10)), "seed 41: the restarted node never registered");
        Assert.NotEqual(victimId, victim.Client.Node);
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.False(server.State.IsAlive(victimId));
        Assert.Equal(3, server.State.NodeCount);
    }

    private static byte[] Connect(uint epoch, Random random)
    {
        var datagram = new byte[PacketHeader.Size + ReliableWire.HandshakeBodySize];
        Span<byte> cookie = stackalloc byte[16];
        random.NextBytes(cookie);
        ReliableWire.WriteHandshake(datagram, ReliableWire.ConnectType, 0, epoch, 0, cookie);
        return datagram;
    }
}
