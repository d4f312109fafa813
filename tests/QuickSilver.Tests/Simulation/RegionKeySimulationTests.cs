using QuickSilver.Core.Security;
using QuickSilver.Core.Wire;
using QuickSilver.Membership;
using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// Keys per region and view (docs/security.md, "Keys per region and view"), whole stack on virtual time: the GMS draws
/// a key for each new region view and hands it to the nodes that receive that view (members and senders); region
/// datagrams are sealed under it; a node that left the region cannot inject into it even though it holds the cluster
/// secret; a joiner gets the stream after the rotation and the others lose nothing; keys also rotate after
/// <see cref="DatagramSecurityOptions.MaxDatagramsPerKey"/> datagrams, under loss, losing nothing; the replicated GMS hands
/// out the same keys after a failover.
/// </summary>
public sealed class RegionKeySimulationTests(ITestOutputHelper output)
{
    private static readonly byte[] Secret = DatagramSecurityOptions.GenerateSecret();

    private static DatagramSecurityOptions Options(DatagramSecurity mode = DatagramSecurity.Authenticate, long maxPerKey = 1L << 30) => new()
    {
        Mode = mode,
        ClusterSecret = Secret,
        KeyRetireDelay = TimeSpan.FromMilliseconds(500),
        MaxDatagramsPerKey = maxPerKey,
    };

    /// <summary>The region view the group maps to, as the GMS holds it now.</summary>
    private static RegionView RegionOf(NodeCluster cluster, string group)
    {
        var view = cluster.Gms!.State.FindGroup(group)!;
        return cluster.Gms.State.RegionViewOf(Assert.Single(view.Regions).Region);
    }

    /// <summary>A data packet into <paramref name="region"/> from <paramref name="sender"/>, numbered <paramref name="seq"/>,
    /// carrying nothing the group layer would deliver if it got that far (the test counts refusals, not deliveries).</summary>
    private static byte[] DataPacket(uint sender, RegionView region, ulong seq)
    {
        var datagram = new byte[RegionWire.DataHeaderSize + 16];
        RegionWire.WriteData(datagram, new DataHeader(sender, region.Region.Value, region.ViewNumber, 1, seq), new byte[16]);
        return datagram;
    }

    [Theory]
    [InlineData(DatagramSecurity.Authenticate, 1101)]
    [InlineData(DatagramSecurity.Encrypt, 1102)]
    public void A_member_removed_from_the_view_can_no_longer_inject_into_the_region(DatagramSecurity mode, int seed)
    {
        var cluster = new NodeCluster(seed, new LinkOptions(), security: Options(mode));
        var all = cluster.AddNodes(5);
        var outsider = all[^1]; // registered, holds the cluster secret, never in the group
        var members = all.Take(4).ToList();
        cluster.Join(members, "prices");
        cluster.SettleViews("prices", members);
        var before = RegionOf(cluster, "prices");
        Assert.NotNull(before.Key);
        foreach (var node in members)
        {
            Assert.Equal(before.Key!.Id, node.Stack!.Security!.ScopedKeys.IdsOf(before.Region.Value)[^1]);
        }

        Assert.Empty(outsider.Stack!.Security!.ScopedKeys.IdsOf(before.Region.Value)); // never sent the region's view

        // The leaver's messages are delivered while it is a member: the path this test closes is open.
        var (publisher, leaver) = (members[0], members[^1]);
        var stay = members.Take(3).ToList();
        leaver.PublishNumbered("prices", 100, perSecond: 2_000);
        cluster.Require(() => stay.All(n => n.Groups["prices"].CountFrom(leaver.Id) == 100), TimeSpan.FromSeconds(20), "the leaver's messages");
        var oldKey = before.Key!;

        leaver.Leave("prices");
        cluster.SettleViews("prices", stay);
        var after = RegionOf(cluster, "prices");
        Assert.NotEqual(oldKey.Id, after.Key!.Id);
        cluster.Network.RunFor(TimeSpan.FromSeconds(1)); // past KeyRetireDelay
        foreach (var node in stay)
        {
            Assert.Equal([after.Key.Id], node.Stack!.Security!.ScopedKeys.IdsOf(after.Region.Value)); // the old key retired
        }

        Assert.Empty(leaver.Stack!.Security!.ScopedKeys.IdsOf(after.Region.Value)); // it forgot the region's keys
        var rejectedBefore = stay.Select(n => n.Stack!.Security!.Counters).Select(c => (c[DatagramRejection.UnknownKey], c[DatagramRejection.WrongKey], c[DatagramRejection.BadTag])).ToList();

        // Now the leaver (and the outsider) try: under the key the leaver kept from its last view, under the cluster key
        // (its own stack: it holds no key for the region any more), and under the new key's id with its old key's bytes.
        var group = after.MulticastAddress!.Value;
        var forger = new SecureTransport(leaver.Sim.Open(NodeCluster.Port + 1, 16 * 1024), Options(mode));
        forger.ScopeByField(RegionWire.DataType, PacketHeader.Size);
        forger.ScopedKeys.Install(after.Region.Value, oldKey.Id, oldKey.Material.AsSpan());
        var guesser = new SecureTransport(leaver.Sim.Open(NodeCluster.Port + 2, 16 * 1024), Options(mode));
        guesser.ScopeByField(RegionWire.DataType, PacketHeader.Size);
        guesser.ScopedKeys.Install(after.Region.Value, after.Key.Id, oldKey.Material.AsSpan());
        const int Forgeries = 50;
        const ulong First = 1_000_000; // any number: nothing of these gets past the transport
        for (int i = 0; i < Forgeries; i++)
        {
            Assert.True(forger.TrySend(group, DataPacket(leaver.Id, after, First + (ulong)i)));
            Assert.True(leaver.Stack.Transport.TrySend(group, DataPacket(leaver.Id, after, First + (ulong)i)));
            Assert.True(outsider.Stack.Transport.TrySend(group, DataPacket(outsider.Id, after, First + (ulong)i)));
            Assert.True(guesser.TrySend(group, DataPacket(leaver.Id, after, First + (ulong)i)));
        }

        // And the publisher's stream goes on, every message delivered once, in order, to those who stayed.
        publisher.PublishNumbered("prices", 500, perSecond: 2_000);
        cluster.Require(() => stay.All(n => n.Groups["prices"].CountFrom(publisher.Id) == 500), TimeSpan.FromSeconds(20), "the publisher's messages");
        for (int n = 0; n < stay.Count; n++)
        {
            var node = stay[n];
            var counters = node.Stack!.Security!.Counters;
            Assert.Equal(Enumerable.Range(1, 500), node.Groups["prices"].Received[publisher.Id]);
            Assert.Equal(Enumerable.Range(1, 100), node.Groups["prices"].Received[leaver.Id]); // nothing more from it
            Assert.False(node.Groups["prices"].Received.ContainsKey(outsider.Id));
            Assert.Equal(Forgeries, counters[DatagramRejection.UnknownKey] - rejectedBefore[n].Item1); // the retired key
            Assert.Equal(2 * Forgeries, counters[DatagramRejection.WrongKey] - rejectedBefore[n].Item2); // the cluster key
            Assert.Equal(Forgeries, counters[DatagramRejection.BadTag] - rejectedBefore[n].Item3); // a guessed key under the right id
        }

        output.WriteLine($"seed {seed} {mode}: keys {oldKey.Id} -> {after.Key.Id}; {stay[0].Stack!.Security!.Counters}");
    }

    [Fact]
    public void A_joiner_receives_the_stream_after_the_rotation_and_the_others_lose_nothing()
    {
        const int Seed = 1111;
        const int Messages = 3_000;
        var cluster = new NodeCluster(Seed, LinkOptions.LossyLan, security: Options());
        var all = cluster.AddNodes(5);
        var first = all.Take(4).ToList();
        var joiner = all[^1];
        cluster.Join(first, "prices");
        cluster.SettleViews("prices", first);
        var before = RegionOf(cluster, "prices");
        var publisher = first[0];
        publisher.PublishNumbered("prices", Messages, perSecond: 3_000);
        cluster.Require(() => first.All(n => n.Groups["prices"].CountFrom(publisher.Id) >= 300), TimeSpan.FromSeconds(20), "the stream's start");

        joiner.Join("prices");
        cluster.Require(() => joiner.Groups["prices"].View is not null, TimeSpan.FromSeconds(20), "the joiner's view");
        var after = RegionOf(cluster, "prices");
        Assert.NotEqual(before.Key!.Id, after.Key!.Id);
        Assert.True(after.Members.Any(m => m.Node.Value == joiner.Id));

        bool done = cluster.Network.RunUntil(() => all.All(n => n.Groups["prices"].Received.TryGetValue(publisher.Id, out var got) && got.Count > 0 && got[^1] == Messages), TimeSpan.FromMinutes(2));
        Assert.True(done, $"seed {Seed}: {string.Join(", ", all.Select(n => n.Groups["prices"].CountFrom(publisher.Id)))} of {Messages}");
        foreach (var node in first)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["prices"].Received[publisher.Id]);
        }

        // The joiner gets an unbroken run from where it came in to the end, all under keys it was handed.
        var joined = joiner.Groups["prices"].Received[publisher.Id];
        Assert.Equal(Enumerable.Range(joined[0], Messages - joined[0] + 1), joined);
        Assert.True(joined[0] > 1, "the joiner should come in mid-stream");
        Assert.Equal([after.Key.Id], joiner.Stack!.Security!.ScopedKeys.IdsOf(after.Region.Value));
        cluster.Network.RunFor(TimeSpan.FromSeconds(1));
        foreach (var node in all)
        {
            Assert.True(0 == node.Stack!.Security!.Counters[DatagramRejection.BadTag] + node.Stack.Security.Counters[DatagramRejection.WrongKey], $"{node.Label}: bad tag {node.Stack.Security.Counters[DatagramRejection.BadTag]}, wrong key {node.Stack.Security.Counters[DatagramRejection.WrongKey]}, joiner {joiner.Label}");
            Assert.Equal(after.Key.Id, node.Stack.Security.ScopedKeys.IdsOf(after.Region.Value)[^1]);

            // Tokens, NAKs and ACKs went under the region's keys too, and none was refused.
            Assert.True(node.Stack.Security.MessageCounters.Opened > 10, $"{node.Label}: {node.Stack.Security.MessageCounters}");
            Assert.True(node.Stack.Security.MessageCounters.Rejected == 0, $"{node.Label}: {node.Stack.Security.MessageCounters}; joiner {joiner.Label}");
        }

        output.WriteLine($"seed {Seed}: joiner from {joined[0]}; keys {before.Key.Id} -> {after.Key.Id}; unknown-key drops {string.Join(", ", all.Select(n => n.Stack!.Security!.Counters[DatagramRejection.UnknownKey]))}");
    }

    [Theory]
    [InlineData(DatagramSecurity.Authenticate, 1121)]
    [InlineData(DatagramSecurity.Encrypt, 1122)]
    public void Keys_rotate_after_the_datagram_limit_under_loss_and_no_message_is_lost(DatagramSecurity mode, int seed)
    {
        const int Messages = 6_000;
        var cluster = new NodeCluster(seed, LinkOptions.LossyLan, maxDatagramSize: 1_472, security: Options(mode, maxPerKey: DatagramSecurityOptions.MinDatagramsPerKey));
        var all = cluster.AddNodes(4);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        uint firstKey = RegionOf(cluster, "prices").Key!.Id;
        var publisher = all[0];
        var keysSeen = new HashSet<uint> { firstKey };
        publisher.PublishNumbered("prices", Messages, size: 1_000, perSecond: 4_000); // one message per datagram
        bool done = cluster.Network.RunUntil(() =>
        {
            keysSeen.Add(RegionOf(cluster, "prices").Key!.Id);
            return all.All(n => n.Groups["prices"].CountFrom(publisher.Id) >= Messages);
        }, TimeSpan.FromMinutes(3));
        Assert.True(done, $"seed {seed}: {string.Join(", ", all.Select(n => n.Groups["prices"].CountFrom(publisher.Id)))} of {Messages}");
        foreach (var node in all)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups["prices"].Received[publisher.Id]);
            Assert.Equal(0, node.Stack!.Security!.Counters[DatagramRejection.BadTag] + node.Stack.Security.Counters[DatagramRejection.WrongKey]);
        }

        // 6,000 datagrams at 1,000 a key: the publisher asked for new keys, and the region went through several.
        Assert.True(cluster.Gms!.RekeysRequested >= 3, $"seed {seed}: {cluster.Gms.RekeysRequested} rekeys requested");
        Assert.True(keysSeen.Count >= 4, $"seed {seed}: keys seen {string.Join(", ", keysSeen)}");
        Assert.True(cluster.Network.Drops[Core.Diagnostics.DropReason.LinkLoss] > 50, "too little loss to test recovery");
        output.WriteLine($"seed {seed} {mode}: rekeys {cluster.Gms.RekeysRequested}, keys {string.Join(", ", keysSeen.Order())}; " +
            $"unknown-key drops {string.Join(", ", all.Select(n => n.Stack!.Security!.Counters[DatagramRejection.UnknownKey]))}");
    }

    [Fact]
    public void The_replicated_GMS_hands_out_the_same_keys_after_the_leader_fails()
    {
        const int Seed = 1131;
        var cluster = new NodeCluster(Seed, new LinkOptions(), security: Options(), gmsReplicas: 3);
        var all = cluster.AddNodes(4);
        cluster.Join(all, "prices");
        cluster.SettleViews("prices", all);
        var before = RegionOf(cluster, "prices");
        var replicas = cluster.Consensus!.Members.ToList();

        int crashed = cluster.CrashGmsLeader();
        cluster.Network.RunFor(TimeSpan.FromMilliseconds(400));
        int next = (crashed + 1) % replicas.Count;
        cluster.ElectGms(next);
        cluster.Require(() => cluster.Gms is { IsLeading: true }, TimeSpan.FromSeconds(10), "a new leader");
        cluster.Require(() => all.All(n => n.Gms!.CurrentGms == replicas[next].Address), TimeSpan.FromSeconds(30), "the nodes moving to the new leader");

        // The new leader derived the same key from the same log (the seed travels in the command), and hands it out again.
        var onNewLeader = RegionOf(cluster, "prices");
        Assert.Equal(before, onNewLeader);
        Assert.Equal(before.Key, onNewLeader.Key);
        foreach (var node in all)
        {
            Assert.Equal(before.Key!.Id, node.Stack!.Security!.ScopedKeys.IdsOf(before.Region.Value)[^1]);
        }

        // The stream goes on under it, and a join through the new leader rotates it for everyone.
        var publisher = all[0];
        publisher.PublishNumbered("prices", 500, perSecond: 2_000);
        cluster.Require(() => all.All(n => n.Groups["prices"].CountFrom(publisher.Id) == 500), TimeSpan.FromSeconds(20), "the messages after failover");
        var late = cluster.AddNodes(1)[0];
        late.Join("prices");
        cluster.SettleViews("prices", [.. all, late]);
        var rotated = RegionOf(cluster, "prices");
        Assert.NotEqual(before.Key!.Id, rotated.Key!.Id);
        foreach (var node in all.Append(late))
        {
            Assert.Equal(rotated.Key.Id, node.Stack!.Security!.ScopedKeys.IdsOf(rotated.Region.Value)[^1]);
            Assert.Equal(0, node.Stack.Security.Counters[DatagramRejection.BadTag] + node.Stack.Security.Counters[DatagramRejection.WrongKey]);
        }

        // Every live replica holds the same key bytes.
        foreach (var replica in replicas.Where(r => r.Server is not null && r != replicas[crashed]))
        {
            Assert.Equal(rotated.Key, replica.Server!.State.RegionViewOf(rotated.Region).Key);
        }

        output.WriteLine($"seed {Seed}: key {before.Key.Id} kept across failover, {rotated.Key.Id} after the join");
    }
}
