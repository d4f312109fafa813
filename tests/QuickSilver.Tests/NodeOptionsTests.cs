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

    /// <summary>The core's, the endpoint's and the reliable layer's bounds are node options (issue 12 item 5;
    /// docs/security.md, "Bounds"): each bad value is refused naming the option.</summary>
    [Theory]
    [InlineData("DowncallQueueCapacity")]
    [InlineData("SendQueueCapacity")]
    [InlineData("SocketReceiveBufferBytes")]
    [InlineData("SocketSendBufferBytes")]
    [InlineData("ReliableUnicast.MaxPeers")]
    [InlineData("ReliableUnicast.SendBufferSegments")]
    [InlineData("ReliableUnicast.MaxSegmentBytes")]
    public void The_core_endpoint_and_reliable_bounds_are_validated_naming_the_option(string option)
    {
        var good = new QuickSilverNodeOptions();
        good.Validate();
        var bad = option switch
        {
            "DowncallQueueCapacity" => good with { DowncallQueueCapacity = 1 },
            "SendQueueCapacity" => good with { SendQueueCapacity = 0 },
            "SocketReceiveBufferBytes" => good with { SocketReceiveBufferBytes = 100 },
            "SocketSendBufferBytes" => good with { SocketSendBufferBytes = 1000 },
            "ReliableUnicast.MaxPeers" => good with { ReliableUnicast = new() { MaxPeers = 0 } },
            "ReliableUnicast.SendBufferSegments" => good with { ReliableUnicast = new() { SendBufferSegments = 64, MaxMessageBytes = 4 << 20 } },
            _ => good with { MaxDatagramSize = 1472, ReliableUnicast = new() { MaxSegmentBytes = 9000 } },
        };
        var e = Assert.ThrowsAny<ArgumentException>(bad.Validate);
        Assert.Contains($"QuickSilverNodeOptions.{option}", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Reliable_segments_fit_the_datagrams_unless_set_smaller()
    {
        Assert.Equal(16 * 1024 - 64, new QuickSilverNodeOptions().EffectiveReliableUnicast.MaxSegmentBytes);
        Assert.Equal(1472 - 64, new QuickSilverNodeOptions { MaxDatagramSize = 1472 }.EffectiveReliableUnicast.MaxSegmentBytes);
        Assert.Equal(1000, new QuickSilverNodeOptions { ReliableUnicast = new() { MaxSegmentBytes = 1000 } }.EffectiveReliableUnicast.MaxSegmentBytes);
        var options = new QuickSilverNodeOptions { ReliableUnicast = new() { MaxPeers = 77 } };
        Assert.Equal(77, options.EffectiveReliableUnicast.MaxPeers);
        Assert.Equal(options.SendQueueCapacity, options.EndpointOptions(options.Bind).SendQueueCapacity);
    }

    /// <summary>A node runs its core, endpoint and reliable layer with the bounds it was given, and refuses at start a
    /// bad one, naming it.</summary>
    [Fact]
    public async Task A_node_runs_with_the_bounds_it_was_given_and_refuses_a_bad_one_at_start()
    {
        var gms = NodeTests.FreeGmsAddress();
        var options = NodeTests.Options(gms, embedded: true) with
        {
            DowncallQueueCapacity = 1024,
            SendQueueCapacity = 64,
            SocketReceiveBufferBytes = 1 << 20,
            ReliableUnicast = new() { MaxPeers = 100, SendBufferSegments = 512 },
        };
        await using (var node = await QuickSilverNode.StartAsync(options))
        {
            Assert.Equal(1024, node.Core.Options.DowncallQueueCapacity);
            var endpoint = Assert.IsType<UdpEndpoint>(node.Stack.Transport, exactMatch: false);
            Assert.Equal(64, endpoint.Options.SendQueueCapacity);
            Assert.Equal(1 << 20, endpoint.Options.SocketReceiveBufferBytes);
            var reliable = node.Stack.Get<QuickSilver.Transport.Reliable.ReliableUnicast>().Options;
            Assert.Equal(100, reliable.MaxPeers);
            Assert.Equal(512, reliable.SendBufferSegments);
            Assert.Equal(options.DatagramSize - 64, reliable.MaxSegmentBytes);
        }

        var e = await Assert.ThrowsAnyAsync<ArgumentException>(() => QuickSilverNode.StartAsync(options with { SendQueueCapacity = 0 }));
        Assert.Contains("QuickSilverNodeOptions.SendQueueCapacity", e.Message, StringComparison.Ordinal);
    }
}
