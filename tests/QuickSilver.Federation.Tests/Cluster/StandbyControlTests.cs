using System.Buffers.Binary;
using System.Net;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Gateway;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Runtime;
using QuickSilver.Federation.Simulation;
using Xunit.Abstractions;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>A clustered gateway with a standby control node (docs/federation.md, "Standby control node"), on virtual
/// time, seeded: g1 (owner island 1) has a primary and a standby control node and data nodes 101 and 102; g2 (island 2)
/// is an ordinary gateway whose clients receive. The primary crashes while sessions flow.</summary>
public class StandbyControlTests(ITestOutputHelper output)
{
    private static readonly TimeSpan Latency = TimeSpan.FromMilliseconds(5);
    private static readonly byte[] Secret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)];
    private static readonly byte[] OtherSecret = [.. Enumerable.Range(101, 32).Select(i => (byte)i)];
    private const int Sessions = 4;

    private static SessionName Session(int i) => ClusterSimTests.Session(i);

    private static List<int> Ids(FederationSim.SimClient client) => ClusterSimTests.Ids(client);

    private static (FederationSim Sim, FederationSim.SimIsland I1, FederationSim.SimClient[] Clients) Setup(int seed, byte[]? secret = null)
    {
        var sim = new FederationSim(seed) { RecordClusterFrames = true };
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        sim.AddClusteredGateway(1, i1, [101, 102], cluster: c => c with { ClusterSecret = secret }, standby: true);
        sim.AddGateway(2, i2);
        sim.Connect(1, 2, Latency);
        sim.RunFor(TimeSpan.FromSeconds(2));
        var clients = Enumerable.Range(0, Sessions).Select(i => i2.Join(Session(i))).ToArray();
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(clients, c => Assert.Equal(MediatorReplyKind.Translation, c.Reply!.Kind));
        Assert.True(sim[1].IsActive);
        Assert.False(sim.Standby(1).IsActive);
        Assert.Equal(0, sim.Standby(1).Counters.PeersRefusedPassive); // the peer dialled the primary, which accepted
        return (sim, i1, clients);
    }

    private static void Publish(FederationSim sim, FederationSim.SimIsland island, int from, int count, TimeSpan every)
        => ClusterSimTests.Publish(sim, island, Sessions, from, count, every);

    /// <summary>Sessions flow, the primary's process dies (links reset), the standby takes over: returns it.</summary>
    private static BroadcastGateway TakeOver(FederationSim sim, FederationSim.SimIsland i1)
    {
        Publish(sim, i1, 0, 20, TimeSpan.FromMilliseconds(10));
        sim.CrashClosingLinks(1);
        Publish(sim, i1, 20, 100, TimeSpan.FromMilliseconds(100));
        return sim.Standby(1);
    }

    /// <summary>The primary crashes silently (a machine stops; its peer notices only after the 30 s hold time) or its
    /// links reset (a process dies; the peer notices at once) while four sessions flow. The standby takes over within
    /// the takeover timeout (3 s) plus two heartbeat intervals, adopts every session where it was, with its labels; the
    /// peer redials, and data resumes end to end, each packet once.</summary>
    [Theory]
    [InlineData(31, false)]
    [InlineData(32, true)]
    public void ThePrimaryCrashesTheStandbyTakesOverSessionsStayOnTheirDataNodesAndDataResumes(int seed, bool linksReset)
    {
        var (sim, i1, clients) = Setup(seed);
        Publish(sim, i1, 0, 50, TimeSpan.FromMilliseconds(10));
        var primary = sim[1];
        var standby = sim.Standby(1);
        var placement = Enumerable.Range(0, Sessions).ToDictionary(i => i, i => primary.Cluster!.NodeOf(Session(i)));
        var labels = Enumerable.Range(0, Sessions).ToDictionary(i => i, i => primary.Sessions[Session(i)].Labels);
        Assert.All(placement.Values, n => Assert.NotNull(n));

        var crashedAt = sim.Now;
        if (linksReset)
        {
            sim.CrashClosingLinks(1);
        }
        else
        {
            sim.Crash(1);
        }

        // 45 s at one round every 100 ms (packets 50..499): detection, takeover, redial, re-join.
        Publish(sim, i1, 50, 450, TimeSpan.FromMilliseconds(100));
        Assert.True(standby.IsActive);
        Assert.Equal(2u, standby.Cluster!.Term);
        Assert.Equal(1, standby.Cluster.Counters.Takeovers);
        var takeover = standby.Cluster.Counters.TookOverAt - crashedAt;
        var options = standby.Cluster.Options;
        Assert.InRange(takeover, options.TakeoverTimeout, options.TakeoverTimeout + (3 * options.HeartbeatInterval));
        Assert.Same(standby, sim.LinkedInstance(1, 2));
        foreach (int i in Enumerable.Range(0, Sessions))
        {
            Assert.Equal(placement[i], standby.Cluster.NodeOf(Session(i))); // kept where it was
            Assert.Equal(labels[i], standby.Sessions[Session(i)].Labels); // with its labels
        }

        Assert.Equal(Sessions, standby.Cluster.Counters.SessionsAdopted);
        Assert.Equal(0, sim.DataNode(101).Counters.Resets + sim.DataNode(102).Counters.Resets - 2); // only the first RESET each
        Assert.Equal(2u, sim.DataNode(101).Term);

        Publish(sim, i1, 500, 50, TimeSpan.FromMilliseconds(10));
        int firstLost = int.MaxValue;
        int lastLost = -1;
        int totalLost = 0;
        for (int i = 0; i < Sessions; i++)
        {
            var got = Ids(clients[i]);
            Assert.Equal(got.Distinct().Order(), got); // once each, in order
            Assert.True(Enumerable.Range(0, 50).All(got.Contains), $"session {i} lost a packet before the crash");
            Assert.True(Enumerable.Range(500, 50).All(got.Contains), $"session {i} lost a packet after the takeover");
            var lost = Enumerable.Range(50, 450).Where(p => !got.Contains(p)).ToList();
            totalLost += lost.Count;
            if (lost.Count > 0)
            {
                firstLost = Math.Min(firstLost, lost[0]);
                lastLost = Math.Max(lastLost, lost[^1]);
            }

            output.WriteLine($"session {i} on node {placement[i]}: lost {lost.Count} of 450 during the takeover ({(lost.Count == 0 ? "none" : $"packets {lost[0]}..{lost[^1]}")})");
        }

        output.WriteLine($"links {(linksReset ? "reset" : "silent")}: takeover {takeover.TotalSeconds:F2} s after the crash; lost packets {firstLost}..{lastLost} (100 ms apart), {totalLost} in all");
        // What is lost: from the moment g2 drops its link to the crashed primary (at once when links reset, after its
        // 30 s hold time when silent) until it has re-joined through the new primary (a redial interval, a takeover
        // if not yet done, one round trip). Sessions flow untouched before that: the data nodes never stopped.
        if (linksReset)
        {
            Assert.InRange(firstLost, 50, 52);
        }
        else
        {
            Assert.InRange(firstLost, 250, 360); // 20-31 s after the crash: the hold time from the last frame heard
        }

        Assert.InRange(lastLost - firstLost, 0, 80); // at most 8 s dark
        Assert.Equal(0, sim[2].Counters.DuplicatesDropped);
    }

    /// <summary>The clustered gateway with the standby is the leaf: g2 (island 2, primary and standby control nodes, data
    /// nodes 201 and 202) whose clients receive from g1. Its primary's process dies (links reset). The standby rebuilds
    /// each session's tree from the data nodes' REPORTs, with the same labels and the same Down channels, joins upstream
    /// once g1 redialled it, and data reaches the clients again without any client re-joining.</summary>
    [Theory]
    [InlineData(36)]
    [InlineData(37)]
    public void AtTheLeafTheStandbyRebuildsTreesWithTheSameChannelsAndClientsNeedNotRejoin(int seed)
    {
        var sim = new FederationSim(seed);
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        sim.AddGateway(1, i1);
        sim.AddClusteredGateway(2, i2, [201, 202], standby: true);
        sim.Connect(1, 2, Latency);
        sim.RunFor(TimeSpan.FromSeconds(2));
        var clients = Enumerable.Range(0, Sessions).Select(i => i2.Join(Session(i))).ToArray();
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(clients, c => Assert.Equal(MediatorReplyKind.Translation, c.Reply!.Kind));
        Publish(sim, i1, 0, 30, TimeSpan.FromMilliseconds(10));
        var primary = sim[2];
        var placement = Enumerable.Range(0, Sessions).ToDictionary(i => i, i => primary.Cluster!.NodeOf(Session(i)));
        var addresses = Enumerable.Range(0, Sessions).ToDictionary(i => i, i => primary.Sessions[Session(i)].LocalChannels![0].Address);

        sim.CrashClosingLinks(2);
        Publish(sim, i1, 30, 150, TimeSpan.FromMilliseconds(100));
        var standby = sim.Standby(2);
        Assert.True(standby.IsActive);
        Assert.Equal(Sessions, standby.Counters.TreesRebuilt);
        Assert.Equal(Sessions, standby.Counters.LabelsAdopted);
        foreach (int i in Enumerable.Range(0, Sessions))
        {
            Assert.Equal(placement[i], standby.Cluster!.NodeOf(Session(i)));
            Assert.Equal(addresses[i], standby.Sessions[Session(i)].LocalChannels![0].Address);
            Assert.Equal(new GatewayId(1), standby.Sessions[Session(i)].Upstream);
        }

        Publish(sim, i1, 180, 30, TimeSpan.FromMilliseconds(10));
        for (int i = 0; i < Sessions; i++)
        {
            var got = Ids(clients[i]);
            Assert.Equal(got.Distinct().Order(), got);
            Assert.True(Enumerable.Range(0, 30).All(got.Contains));
            Assert.True(Enumerable.Range(180, 30).All(got.Contains), $"session {i} did not resume");
            var lost = Enumerable.Range(30, 150).Where(p => !got.Contains(p)).ToList();
            output.WriteLine($"session {i}: lost {lost.Count} of 150 during the takeover{(lost.Count == 0 ? "" : $" (packets {lost[0]}..{lost[^1]}, 100 ms apart)")}");
            Assert.InRange(lost.Count, 0, 80);
        }

        Assert.Equal(0, i2.Mediator.Joins - Sessions); // nobody joined again
    }

    /// <summary>The old primary comes back with the state it had (it was paused, not restarted), believing it leads
    /// term 1: the data nodes drop its ASSIGNs (counted), it hears term 2 and steps down, no packet is forwarded twice.</summary>
    [Fact]
    public void TheOldPrimaryComingBackStepsDownAndNothingIsForwardedTwice()
    {
        var (sim, i1, clients) = Setup(33, Secret);
        var standby = TakeOver(sim, i1);
        Assert.True(standby.IsActive);

        sim.Revive(1);
        var old = sim[1];
        Assert.True(old.IsActive); // until it hears the new term
        old.Tick(sim.Now); // it acts on its stale belief before anything reaches it: LEAD and due ASSIGN refreshes, term 1
        Assert.True(old.Cluster!.Counters.AssignsSent > 0);
        Publish(sim, i1, 120, 50, TimeSpan.FromMilliseconds(100));
        Assert.False(old.IsActive);
        Assert.Equal(1, old.Cluster.Counters.StepDowns);
        Assert.Empty(old.Sessions);
        Assert.Empty(old.Peers);
        Assert.True(standby.IsActive);
        Assert.Equal(0, standby.Cluster!.Counters.StepDowns);
        long stale = sim.DataNode(101).Counters.StaleTerm + sim.DataNode(102).Counters.StaleTerm;
        Assert.True(stale > 0, "the old primary's frames reached the data nodes and were dropped");

        Publish(sim, i1, 170, 50, TimeSpan.FromMilliseconds(10));
        for (int i = 0; i < Sessions; i++)
        {
            var got = Ids(clients[i]);
            Assert.Equal(got.Distinct().Order(), got);
            Assert.True(Enumerable.Range(120, 100).All(got.Contains), $"session {i} lost a packet after the old primary returned");
        }

        var crossings = sim.DataSent.Where(d => d.From.Value == 1).GroupBy(d => (d.To, d.Origin, d.Sequence)).Where(g => g.Count() > 1).ToList();
        Assert.Empty(crossings); // no packet crossed g1 → g2 twice
        Assert.Equal(0, sim[2].Counters.DuplicatesDropped);
        output.WriteLine($"old primary's frames dropped by data nodes as stale: {stale}");
    }

    /// <summary>With the cluster secret, after the takeover: forged frames claiming a higher term (unsealed, or sealed
    /// under another secret) move no data node and depose no control node; the data nodes' recorded term-2 frames
    /// replayed are refused; all counted; data still flows.</summary>
    [Fact]
    public void ForgedHigherTermAndReplayedFramesAreRefused()
    {
        var (sim, i1, clients) = Setup(34, Secret);
        var standby = TakeOver(sim, i1);
        Assert.Equal(2u, standby.Cluster!.Term);
        var recorded = sim.ClusterFrames.Where(f => !f.ToControl && f.Node == 101 && f.Frame[1] == (byte)ClusterFrameType.Assign).Select(f => f.Frame).TakeLast(3).ToList();
        Assert.NotEmpty(recorded);

        var forger = new ClusterAuthenticator(OtherSecret, ulong.MaxValue / 2);
        var n101 = sim.DataNode(101);
        long unauthenticated = n101.Counters.Unauthenticated;
        long replayed = n101.Counters.Replayed;
        var reset = ClusterCodec.Reset(new ResetMessage(101) { Term = 99 });
        var lead = ClusterCodec.Lead(new LeadMessage(1) { Term = 99 });
        foreach (var f in new[] { reset, forger.Seal(reset) })
        {
            sim.InjectToDataNode(101, f);
        }

        foreach (var f in new[] { lead, forger.Seal(lead) })
        {
            sim.InjectToStandby(1, f);
        }

        foreach (var r in recorded)
        {
            sim.InjectToDataNode(101, r);
        }

        Assert.Equal(unauthenticated + 2, n101.Counters.Unauthenticated);
        Assert.Equal(replayed + recorded.Count, n101.Counters.Replayed);
        Assert.Equal(2u, n101.Term);
        Assert.True(standby.IsActive);
        Assert.Equal(2, standby.Cluster.Counters.Unauthenticated);
        Assert.Equal(2u, standby.Cluster.HighestTerm);

        Publish(sim, i1, 120, 30, TimeSpan.FromMilliseconds(10));
        Assert.All(clients, c => Assert.True(Enumerable.Range(120, 30).All(Ids(c).Contains)));
    }

    /// <summary>Without a secret a forged frame of a higher term is followed (why production needs the secret), but an
    /// old-term frame never is: a data node drops it and counts it.</summary>
    [Fact]
    public void WithoutASecretOldTermFramesAreStillDropped()
    {
        var (sim, i1, _) = Setup(35);
        Publish(sim, i1, 0, 10, TimeSpan.FromMilliseconds(10));
        var n = sim.DataNode(101);
        Assert.Equal(1u, n.Term);
        int held = n.SessionCount;
        sim.InjectToDataNode(101, ClusterCodec.Lead(new LeadMessage(101) { Term = 3 }));
        Assert.Equal(3u, n.Term);
        sim.InjectToDataNode(101, ClusterCodec.Reset(new ResetMessage(101) { Term = 1 }));
        Assert.Equal(1, n.Counters.StaleTerm);
        Assert.Equal(held, n.SessionCount);
    }

    /// <summary>With one control node terms play no part: a HEARTBEAT reporting fewer sessions than placed (a restart
    /// between two heartbeats) still makes the control node send that node's ASSIGNs again.</summary>
    [Fact]
    public void WithOneControlNodeAHeartbeatReportingFewerSessionsStillResendsAssigns()
    {
        var sim = new FederationSim(38);
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        sim.AddClusteredGateway(1, i1, [101]);
        sim.AddGateway(2, i2);
        sim.Connect(1, 2, Latency);
        sim.RunFor(TimeSpan.FromSeconds(2));
        _ = i2.Join(Session(0));
        sim.RunFor(TimeSpan.FromSeconds(1));
        var control = sim[1].Cluster!;
        Assert.Equal(1, control.Load[101]);
        long sent = control.Counters.AssignsSent;
        sim.InjectToControl(1, ClusterCodec.Heartbeat(new HeartbeatMessage(101, 0, 0)));
        sim.RunFor(TimeSpan.FromMilliseconds(300));
        Assert.Equal(1, control.Counters.NodeRestarts);
        Assert.True(control.Counters.AssignsSent > sent);
    }

    [Fact]
    public void APeerWithAStandbyIsTwoAddressesDialledInTurn()
    {
        var one = PeerConfig.Parse("2@127.0.0.1:47202/1,5,1");
        Assert.Null(one.Standby);
        Assert.Equal([IPEndPoint.Parse("127.0.0.1:47202")], one.Addresses);
        var two = PeerConfig.Parse("2@127.0.0.1:47202,[::1]:47203/1,5,1");
        Assert.Equal([IPEndPoint.Parse("127.0.0.1:47202"), IPEndPoint.Parse("[::1]:47203")], two.Addresses);
        Assert.Equal(new LinkCosts(1, 5, 1), two.Costs);
        foreach (var bad in new[] { "2@127.0.0.1:1,127.0.0.1:1", "2@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "2@127.0.0.1:1,", "2@127.0.0.1:1,nowhere" })
        {
            Assert.Throws<FormatException>(() => PeerConfig.Parse(bad));
        }
    }

    [Fact]
    public void BadStandbyOptionsNameTheOption()
    {
        var bad = Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [101], ControlNodes = 3 }.Validate());
        Assert.Equal(nameof(ClusterOptions.ControlNodes), bad.ParamName);
        bad = Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [101], Standby = true }.Validate());
        Assert.Equal(nameof(ClusterOptions.Standby), bad.ParamName);
        bad = Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [101], ControlNodes = 2, TakeoverTimeout = TimeSpan.FromSeconds(2) }.Validate());
        Assert.Equal(nameof(ClusterOptions.TakeoverTimeout), bad.ParamName);
        new ClusterOptions { DataNodes = [101], ControlNodes = 2, Standby = true }.Validate();
    }

    [Fact]
    public void LeadAndReportRoundTripAndAReportSplitsAtTheFrameBound()
    {
        var lead = ClusterCodec.Lead(new LeadMessage(7) { Term = 4 });
        Assert.Equal(FrameError.None, ClusterCodec.Decode(lead, out var m));
        Assert.Equal(new LeadMessage(7) { Term = 4 }, m);
        var sessions = Enumerable.Range(0, 3000).Select(i => new ReportedSession(SessionName.Parse($"bfed://1/a-rather-long-native-session-name-{i}/d"), [new FlowLabel((uint)i + 1)])).ToList();
        var frames = ClusterCodec.Reports(7, 4, 5 << 24, sessions, ClusterAuthenticator.Overhead);
        Assert.True(frames.Count > 1);
        var back = new List<ReportedSession>();
        foreach (var f in frames)
        {
            Assert.True(f.Length <= ClusterCodec.MaxFrameBytes - ClusterAuthenticator.Overhead);
            Assert.Equal(FrameError.None, ClusterCodec.Decode(f, out var r));
            var report = Assert.IsType<ReportMessage>(r);
            Assert.Equal(4u, report.Term);
            Assert.Equal(5u << 24, report.NextSequence);
            back.AddRange(report.Sessions);
            for (int cut = 0; cut < Math.Min(f.Length, 200); cut++)
            {
                Assert.NotEqual(FrameError.None, ClusterCodec.Decode(f.AsSpan(0, cut), out _));
            }
        }

        Assert.Equal(sessions.Select(s => s.Session), back.Select(s => s.Session));
        Assert.Equal(sessions.Select(s => s.Labels[0]), back.Select(s => s.Labels[0]));
    }
}
