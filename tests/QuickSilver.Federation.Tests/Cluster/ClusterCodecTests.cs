using System.Net;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Peering;

namespace QuickSilver.Federation.Tests.Cluster;

public class ClusterCodecTests
{
    private static readonly SessionName Two = SessionName.Parse("bfed://1/tv/audio/video?multi-source=true");

    public static IEnumerable<object[]> Frames()
    {
        yield return [ClusterCodec.Heartbeat(new HeartbeatMessage(7, 3, 123456))];
        yield return [ClusterCodec.Release(new ReleaseMessage(7, Two))];
        yield return [ClusterCodec.Reset(new ResetMessage(7))];
        yield return [ClusterCodec.Heartbeat(new HeartbeatMessage(7, 3, 9) { Term = 2, LeaderHeard = true })];
        yield return [ClusterCodec.Lead(new LeadMessage(7) { Term = 5 })];
        yield return [ClusterCodec.Report(new ReportMessage(7, 3 << 24, [new ReportedSession(Two, [new FlowLabel(1), new FlowLabel(2)])]) { Term = 2 })];
        yield return [ClusterCodec.Report(new ReportMessage(7, 1, []) { Term = 2 })];
        yield return [ClusterCodec.Assign(new AssignMessage(7, 1 << 24, Two, false, [new FlowLabel(1), new FlowLabel(2)], new GatewayId(4), 9, [new FlowLabel(3), new FlowLabel(4)], [new DownstreamPeer(new GatewayId(5), 0), new DownstreamPeer(new GatewayId(6), 61)], ["239.1.1.1:5000", "239.1.1.2:5000"], []))];
        yield return [ClusterCodec.Assign(new AssignMessage(7, 0, Two, true, [new FlowLabel(1), new FlowLabel(2)], default, 0, [], [], [], ["tv/audio", "tv/video"]))];
        yield return [ClusterCodec.Assign(new AssignMessage(7, 1 << 24, Two, false, [new FlowLabel(1), new FlowLabel(2)], new GatewayId(4), 9, [new FlowLabel(3), new FlowLabel(4)],
            [new DownstreamPeer(new GatewayId(5), 0), new DownstreamPeer(new GatewayId(6), 61)], [], [],
            [new PeerDataNodeAddress(new GatewayId(4), 9, IPEndPoint.Parse("10.0.0.9:47401")), new PeerDataNodeAddress(new GatewayId(6), 61, IPEndPoint.Parse("[fd00::61]:47461"))]))];
    }

    [Theory]
    [MemberData(nameof(Frames))]
    public void EveryFrameRoundTripsAndEveryTruncationOrExtraByteIsRefused(byte[] frame)
    {
        Assert.Equal(FrameError.None, ClusterCodec.Decode(frame, out var m));
        var again = m switch
        {
            HeartbeatMessage h => ClusterCodec.Heartbeat(h),
            ReleaseMessage r => ClusterCodec.Release(r),
            ResetMessage r => ClusterCodec.Reset(r),
            AssignMessage a => ClusterCodec.Assign(a),
            LeadMessage l => ClusterCodec.Lead(l),
            ReportMessage r => ClusterCodec.Report(r),
            _ => throw new InvalidOperationException(),
        };
        Assert.Equal(frame, again);
        for (int cut = 0; cut < frame.Length; cut++)
        {
            Assert.NotEqual(FrameError.None, ClusterCodec.Decode(frame.AsSpan(0, cut), out var none));
            Assert.Null(none);
        }

        Assert.Equal(FrameError.TrailingBytes, ClusterCodec.Decode([.. frame, 0], out _));
    }

    [Fact]
    public void InconsistentAssignsAreRefused()
    {
        var labels = new[] { new FlowLabel(1), new FlowLabel(2) };
        // A root without Up channels; labels for an upstream that is 0; a downstream equal to the upstream; a label 0;
        // one label for a two-flow session.
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(new AssignMessage(7, 0, Two, true, labels, default, 0, [], [], [], [])), out _));
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(new AssignMessage(7, 0, Two, false, labels, default, 0, labels, [], [], [])), out _));
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(new AssignMessage(7, 0, Two, false, labels, new GatewayId(4), 0, [], [new DownstreamPeer(new GatewayId(4), 0)], [], [])), out _));
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(new AssignMessage(7, 0, Two, false, [new FlowLabel(0), new FlowLabel(2)], default, 0, [], [], [], [])), out _));
        Assert.Equal(FrameError.BadLength, ClusterCodec.Decode(ClusterCodec.Assign(new AssignMessage(7, 0, Two, false, [new FlowLabel(1)], default, 0, [], [], [], [])), out _));
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Reset(new ResetMessage(0)), out _));
        Assert.Equal(FrameError.UnknownType, ClusterCodec.Decode([ClusterCodec.Version, 99, 7, 0, 0, 0, 1, 0, 0, 0], out _));
        Assert.Equal(FrameError.BadVersion, ClusterCodec.Decode([3, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], out _));
        Assert.Equal(FrameError.BadVersion, ClusterCodec.Decode([1, 4, 7, 0, 0, 0], out _)); // version 1 (no term) is refused
    }

    [Fact]
    public void RandomBytesNeverThrow()
    {
        var random = new Random(11);
        for (int i = 0; i < 20_000; i++)
        {
            var junk = new byte[random.Next(0, 200)];
            random.NextBytes(junk);
            if (junk.Length > 1)
            {
                junk[0] = ClusterCodec.Version;
                junk[1] = (byte)random.Next(0, 8);
            }

            _ = ClusterCodec.Decode(junk, out _);
        }
    }

    [Fact]
    public void DataEndpointRoundTripsOnThePeeringLink()
    {
        var frame = PeerCodec.DataEndpoint(Two, 61);
        Assert.Equal(FrameError.None, PeerCodec.Decode(frame, out var m));
        Assert.Equal(new DataEndpointMessage(Two, 61), m);
        Assert.Equal(FrameError.Truncated, PeerCodec.Decode(frame.AsSpan(0, frame.Length - 1), out _));
    }

    [Fact]
    public void DataEndpointCarriesTheDataNodesAddressAndRefusesBadOnes()
    {
        foreach (var address in new[] { IPEndPoint.Parse("192.0.2.7:47421"), IPEndPoint.Parse("[2001:db8::7]:47421") })
        {
            var frame = PeerCodec.DataEndpoint(Two, 61, address);
            Assert.Equal(FrameError.None, PeerCodec.Decode(frame, out var m));
            Assert.Equal(new DataEndpointMessage(Two, 61, address), m);
            for (int n = 0; n < frame.Length; n++)
            {
                Assert.NotEqual(FrameError.None, PeerCodec.Decode(frame.AsSpan(0, n), out _));
            }
        }

        // The gateway itself (node 0) has no address: the encoder leaves it out, the decoder refuses one.
        Assert.Equal(PeerCodec.DataEndpoint(Two, 0), PeerCodec.DataEndpoint(Two, 0, IPEndPoint.Parse("192.0.2.7:1")));
        var withAddress = PeerCodec.DataEndpoint(Two, 61, IPEndPoint.Parse("192.0.2.7:47421"));
        int nodeAt = withAddress.Length - 4 - 1 - 4 - 2;
        var zero = (byte[])withAddress.Clone();
        zero.AsSpan(nodeAt, 4).Clear();
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(zero, out _));
        var family = (byte[])withAddress.Clone();
        family[nodeAt + 4] = 5;
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(family, out _));
        var port = (byte[])withAddress.Clone();
        port.AsSpan(port.Length - 2).Clear();
        Assert.Equal(FrameError.BadValue, PeerCodec.Decode(port, out _));
    }

    [Fact]
    public void AnAssignMayCarryAddressesOnlyForTheDataNodesItNames()
    {
        FlowLabel[] labels = [new FlowLabel(1), new FlowLabel(2)];
        AssignMessage Assign(params PeerDataNodeAddress[] nodes) => new(7, 0, Two, false, labels, new GatewayId(4), 9, [], [new DownstreamPeer(new GatewayId(6), 61)], [], [], nodes);
        var a = IPEndPoint.Parse("10.0.0.9:47401");
        Assert.Equal(FrameError.None, ClusterCodec.Decode(ClusterCodec.Assign(Assign(new PeerDataNodeAddress(new GatewayId(4), 9, a), new PeerDataNodeAddress(new GatewayId(6), 61, a))), out var m));
        Assert.Equal([new PeerDataNodeAddress(new GatewayId(4), 9, a), new PeerDataNodeAddress(new GatewayId(6), 61, a)], ((AssignMessage)m!).PeerNodes);
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(Assign(new PeerDataNodeAddress(new GatewayId(4), 10, a))), out _)); // not the upstream's node
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(Assign(new PeerDataNodeAddress(new GatewayId(5), 61, a))), out _)); // not that gateway's
        Assert.Equal(FrameError.BadValue, ClusterCodec.Decode(ClusterCodec.Assign(Assign(
            new PeerDataNodeAddress(new GatewayId(4), 9, a), new PeerDataNodeAddress(new GatewayId(6), 61, a), new PeerDataNodeAddress(new GatewayId(6), 61, a))), out _)); // more than named
    }

    [Fact]
    public void BadClusterOptionsAreRefusedByName()
    {
        Assert.Equal("DataNodes", Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions().Validate()).ParamName);
        Assert.Equal("DataNodes", Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [3, 3] }.Validate()).ParamName);
        Assert.Equal("HeartbeatTimeout", Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [3], HeartbeatTimeout = TimeSpan.FromSeconds(1) }.Validate()).ParamName);
        Assert.Equal("SessionHold", Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [3], SessionHold = TimeSpan.FromSeconds(5) }.Validate()).ParamName);
    }
}
