using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.Region;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// Issue 12's first findings, replayed in the whole stack on virtual time: a registered node in none of the group's
/// regions multicasts well-formed region data into the group while a member publishes, as a hostile host on the same
/// network would. Forged messages were delivered (1,000,143 for 1,000,000 published, 143 "from" sender 777), and one
/// packet numbered 2^62 stopped the group for good. Now data is taken only from senders the views admit, at their
/// addresses (docs/security.md, "Accept only members"); a packet with a real sender's address and an extreme sequence
/// (which only a host that forges its source can send) is held to the receive window.
/// </summary>
public sealed class HostileDataSimulationTests(ITestOutputHelper output)
{
    private const string Group = "hostile";

    [Theory]
    [InlineData(1301)]
    [InlineData(1302)]
    public void Forged_data_is_neither_delivered_nor_stalls_the_group(int seed)
    {
        const int Messages = 20_000; // 1,000 B each: about 1,300 packets
        var cluster = new NodeCluster(seed, new LinkOptions(), new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100) });
        var members = cluster.AddNodes(3);
        cluster.Join(members, Group);
        cluster.SettleViews(Group, members);
        var hostile = cluster.AddNodes(1)[0]; // registered with the GMS, but in no group
        var sender = members[0];
        sender.PublishNumbered(Group, Messages, size: 1_000);
        cluster.Require(() => members.All(n => n.Groups[Group].CountFrom(sender.Id) >= Messages / 4), TimeSpan.FromSeconds(10), "a quarter delivered");

        var view = members[1].Region!.Member!.View!;
        uint group = members[1].Groups[Group].View!.Group.Value;
        var targets = view.MulticastAddress is { } multicast ? [multicast] : view.Members.Select(m => m.Address).ToArray();
        ulong next = sender.Region!.Senders.Values.Single().LastSequence + 1;
        var forgeries = new (uint Sender, uint View, ulong Seq, NetAddress Source)[]
        {
            (777, view.ViewNumber, 1, hostile.Endpoint.LocalAddress),              // a sender no view admits
            (777, view.ViewNumber, 2, sender.Endpoint.LocalAddress),               // ... claiming a member's address
            (sender.Id, view.ViewNumber, 1UL << 62, hostile.Endpoint.LocalAddress), // a real sender's id, far ahead
            (sender.Id, view.ViewNumber, next + 10_000_000, hostile.Endpoint.LocalAddress),
            (sender.Id, RegionWire.RepairView, next, hostile.Endpoint.LocalAddress), // a "repair" from outside the view
            (hostile.Id, view.ViewNumber, 1, hostile.Endpoint.LocalAddress),         // the hostile node as itself
            (sender.Id, view.ViewNumber, 1UL << 62, sender.Endpoint.LocalAddress),  // a forged source: held to the window
        };

        var forgedAt = cluster.Network.Now;
        Assert.True(members.Any(n => n.Groups[Group].CountFrom(sender.Id) < Messages), "everything arrived before the forgeries: they test nothing");
        long notAMemberBefore = members.Sum(n => n.Region!.Member!.Drops[DropReason.NotAMember]);
        var datagram = new byte[512];
        foreach (var (id, viewNumber, seq, source) in forgeries)
        {
            int length = Forge(datagram, id, view.Region.Value, viewNumber, seq, group);
            foreach (var to in targets)
            {
                cluster.Network.SendSpoofed(hostile.Endpoint, source, to, datagram.AsSpan(0, length));
            }
        }

        bool done = cluster.Network.RunUntil(() => members.All(n => n.Groups[Group].CountFrom(sender.Id) == Messages), TimeSpan.FromSeconds(30));
        long notAMember = members.Sum(n => n.Region!.Member!.Drops[DropReason.NotAMember]) - notAMemberBefore;
        output.WriteLine($"seed {seed}: forged at {forgedAt}, done {done} at {cluster.Network.Now}; dropped as not a member: {notAMember}; " +
                         string.Join(", ", members.Select(n => $"node {n.Id}: {n.Region!.Member!.Describe()}")));

        Assert.True(done, $"seed {seed}: delivery stopped: {string.Join(", ", members.Select(n => n.Groups[Group].CountFrom(sender.Id)))} of {Messages}");
        foreach (var node in members)
        {
            Assert.Equal(Enumerable.Range(1, Messages), node.Groups[Group].Received[sender.Id]);
            Assert.Equal([sender.Id], node.Groups[Group].Received.Keys);
            Assert.Null(node.Region!.Member!.Progress(777));
            Assert.Null(node.Region.Member.Progress(hostile.Id));
        }

        // Six of the seven reach each member and are refused for where they come from (the last is taken, then dropped
        // beyond the window); with multicast each member sees each once, with fan-out likewise.
        Assert.Equal(6 * members.Count, notAMember);
    }

    /// <summary>A region data packet carrying one group record (group message 1, then the sequence) for
    /// <paramref name="group"/>.</summary>
    private static int Forge(Span<byte> datagram, uint sender, uint region, uint view, ulong seq, uint group)
    {
        Span<byte> payload = stackalloc byte[GroupWire.HeaderSize + 100];
        BitConverter.TryWriteBytes(payload[GroupWire.HeaderSize..], 999_999);
        int length = GroupWire.Write(payload, group, seq, payload.Slice(GroupWire.HeaderSize, 100));
        return RegionWire.WriteData(datagram, new DataHeader(sender, region, view, seq, seq), payload[..length]);
    }
}
