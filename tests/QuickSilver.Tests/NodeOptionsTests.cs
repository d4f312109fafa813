using QuickSilver.Core.Io;

namespace QuickSilver.Tests;

public sealed class NodeOptionsTests
{
    [Fact]
    public void The_datagram_size_fits_the_interface_unless_given()
    {
        Assert.Equal(16 * 1024, new QuickSilverNodeOptions().DatagramSize);                                     // loopback
        Assert.Equal(1472, new QuickSilverNodeOptions { Bind = new NetAddress(0x0A000001, 0) }.DatagramSize);   // 10.0.0.1: Ethernet
        Assert.Equal(1472, new QuickSilverNodeOptions { Bind = new NetAddress(0, 0) }.DatagramSize);            // any interface
        Assert.Equal(9000, new QuickSilverNodeOptions { Bind = new NetAddress(0x0A000001, 0), MaxDatagramSize = 9000 }.DatagramSize);
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new QuickSilverNodeOptions { MaxDatagramSize = 100 }.Validate());
        Assert.Contains("MaxDatagramSize", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void GMS_replica_lists_are_validated_naming_the_option()
    {
        var three = new[] { NetAddress.Loopback(47001), NetAddress.Loopback(47002), NetAddress.Loopback(47003) };
        new QuickSilverNodeOptions { GmsReplicas = three }.Validate();
        var twice = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { GmsReplicas = [three[0], three[0]] }.Validate());
        Assert.Contains("QuickSilverNodeOptions.GmsReplicas", twice.Message, StringComparison.Ordinal);
        var many = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { GmsReplicas = [.. Enumerable.Range(1, 8).Select(i => NetAddress.Loopback((ushort)(47000 + i)))] }.Validate());
        Assert.Contains("at most 7", many.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { GmsReplicas = [new NetAddress(0xEFFF0001, 1)] }.Validate());
        var embedded = Assert.Throws<ArgumentException>(() => new QuickSilverNodeOptions { GmsReplicas = three, EmbeddedGms = true }.Validate());
        Assert.Contains("EmbeddedGms", embedded.Message, StringComparison.Ordinal);
        Assert.Equal(three[0], new QuickSilverNodeOptions { GmsReplicas = three }.FirstGms);
    }

    [Fact]
    public void Replica_options_are_validated_naming_the_option()
    {
        var peers = new[] { NetAddress.Loopback(47001), NetAddress.Loopback(47002), NetAddress.Loopback(47003) };
        var good = new QuickSilver.Membership.Raft.RaftGmsOptions { Id = 2, Peers = peers, DataDirectory = "d" };
        good.Validate();
        Assert.Equal(peers[1], good.Self);
        Assert.Contains("RaftGmsOptions.Id", Assert.ThrowsAny<ArgumentException>(() => (good with { Id = 4 }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("RaftGmsOptions.DataDirectory", Assert.ThrowsAny<ArgumentException>(() => (good with { DataDirectory = " " }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("RaftGmsOptions.Peers", Assert.ThrowsAny<ArgumentException>(() => (good with { Peers = [] }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("UpperElectionTimeout", Assert.ThrowsAny<ArgumentException>(() => (good with { UpperElectionTimeout = good.LowerElectionTimeout }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("RequestTimeout", Assert.ThrowsAny<ArgumentException>(() => (good with { RequestTimeout = good.LowerElectionTimeout }).Validate()).Message, StringComparison.Ordinal);
    }
}
