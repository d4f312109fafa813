using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Wire;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// The whole stack (GMS, reliable unicast, regions, groups) with every datagram authenticated or encrypted
/// (<see cref="SecureTransport"/>), on virtual time: everything is delivered as without it; a node with another secret
/// or mode cannot register; a member whose key no longer matches injects nothing and is cut off; forged copies of
/// region traffic multicast into the group are all dropped and counted.
/// </summary>
public sealed class DatagramSecuritySimulationTests(ITestOutputHelper output)
{
    private static readonly byte[] Secret = DatagramSecurityOptions.GenerateSecret();

    private static DatagramSecurityOptions Options(DatagramSecurity mode, byte[]? secret = null, DatagramCipherSuite suite = DatagramCipherSuite.Aegis128L)
        => new() { Mode = mode, ClusterSecret = secret ?? Secret, Cipher = suite };

    [Theory]
    [InlineData(DatagramSecurity.Authenticate, 801, DatagramCipherSuite.Aegis128L)]
    [InlineData(DatagramSecurity.Encrypt, 802, DatagramCipherSuite.Aegis128L)]
    [InlineData(DatagramSecurity.Authenticate, 803, DatagramCipherSuite.AesGcm)]
    [InlineData(DatagramSecurity.Encrypt, 804, DatagramCipherSuite.AesGcm)]
    public void Every_member_gets_every_message_once_in_order_with_every_datagram_sealed(DatagramSecurity mode, int seed, DatagramCipherSuite suite)
    {
        const int Messages = 1_500;
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan, security: Options(mode, suite: suite));
        var all = cluster.AddNodes(10);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        var publishers = all.Take(2).ToList();
        foreach (var p in publishers)
        {
            p.PublishNumbered("prices", Messages, perSecond: 3_000);
        }

        bool done = cluster.Network.RunUntil(() => all.All(n => publishers.All(p => n.Groups["prices"].CountFrom(p.Id) >= Messages)), TimeSpan.FromMinutes(3));
        Assert.True(done, $"seed {seed}: not everything was delivered");
        foreach (var node in all)
        {
            foreach (var p in publishers)
            {
                Assert.Equal(Enumerable.Range(1, Messages), node.Groups["prices"].Received[p.Id]);
            }

            var security = node.Stack!.Security!;
            Assert.Equal(mode, security.Mode);
            Assert.Equal(DatagramSealer.OverheadOf(suite), security.Overhead);
            Assert.True(security.Counters.Opened > Messages / 10, $"node {node.Id} opened only {security.Counters.Opened} datagrams");
            Assert.Equal(0, security.Counters.Rejected);
        }

        Assert.True(cluster.GmsStack!.Security!.Counters.Opened > 0);
        Assert.True(cluster.Network.Drops[DropReason.LinkLoss] > 50, $"seed {seed}: too little loss to test recovery");
        output.WriteLine($"seed {seed} {mode}: {string.Join("; ", all.Take(3).Select(n => n.Stack!.Security!.Counters))}");
    }

    [Theory]
    [InlineData(DatagramSecurity.Authenticate)]
    [InlineData(DatagramSecurity.Encrypt)]
    public void A_node_with_another_secret_or_mode_cannot_register(DatagramSecurity mode)
    {
        var cluster = new NodeCluster(811, new LinkOptions(), security: Options(mode));
        cluster.AddNodes(2); // the cluster's own secret registers
        var otherSecret = cluster.AddNodesUnregistered(1, Options(mode, DatagramSecurityOptions.GenerateSecret()))[0];
        var otherMode = cluster.AddNodesUnregistered(1, Options(mode == DatagramSecurity.Encrypt ? DatagramSecurity.Authenticate : DatagramSecurity.Encrypt))[0];
        var noSecurity = cluster.AddNodesUnregistered(1, new DatagramSecurityOptions())[0];
        cluster.Network.RunFor(TimeSpan.FromSeconds(10));

        Assert.Null(otherSecret.Gms!.Node);
        Assert.Null(otherMode.Gms!.Node);
        Assert.Null(noSecurity.Gms!.Node);
        Assert.Equal(2, cluster.Gms!.State.NodeCount);
        var gms = cluster.GmsStack!.Security!.Counters;
        Assert.True(gms.Rejected >= 3, $"the GMS dropped {gms}");
        Assert.Equal(0, cluster.GmsStack.Drops.Total); // nothing unauthenticated reached the dispatcher
    }

    [Fact]
    public void A_member_whose_key_no_longer_matches_injects_nothing_and_the_others_lose_nothing()
    {
        const int Seed = 821;
        const int Messages = 1_000;
        var cluster = new NodeCluster(Seed, LinkOptions.LossyLan, security: Options(DatagramSecurity.Authenticate));
        var all = cluster.AddNodes(5);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        var (honest, rogue) = (all[0], all[^1]);
        var receivers = all.Take(4).ToList();

        // With the cluster's key the rogue's messages are delivered: the path this test closes is open.
        rogue.PublishNumbered("prices", 200, perSecond: 2_000);
        cluster.Require(() => receivers.All(n => n.Groups["prices"].CountFrom(rogue.Id) == 200), TimeSpan.FromSeconds(30), "the rogue's first messages");

        // Now it seals under keys derived from another secret (same key ids): it keeps publishing, the others keep theirs.
        Span<byte> other = stackalloc byte[DatagramKeyRing.KeyBytes];
        DatagramKeyRing.DeriveClusterKey(DatagramSecurityOptions.GenerateSecret(), DatagramSecurity.Authenticate, other);
        rogue.Stack!.Security!.Keys.Add(DatagramKeyRing.ClusterKeyId, other);
        var regionKeys = rogue.Stack.Security.ScopedKeys; // its region's key from the GMS too (same ids)
        foreach (uint scope in regionKeys.Scopes.ToList())
        {
            uint current = regionKeys.IdsOf(scope)[^1];
            regionKeys.RemoveScope(scope);
            regionKeys.Install(scope, current, other);
        }

        rogue.PublishNumbered("prices", Messages, perSecond: 2_000);
        honest.PublishNumbered("prices", Messages, perSecond: 2_000);

        bool done = cluster.Network.RunUntil(() => receivers.All(n => n.Groups["prices"].CountFrom(honest.Id) >= Messages), TimeSpan.FromMinutes(2));
        Assert.True(done, $"seed {Seed}: {string.Join(", ", receivers.Select(n => n.Groups["prices"].CountFrom(honest.Id)))} of {Messages}");
        cluster.Network.RunFor(TimeSpan.FromSeconds(2));
        foreach (var node in receivers)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["prices"].Received[honest.Id]);
            Assert.Equal(Enumerable.Range(1, 200), node.Groups["prices"].Received[rogue.Id]);
        }

        long rejected = receivers.Sum(n => n.Stack!.Security!.Counters[DatagramRejection.BadTag]);
        Assert.True(rejected > 100, $"seed {Seed}: the others dropped only {rejected} of the rogue's datagrams");
        output.WriteLine($"seed {Seed}: rejected {rejected}; GMS {cluster.GmsStack!.Security!.Counters}; GMS nodes {cluster.Gms!.State.NodeCount}");
    }

    [Theory]
    [InlineData(DatagramSecurity.Authenticate)]
    [InlineData(DatagramSecurity.Encrypt)]
    public void Forged_copies_of_region_traffic_multicast_into_the_group_deliver_nothing(DatagramSecurity mode)
    {
        const int Seed = 831;
        const int Messages = 400;
        var cluster = new NodeCluster(Seed, new LinkOptions(), security: Options(mode));
        var all = cluster.AddNodes(4);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        var sender = all[0];
        var group = sender.Region!.Member!.View!.MulticastAddress!.Value;

        // An attacker on the network that hears the group and holds another secret: it keeps what it hears and sends
        // it back (1) with one bit changed, spoofed from the sender, (2) truncated, and (3) re-sealed under its own key,
        // and also (4) plain, as a node without security would send it.
        var attackerNode = cluster.Network.AddNode();
        var raw = attackerNode.Open(NodeCluster.Port, 16 * 1024);
        var foreign = new SecureTransport(attackerNode.Open(NodeCluster.Port + 1, 16 * 1024), Options(mode, DatagramSecurityOptions.GenerateSecret()));
        foreign.SetHandler(new Tap(default));
        var tap = new Tap(foreign.LocalAddress); // not what the attacker itself sends
        raw.SetHandler(tap);
        raw.JoinGroup(group);

        sender.PublishNumbered("prices", Messages, perSecond: 2_000);
        long injected = 0;
        var feed = new Alarm(self =>
        {
            while (tap.Heard.TryDequeue(out var heard))
            {
                if (heard.Length <= foreign.Overhead + PacketHeader.Size)
                {
                    continue;
                }

                var flipped = (byte[])heard.Clone();
                flipped[PacketHeader.Size + (int)(injected % (heard.Length - PacketHeader.Size))] ^= 0x10;
                cluster.Network.SendSpoofed(raw, sender.Endpoint.LocalAddress, group, flipped);
                cluster.Network.SendSpoofed(raw, sender.Endpoint.LocalAddress, group, heard.AsSpan(0, heard.Length - 1));
                var inner = heard.AsSpan(0, heard.Length - foreign.Overhead);
                foreign.TrySend(group, inner);
                cluster.Network.SendSpoofed(raw, sender.Endpoint.LocalAddress, group, inner);
                injected += 4;
            }

            attackerNode.ScheduleAfter(self, TimeSpan.FromMilliseconds(1));
        });
        attackerNode.ScheduleAfter(feed, TimeSpan.FromMilliseconds(1));

        bool done = cluster.Network.RunUntil(() => all.All(n => n.Groups["prices"].CountFrom(sender.Id) >= Messages), TimeSpan.FromMinutes(2));
        Assert.True(done, $"seed {Seed}: {string.Join(", ", all.Select(n => n.Groups["prices"].CountFrom(sender.Id)))} of {Messages}");
        cluster.Network.RunFor(TimeSpan.FromSeconds(1));
        Assert.True(injected > 400, $"only {injected} forged datagrams were sent; the test proves nothing");
        foreach (var node in all)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["prices"].Received[sender.Id]);
            Assert.Single(node.Groups["prices"].Received);
        }

        // Every forged datagram reached every member's endpoint (the sender's too: it is in the group) and was dropped there.
        long rejected = all.Sum(n => n.Stack!.Security!.Counters.Rejected);
        Assert.True(rejected >= injected * all.Count * 9 / 10, $"{rejected} rejections for {injected} forged datagrams to {all.Count} members");
        Assert.Equal(0, all.Sum(n => n.Stack!.Drops.Total));
        output.WriteLine($"{mode}: injected {injected}, rejected {rejected}");
    }

    private sealed class Tap(NetAddress ignore) : IDatagramHandler
    {
        public Queue<byte[]> Heard { get; } = new();

        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
        {
            if (from != ignore && Heard.Count < 10_000)
            {
                Heard.Enqueue(datagram.ToArray());
            }
        }
    }
}
