using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Transport.Tests.Reliable;

/// <summary>
/// Reliable unicast against a hostile host on the same network (issue 12, item 3), in simulation on virtual time: it
/// forges source addresses (<see cref="SimNetwork.SendSpoofed"/>) but cannot receive what is sent to them, or it
/// answers challenges from many ports of its own address. Each test fails without the mechanism it names.
/// </summary>
public sealed class ReliableUnicastHostileTests
{
    private static TestEndpoint Endpoint(SimNode node, ReliableUnicastOptions? options = null)
        => new(node.Open(5000), node, (uint)node.Random.Next(1, int.MaxValue), options);

    [Fact]
    public void Spoofed_segments_with_new_epochs_from_a_peers_address_neither_reset_nor_end_its_conversation()
    {
        // The issue's attack, and its variants: a segment with a new sender epoch and receiver epoch 0 (which used to reset
        // the conversation and report the peer failed), new epochs with a guessed receiver epoch, the real peer's epoch with
        // a guessed one, acks, connects with no or forged cookies, and challenges, all "from" the peer, in both directions.
        var net = new SimNetwork(31);
        var nodeA = net.AddNode();
        var nodeB = net.AddNode();
        var a = Endpoint(nodeA);
        var b = Endpoint(nodeB);
        var attacker = net.AddNode().Open(6000);
        int failures = 0;
        a.PeerFailed += (_, _) => failures++;
        b.PeerFailed += (_, _) => failures++;
        var scenario = new ReliableTransferScenario(a, b, 3_000);
        scenario.Pump();
        net.RunFor(TimeSpan.FromMilliseconds(10));
        var ab = a.Reliable.Find(b.LocalAddress)!;
        var ba = b.Reliable.Find(a.LocalAddress)!;
        Assert.True(ab.IsEstablished && ba.IsEstablished);
        var epochs = (ab.LocalEpoch, ab.PeerEpoch, ba.LocalEpoch, ba.PeerEpoch);

        var random = new Random(31);
        var payload = new byte[] { TestEndpoint.Channel, 1, 2, 3, 4, 5, 6, 7 };
        for (int i = 0; i < 3_000; i++)
        {
            uint fresh = (uint)random.Next(1, int.MaxValue);
            uint guess = (uint)random.Next(1, int.MaxValue);
            foreach (var (from, to, peerEpoch) in new[] { (b.LocalAddress, a.LocalAddress, ba.LocalEpoch), (a.LocalAddress, b.LocalAddress, ab.LocalEpoch) })
            {
                byte[] forged = (i % 8) switch
                {
                    0 => Forge.Data(fresh, 0, 0, payload),
                    1 => Forge.Data(fresh, guess, (ulong)random.Next(0, 100), payload),
                    2 => Forge.Data(peerEpoch, guess, (ulong)random.Next(0, 100), payload), // the sender's number leaked, the receiver's guessed
                    3 => Forge.Ack(fresh, guess, 0),
                    4 => Forge.Connect(fresh, UInt128.Zero),
                    5 => Forge.Connect(fresh, Forge.RandomCookie(random)),
                    6 => Forge.Challenge(guess, fresh, UInt128.Zero),
                    _ => Forge.Challenge(guess, 0, Forge.RandomCookie(random)),
                };
                net.SendSpoofed(attacker, from, to, forged);
            }

            net.RunFor(TimeSpan.FromMicroseconds(20));
        }

        Assert.True(net.RunUntil(() => scenario.Done || scenario.Violation is not null, TimeSpan.FromMinutes(1)), $"seed 31: {scenario.Received} of 3,000");
        Assert.Null(scenario.Violation);
        Assert.Equal(0, failures);
        Assert.Same(ab, a.Reliable.Find(b.LocalAddress));
        Assert.Same(ba, b.Reliable.Find(a.LocalAddress));
        Assert.Equal(epochs, (ab.LocalEpoch, ab.PeerEpoch, ba.LocalEpoch, ba.PeerEpoch));
        Assert.Equal(0, a.Reliable.Counters.ConversationsReplaced + b.Reliable.Counters.ConversationsReplaced);
        Assert.True(a.Reliable.Counters.UnknownConversation > 1_000, $"a counted {a.Reliable.Counters}");
        Assert.True(a.Reliable.Counters.CookiesRejected > 300, $"a counted {a.Reliable.Counters}");
        Assert.Equal(1, a.Reliable.ConnectionCount);
        Assert.Equal(1, b.Reliable.ConnectionCount);
    }

    [Fact]
    public void A_flood_of_first_contacts_from_five_thousand_ports_takes_no_state_and_a_real_peer_still_connects()
    {
        // The issue's table exhaustion: 5,000 sources in 0.1 s, each sending a connect and a data segment. The answering
        // side keeps nothing for a source until it echoes a cookie, which a spoofed source never receives.
        var net = new SimNetwork(32);
        var a = Endpoint(net.AddNode());
        var b = Endpoint(net.AddNode());
        var attacker = net.AddNode().Open(6000);
        uint attackerIp = attacker.LocalAddress.Ip;
        var random = new Random(32);
        var scenario = new ReliableTransferScenario(b, a, 500);
        var payload = new byte[] { TestEndpoint.Channel, 9, 9, 9 };
        int mostConnections = 0;
        for (int i = 0; i < 5_000; i++)
        {
            var source = new NetAddress(attackerIp, (ushort)(10_000 + i));
            uint epoch = (uint)random.Next(1, int.MaxValue);
            net.SendSpoofed(attacker, source, a.LocalAddress, Forge.Connect(epoch, UInt128.Zero));
            net.SendSpoofed(attacker, source, a.LocalAddress, Forge.Data(epoch, (uint)random.Next(1, int.MaxValue), 0, payload));
            if (i == 2_500)
            {
                scenario.Pump(); // a real peer opens a conversation in the middle of the flood
            }

            net.RunFor(TimeSpan.FromMicroseconds(20));
            mostConnections = Math.Max(mostConnections, a.Reliable.ConnectionCount);
        }

        Assert.True(net.RunUntil(() => scenario.Done || scenario.Violation is not null, TimeSpan.FromSeconds(30)), $"seed 32: {scenario.Received} of 500");
        net.RunFor(TimeSpan.FromMilliseconds(10)); // the flood's last datagrams
        Assert.Null(scenario.Violation);
        Assert.True(mostConnections <= 1, $"a held {mostConnections} connections during the flood");
        Assert.Equal(0, a.Reliable.ConnectionsTo(attackerIp));
        Assert.Equal(1, a.Reliable.ConnectionCount);
        var counters = a.Reliable.Counters;
        Assert.Equal(1, counters.HandshakesAccepted);
        Assert.True(counters.ChallengesSent + counters.ChallengesSuppressed >= 10_000, $"a counted {counters}");
        Assert.True(counters.ChallengesSent <= 2_100, $"the challenge budget (1,000 burst + 10,000/s) did not hold: {counters}");
    }

    [Fact]
    public void Datagrams_claiming_a_multicast_or_broadcast_source_are_never_answered()
    {
        // Otherwise a forger could make an endpoint send challenges to a whole multicast group.
        var net = new SimNetwork(39);
        var a = Endpoint(net.AddNode());
        var attacker = net.AddNode().Open(6000);
        var sources = new[] { new NetAddress(0xEFFF0100, 47000), new NetAddress(0xFFFFFFFF, 5000), new NetAddress(0, 5000), new NetAddress(attacker.LocalAddress.Ip, 0) };
        foreach (var source in sources)
        {
            net.SendSpoofed(attacker, source, a.LocalAddress, Forge.Connect(12345, UInt128.Zero));
            net.SendSpoofed(attacker, source, a.LocalAddress, Forge.Data(12345, 678, 0, new byte[] { TestEndpoint.Channel, 1, 2, 3 }));
            net.SendSpoofed(attacker, source, a.LocalAddress, Forge.Ack(12345, 678, 0));
        }

        net.RunFor(TimeSpan.FromMilliseconds(10));
        Assert.Equal(0, a.Reliable.Counters.ChallengesSent);
        Assert.Equal(0, a.Reliable.ConnectionCount);
        Assert.True(a.Reliable.Drops.Total >= 12);
    }

    [Fact]
    public void A_host_that_answers_challenges_gets_only_its_per_source_share_and_its_unused_connections_expire()
    {
        var options = new ReliableUnicastOptions
        {
            MaxPeers = 32,
            MaxConnectionsPerIp = 8,
            HalfOpenTimeout = TimeSpan.FromSeconds(2),
            IdleTimeout = TimeSpan.FromSeconds(30),
        };
        var net = new SimNetwork(33);
        var a = Endpoint(net.AddNode(), options);
        var b = Endpoint(net.AddNode());
        var attackerNode = net.AddNode();
        var bots = Enumerable.Range(0, 100)
            .Select(i => new HandshakeBot(attackerNode.Open((ushort)(10_000 + i)), a.LocalAddress, (uint)(1_000 + i)))
            .ToList();
        bots.ForEach(bot => bot.Start());
        net.RunFor(TimeSpan.FromMilliseconds(200));

        Assert.Equal(8, bots.Count(bot => bot.Established));
        Assert.Equal(8, a.Reliable.ConnectionsTo(attackerNode.Address.Ip));
        Assert.Equal(92, a.Reliable.Counters.RefusedPerSource);
        var botAddresses = bots.Select((_, i) => new NetAddress(attackerNode.Address.Ip, (ushort)(10_000 + i)));
        var held = botAddresses.Select(a.Reliable.Find).OfType<ReliableConnection>().ToList();
        Assert.Equal(8, held.Count);
        Assert.All(held, c => Assert.False(c.HasSendBuffer)); // a handshake alone costs no send ring

        // A real peer at another address still gets in, and keeps its connection because it uses it.
        var scenario = new ReliableTransferScenario(b, a, 200);
        scenario.Pump();
        Assert.True(net.RunUntil(() => scenario.Done, TimeSpan.FromSeconds(5)), $"seed 33: {scenario.Received} of 200");
        Assert.Null(scenario.Violation);

        // The bots never say anything after their handshake: half-open, they expire.
        net.RunFor(TimeSpan.FromSeconds(3));
        Assert.Equal(0, a.Reliable.ConnectionsTo(attackerNode.Address.Ip));
        Assert.Equal(8, a.Reliable.Counters.Expired);
        Assert.Equal(1, a.Reliable.ConnectionCount);
    }

    [Fact]
    public void At_the_table_bound_a_new_peer_waits_until_idle_connections_expire_and_expired_peers_come_back_quietly()
    {
        var hubOptions = new ReliableUnicastOptions
        {
            MaxPeers = 4,
            IdleTimeout = TimeSpan.FromSeconds(4),
            HalfOpenTimeout = TimeSpan.FromSeconds(2),
        };
        var net = new SimNetwork(34);
        var hub = Endpoint(net.AddNode(), hubOptions);
        var peers = Enumerable.Range(0, 6).Select(_ => Endpoint(net.AddNode())).ToList(); // default IdleTimeout: 60 s
        int failures = 0;
        hub.PeerFailed += (_, _) => failures++;
        peers.ForEach(p => p.PeerFailed += (_, _) => failures++);
        var received = new List<int>();
        hub.MessageReceived += (_, m) => received.Add(m[0]);

        for (int i = 0; i < 4; i++)
        {
            Assert.True(peers[i].TrySend(hub.LocalAddress, [(byte)i]));
        }

        net.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal([0, 1, 2, 3], received);
        Assert.Equal(4, hub.Reliable.ConnectionCount);

        // Full: a fifth peer's handshake is not answered (it keeps repeating its connect), and the hub cannot open one.
        Assert.True(peers[4].TrySend(hub.LocalAddress, [4]));
        net.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(4, received.Count);
        Assert.True(hub.Reliable.Counters.RefusedTableFull >= 1);
        Assert.False(hub.TrySend(peers[5].LocalAddress, [5]));
        Assert.Equal(4, hub.Reliable.ConnectionCount);

        // The four go idle; once the hub expires them, the fifth gets in on one of its repeated connects.
        Assert.True(net.RunUntil(() => received.Count == 5, TimeSpan.FromSeconds(15)), "seed 34: the fifth peer never got in");
        Assert.Equal(4, received[4]);
        Assert.Equal(4, hub.Reliable.Counters.Expired);

        // Peer 0 still has its conversation (its own idle timeout is longer); the hub expired it. Its next messages are
        // answered by a challenge naming the old conversation, and go out in a new one: nothing lost, nothing reported.
        Assert.True(peers[0].Reliable.Find(hub.LocalAddress)!.IsEstablished);
        for (byte m = 10; m < 15; m++)
        {
            Assert.True(peers[0].TrySend(hub.LocalAddress, [m]));
        }

        Assert.True(net.RunUntil(() => received.Count == 10, TimeSpan.FromSeconds(5)), $"seed 34: got {string.Join(",", received)}");
        Assert.Equal([10, 11, 12, 13, 14], received[5..]);
        Assert.Equal(1, peers[0].Reliable.Counters.ConversationsReplaced);
        Assert.Equal(0, failures);
    }

    [Fact]
    public void Idle_connections_expire_on_both_sides_and_the_next_message_opens_a_new_conversation()
    {
        var options = new ReliableUnicastOptions { IdleTimeout = TimeSpan.FromSeconds(3), HalfOpenTimeout = TimeSpan.FromSeconds(2) };
        var net = new SimNetwork(35);
        var a = Endpoint(net.AddNode(), options);
        var b = Endpoint(net.AddNode(), options);
        int failures = 0;
        a.PeerFailed += (_, _) => failures++;
        b.PeerFailed += (_, _) => failures++;
        var received = new List<int>();
        b.MessageReceived += (_, m) => received.Add(m[0]);
        Assert.True(a.TrySend(b.LocalAddress, [1]));
        net.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal((1, 1), (a.Reliable.ConnectionCount, b.Reliable.ConnectionCount));
        var first = a.Reliable.Find(b.LocalAddress)!;

        net.RunFor(TimeSpan.FromSeconds(4));
        Assert.Equal((0, 0), (a.Reliable.ConnectionCount, b.Reliable.ConnectionCount));
        Assert.Equal((1, 1), (a.Reliable.Counters.Expired, b.Reliable.Counters.Expired));

        Assert.True(a.TrySend(b.LocalAddress, [2]));
        net.RunFor(TimeSpan.FromMilliseconds(100));
        Assert.Equal([1, 2], received);
        Assert.NotEqual(first.LocalEpoch, a.Reliable.Find(b.LocalAddress)!.LocalEpoch);
        Assert.Equal(0, failures);
    }

    [Fact]
    public void Messages_a_peer_never_acknowledged_before_it_expired_the_conversation_move_in_order_into_the_new_one()
    {
        // The carried messages sit across the end of the send ring (its base at 50 of 64): the ring is rotated in place.
        var net = new SimNetwork(36);
        var a = Endpoint(net.AddNode(), new ReliableUnicastOptions { SendBufferSegments = 64, Window = 16, MaxMessageBytes = 10_000 });
        var b = Endpoint(net.AddNode(), new ReliableUnicastOptions { IdleTimeout = TimeSpan.FromSeconds(3), HalfOpenTimeout = TimeSpan.FromSeconds(2) });
        int failures = 0;
        a.PeerFailed += (_, _) => failures++;
        var received = new List<int>();
        b.MessageReceived += (_, m) => received.Add(BinaryPrimitives.ReadInt32LittleEndian(m));
        var message = new byte[4];
        void Send(int n)
        {
            BinaryPrimitives.WriteInt32LittleEndian(message, n);
            Assert.True(a.TrySend(b.LocalAddress, message));
        }

        for (int n = 0; n < 50; n++)
        {
            Send(n);
        }

        Assert.True(net.RunUntil(() => received.Count == 50, TimeSpan.FromSeconds(5)));
        net.RunFor(TimeSpan.FromSeconds(4)); // b expires the conversation; a (60 s) does not
        Assert.Equal(0, b.Reliable.ConnectionCount);
        Assert.Equal(1, a.Reliable.ConnectionCount);
        for (int n = 50; n < 90; n++)
        {
            Send(n);
        }

        Assert.True(net.RunUntil(() => received.Count == 90, TimeSpan.FromSeconds(5)), $"seed 36: {received.Count} of 90");
        Assert.Equal(Enumerable.Range(0, 90), received);
        Assert.Equal(1, a.Reliable.Counters.ConversationsReplaced);
        Assert.Equal(0, failures);
    }

    [Fact]
    public void A_restarted_peer_opens_a_new_conversation_with_a_valid_cookie_and_the_old_one_ends()
    {
        // The legitimate case the attacks imitate: the process at the peer's address really restarted. Its handshake
        // completes (it receives the challenge), so the old conversation ends and the new one delivers.
        var net = new SimNetwork(37);
        var nodeA = net.AddNode();
        var nodeB = net.AddNode();
        var a = Endpoint(nodeA);
        var b = Endpoint(nodeB);
        var fromNewB = new List<int>();
        a.MessageReceived += (_, m) => fromNewB.Add(m[0]);
        Assert.True(b.TrySend(a.LocalAddress, [1]));
        net.RunFor(TimeSpan.FromMilliseconds(50));
        var old = a.Reliable.Find(b.LocalAddress)!;
        uint oldPeerEpoch = old.PeerEpoch;

        nodeB.Crash();
        nodeB.Restart();
        var b2 = Endpoint(nodeB);
        Assert.True(b2.TrySend(a.LocalAddress, [2]));
        net.RunFor(TimeSpan.FromMilliseconds(50));
        Assert.Equal([1, 2], fromNewB);
        var current = a.Reliable.Find(b.LocalAddress)!;
        Assert.True(current.IsEstablished);
        Assert.NotEqual(oldPeerEpoch, current.PeerEpoch);
        Assert.Equal(1, a.Reliable.Counters.ConversationsReplaced);
        Assert.Equal(2, a.Reliable.Counters.HandshakesAccepted);
    }

    [Fact]
    public void The_checks_cost_no_allocation_per_segment_once_a_conversation_is_established()
    {
        // Receiver epoch first, then the sender's, then the window: on the steady path nothing is allocated (the
        // handshake and the first messages warm the pools).
        var net = new SimNetwork(38);
        var a = Endpoint(net.AddNode());
        var b = Endpoint(net.AddNode());
        var scenario = new ReliableTransferScenario(a, b, 30_000);
        scenario.Pump();
        Assert.True(net.RunUntil(() => scenario.Received >= 5_000, TimeSpan.FromSeconds(10)));
        long before = GC.GetAllocatedBytesForCurrentThread();
        Assert.True(net.RunUntil(() => scenario.Done, TimeSpan.FromSeconds(30)), $"seed 38: {scenario.Received} of 30,000");
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        Assert.Null(scenario.Violation);
        // The smallest object is 24 bytes, so one allocation per message would be at least 600,000 bytes. The bound
        // is half that, not zero: buffers come from ArrayPool<byte>.Shared, which other test classes running in
        // parallel share and which trims itself after their gen-2 collections, so a few rents miss the pool and
        // allocate (CI saw 104,560 bytes, about 4 bytes a message; alone the figure is under 25,000).
        Assert.True(allocated < 300_000, $"{allocated} bytes allocated for 25,000 messages");
    }

    [Fact]
    public void New_limits_are_validated_with_a_message_naming_the_option()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { MaxConnectionsPerIp = 0 }.Validate());
        Assert.Contains("MaxConnectionsPerIp", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { CookieLifetime = TimeSpan.FromMilliseconds(100) }.Validate());
        Assert.Contains("CookieLifetime", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { HalfOpenTimeout = TimeSpan.FromMinutes(5) }.Validate());
        Assert.Contains("HalfOpenTimeout", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new ReliableUnicastOptions { MaxChallengesPerSecond = 0 }.Validate());
        Assert.Contains("MaxChallengesPerSecond", e.Message, StringComparison.Ordinal);
    }
}
