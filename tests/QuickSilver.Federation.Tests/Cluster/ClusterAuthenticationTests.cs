using System.Buffers.Binary;
using QuickSilver.Federation.Cluster;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Simulation;

namespace QuickSilver.Federation.Tests.Cluster;

/// <summary>Authenticated control↔data frames (<see cref="ClusterAuthenticator"/>): the tag, the replay window, and on
/// virtual time, seeded, forged and replayed HEARTBEAT / ASSIGN / RESET frames that move no session and are counted.</summary>
public class ClusterAuthenticationTests
{
    private static readonly byte[] Secret = [.. Enumerable.Range(1, 32).Select(i => (byte)i)];
    private static readonly byte[] OtherSecret = [.. Enumerable.Range(101, 32).Select(i => (byte)i)];

    private static SessionName Session(int i) => SessionName.Parse($"bfed://1/s{i}/d");

    private static byte[] Packet(int i)
    {
        var p = new byte[100];
        BinaryPrimitives.WriteInt32LittleEndian(p, i);
        return p;
    }

    [Fact]
    public void ASealedFrameOpensAndAnyChangedByteTruncationOrOtherSecretFailsTheTag()
    {
        var sender = new ClusterAuthenticator(Secret, 1000);
        var receiver = new ClusterAuthenticator(Secret, 1);
        var frame = ClusterCodec.Heartbeat(new HeartbeatMessage(201, 3, 77));
        var sealedFrame = sender.Seal(frame);
        Assert.Equal(frame.Length + ClusterAuthenticator.Overhead, sealedFrame.Length);
        Assert.Equal(ClusterAuthError.None, receiver.Open(sealedFrame, out var opened, out ulong counter));
        Assert.Equal(frame, opened.ToArray());
        Assert.Equal(1000ul, counter);

        for (int i = 0; i < sealedFrame.Length; i++)
        {
            var altered = (byte[])sealedFrame.Clone();
            altered[i] ^= 0x01;
            Assert.Equal(ClusterAuthError.BadTag, receiver.Open(altered, out _, out _));
        }

        for (int n = 0; n < sealedFrame.Length; n++)
        {
            Assert.Equal(ClusterAuthError.BadTag, receiver.Open(sealedFrame.AsSpan(0, n), out _, out _));
        }

        Assert.Equal(ClusterAuthError.BadTag, new ClusterAuthenticator(OtherSecret, 1).Open(sealedFrame, out _, out _));
        Assert.Equal(ClusterAuthError.BadTag, receiver.Open([.. frame, .. new byte[ClusterAuthenticator.Overhead]], out _, out _));
        Assert.Throws<ArgumentException>(() => new ClusterAuthenticator(new byte[31], 1));
        var bad = Assert.Throws<ArgumentOutOfRangeException>(() => new ClusterOptions { DataNodes = [201], ClusterSecret = new byte[16] }.Validate());
        Assert.Equal(nameof(ClusterOptions.ClusterSecret), bad.ParamName);
    }

    [Fact]
    public void EachCounterIsAcceptedOnceInAnyOrderWithinTheWindowAndOlderOnesNever()
    {
        var auth = new ClusterAuthenticator(Secret, 1);
        Assert.True(auth.Fresh(201, 100));
        Assert.False(auth.Fresh(201, 100)); // the same frame again
        Assert.True(auth.Fresh(201, 98)); // reordered, within the window
        Assert.False(auth.Fresh(201, 98));
        Assert.True(auth.Fresh(201, 101));
        Assert.True(auth.Fresh(202, 5)); // senders are apart
        Assert.True(auth.Fresh(201, 200));
        Assert.False(auth.Fresh(201, 200 - 64)); // older than the window: refused, seen or not
        Assert.True(auth.Fresh(201, 200 - 63));
        Assert.False(auth.Fresh(201, 101));

        // Against a reference set: random counters near the top, each accepted exactly when new and within the window.
        var random = new Random(5);
        var reference = new HashSet<ulong>();
        ulong highest = 0;
        var model = new ClusterAuthenticator(Secret, 1);
        for (int i = 0; i < 20_000; i++)
        {
            ulong c = (ulong)Math.Max(1, (long)highest + random.Next(-80, 8));
            bool expected = reference.Count == 0 || c > highest || (highest - c < 64 && !reference.Contains(c));
            Assert.Equal(expected, model.Fresh(7, c));
            if (expected)
            {
                reference.Add(c);
                highest = Math.Max(highest, c);
            }
        }
    }

    private static (FederationSim Sim, FederationSim.SimIsland I1, FederationSim.SimClient[] Clients) Clustered(int seed, byte[]? secret)
    {
        var sim = new FederationSim(seed);
        var i1 = sim.AddIsland(1);
        var i2 = sim.AddIsland(2);
        sim.AddGateway(1, i1);
        sim.AddClusteredGateway(2, i2, [201, 202], cluster: c => c with { ClusterSecret = secret });
        sim.Connect(1, 2, TimeSpan.FromMilliseconds(5));
        sim.RecordClusterFrames = true;
        sim.RunFor(TimeSpan.FromSeconds(2));
        var clients = new[] { i2.Join(Session(0)), i2.Join(Session(1)) };
        sim.RunFor(TimeSpan.FromSeconds(1));
        Assert.All(clients, c => Assert.Equal(MediatorReplyKind.Translation, c.Reply!.Kind));
        return (sim, i1, clients);
    }

    private static void Publish(FederationSim sim, FederationSim.SimIsland island, int from, int count)
    {
        for (int p = from; p < from + count; p++)
        {
            island.Publish("s0/d", Packet(p));
            island.Publish("s1/d", Packet(p));
            sim.RunFor(TimeSpan.FromMilliseconds(10));
        }
    }

    /// <summary>Data node 201 crashes; every 200 ms an attacker sends the control node HEARTBEATs "from 201": unsealed,
    /// sealed under another secret, and 201's own recorded HEARTBEATs replayed. With the secret none counts and the
    /// session moves to 202; without it the unsealed ones keep the dead node "alive" and its session dark.</summary>
    [Theory]
    [InlineData(21, true)]
    [InlineData(22, false)]
    public void ForgedAndReplayedHeartbeatsDoNotKeepACrashedDataNodeAlive(int seed, bool authenticated)
    {
        var (sim, i1, clients) = Clustered(seed, authenticated ? Secret : null);
        var control = sim[2].Cluster!;
        Assert.Equal(201u, control.NodeOf(Session(0)));
        Publish(sim, i1, 0, 20);
        var recorded = sim.ClusterFrames.Where(f => f.ToControl && f.Node == 201).Select(f => f.Frame).ToList();
        Assert.NotEmpty(recorded);

        sim.CrashDataNode(201);
        var forger = new ClusterAuthenticator(OtherSecret, 1);
        for (int round = 0; round < 30; round++)
        {
            var heartbeat = ClusterCodec.Heartbeat(new HeartbeatMessage(201, 1, 0));
            sim.InjectToControl(2, heartbeat);
            sim.InjectToControl(2, forger.Seal(heartbeat));
            sim.InjectToControl(2, recorded[round % recorded.Count]);
            sim.RunFor(TimeSpan.FromMilliseconds(200));
        }

        if (authenticated)
        {
            Assert.Equal(202u, control.NodeOf(Session(0)));
            Assert.Equal(1, control.Counters.NodesDown);
            Assert.Equal(60, control.Counters.Unauthenticated); // the unsealed and the wrongly sealed ones
            Assert.Equal(30, control.Counters.Replayed);
            Publish(sim, i1, 100, 20);
            Assert.True(Enumerable.Range(100, 20).All(p => clients[0].Received.Any(r => BinaryPrimitives.ReadInt32LittleEndian(r) == p)));
        }
        else
        {
            Assert.Equal(201u, control.NodeOf(Session(0))); // fooled: why the frames need a tag
            Assert.Equal(0, control.Counters.NodesDown);
        }
    }

    /// <summary>With the secret, a forged ASSIGN (a bogus session on 202), a forged RESET and RELEASE (to wipe 201), and
    /// 201's own recorded ASSIGNs replayed neither add, remove nor move a session, and each is counted; data still flows.</summary>
    [Fact]
    public void ForgedAndReplayedAssignResetAndReleaseFramesMoveNoSession()
    {
        var (sim, i1, clients) = Clustered(23, Secret);
        Publish(sim, i1, 0, 20);
        var replays = sim.ClusterFrames.Where(f => !f.ToControl && f.Node == 201).Select(f => f.Frame).ToList();
        Assert.NotEmpty(replays);
        long wipesBefore = sim.DataNode(201).Counters.Resets + sim.DataNode(201).Counters.Releases; // the RESET every new node gets
        var forger = new ClusterAuthenticator(OtherSecret, 1);
        var bogus = ClusterCodec.Assign(new AssignMessage(202, 0, SessionName.Parse("bfed://1/bogus/d"), false, [new FlowLabel(999)], default, 0, [], [], [], []));
        byte[][] forged =
        [
            bogus,
            forger.Seal(bogus),
            ClusterCodec.Reset(new ResetMessage(201)),
            forger.Seal(ClusterCodec.Reset(new ResetMessage(201))),
            ClusterCodec.Release(new ReleaseMessage(201, Session(0))),
        ];
        foreach (var f in forged)
        {
            sim.InjectToDataNode(f[2] == 202 ? 202u : 201u, f);
        }

        foreach (var r in replays)
        {
            sim.InjectToDataNode(201, r);
        }

        sim.RunFor(TimeSpan.FromMilliseconds(100));
        var n201 = sim.DataNode(201);
        var n202 = sim.DataNode(202);
        Assert.Equal([Session(0)], n201.Sessions.Order().ToList());
        Assert.Equal([Session(1)], n202.Sessions.ToList());
        Assert.Equal(2, n202.Counters.Unauthenticated);
        Assert.Equal(3, n201.Counters.Unauthenticated);
        Assert.Equal(replays.Count, n201.Counters.Replayed);
        Assert.Equal(wipesBefore, n201.Counters.Resets + n201.Counters.Releases);
        Publish(sim, i1, 20, 20);
        Assert.All(clients, c => Assert.Equal(Enumerable.Range(0, 40), c.Received.Select(r => BinaryPrimitives.ReadInt32LittleEndian(r))));
    }
}
