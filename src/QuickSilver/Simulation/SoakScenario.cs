using System.Globalization;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Simulation;

/// <summary>The faults one soak seed draws (see <see cref="SoakScenario.Draw"/>).</summary>
internal sealed record SoakFaults(
    int Members,
    int Messages,
    int MessageBytes,
    double Loss,
    BurstLoss? Burst,
    double Reorder,
    double Duplicate,
    int Crashes,
    int Joiners,
    int Leavers,
    TimeSpan Partition,
    bool SenderCrash,
    bool GmsFailover)
{
    public override string ToString() => string.Create(CultureInfo.InvariantCulture,
        $"{Members} members, {Messages} × {MessageBytes} B, loss {Loss:P1}{(Burst is { } b ? $" + bursts ({b.GoodToBad:P1} in, {b.BadToGood:P0} out)" : "")}, " +
        $"reorder {Reorder:P1}, duplicate {Duplicate:P1}, {Crashes} crash(es), {Joiners} joiner(s), {Leavers} leaver(s)" +
        $"{(Partition > TimeSpan.Zero ? $", a partition of {Partition.TotalSeconds:F1} s" : "")}" +
        $"{(SenderCrash ? ", a second publisher crashes mid-stream" : "")}{(GmsFailover ? ", the GMS leader crashes (3 replicas)" : "")}");
}

/// <summary>What one soak seed found: <see cref="Failure"/> (a message lost, duplicated or out of order, a stall, a
/// buffer beyond its bound) is null when delivery held; <see cref="Unpurged"/> says whether a live member still held
/// packets 5 s after the stream was over everywhere (a known weakness, docs/simulation.md, "Seed sweeps": the region's purge can stall).</summary>
internal sealed record SoakResult(int Seed, SoakFaults Faults, string? Failure, string? Unpurged, TimeSpan VirtualTime, long Datagrams)
{
    public bool Passed => Failure is null;
}

/// <summary>
/// One whole-stack seed of the soak (issue 12, item 7; docs/simulation.md, "Seed sweeps"): a GMS and a group of 3–10 nodes
/// on the simulated network, one of them publishing numbered messages, under faults drawn from the seed: loss up to
/// 20 %, bursts, reordering, duplication, crashes of up to R−1 members that cache packets (never the sender, and at
/// least one receiver stays), nodes joining and leaving mid-stream, and in a quarter of the seeds a partition that cuts
/// some receivers off for 0.2–3 s; in a third of the seeds with 4+ members a second publisher that crashes mid-stream,
/// and in a quarter three GMS replicas whose leader crashes under load. It asserts that every member alive and in the
/// group at the end got every message once, in order (a joiner, or a node the GMS dropped that registered again: every
/// message from where it started to the last), that the survivors of the crashed publisher agree on a prefix of its
/// stream and retire it (<see cref="CheckCrashedPublisher"/>), and reports whether once the stream is over every live
/// member's receive buffers are purged.
/// The same seed replays the same run.
/// </summary>
internal static class SoakScenario
{
    private const string Group = "soak";

    /// <summary>The faults seed <paramref name="seed"/> stands for.</summary>
    public static SoakFaults Draw(int seed)
    {
        var random = new Random(seed);
        int members = random.Next(3, 11);
        int replication = new RegionOptions().ReplicationFactor;
        double loss = random.Next(4) == 0 ? 0 : random.NextDouble() * 0.2;
        BurstLoss? burst = random.Next(3) == 0 ? new BurstLoss(0.001 + (random.NextDouble() * 0.01), 0.2 + (random.NextDouble() * 0.6)) : null;
        return new SoakFaults(
            members,
            Messages: random.Next(500, 3_001),
            MessageBytes: random.Next(8, 1_201),
            loss,
            burst,
            Reorder: random.Next(2) == 0 ? 0 : random.NextDouble() * 0.05,
            Duplicate: random.Next(2) == 0 ? 0 : random.NextDouble() * 0.05,
            Crashes: random.Next(0, Math.Min(replication - 1, members - 2) + 1),
            Joiners: random.Next(0, 3),
            Leavers: random.Next(0, 2),
            Partition: random.Next(4) == 0 ? TimeSpan.FromMilliseconds(random.Next(200, 3_001)) : TimeSpan.Zero, // the earlier draws stay as they were
            SenderCrash: random.Next(3) == 0 && members >= 4, // drawn after the partition: earlier draws stay as they were
            GmsFailover: random.Next(4) == 0);
    }

    /// <summary>The virtual time of the seed this thread is running (for log lines of a replay); null between runs.</summary>
    [ThreadStatic]
    public static Func<TimeSpan>? VirtualNow;

    /// <summary>Runs seed <paramref name="seed"/>; never throws for a protocol failure (it is the result).
    /// <paramref name="gmsLogger"/> receives the GMS's log lines (a replay prints them). <paramref name="partitionShare"/>
    /// sets <see cref="RegionOptions.PartitionShare"/> (null: its default).</summary>
    public static SoakResult Run(int seed, Microsoft.Extensions.Logging.ILogger? gmsLogger = null, bool? partitionShare = null)
    {
        var region = new RegionOptions { TokenInterval = TimeSpan.FromMilliseconds(100) };
        if (partitionShare is { } share)
        {
            region = region with { PartitionShare = share };
        }

        var faults = Draw(seed);
        var link = new LinkOptions
        {
            LossRate = faults.Loss,
            Burst = faults.Burst,
            ReorderRate = faults.Reorder,
            DuplicateRate = faults.Duplicate,
        };
        var cluster = faults.GmsFailover
            ? new NodeCluster(seed, link, region, gmsReplicas: 3, gmsLogger: gmsLogger)
            : new NodeCluster(seed, link, region, gmsLogger: gmsLogger);
        VirtualNow = () => cluster.Network.Now;
        try
        {
            var (failure, unpurged) = Drive(cluster, faults, new Random(seed ^ 0x5EED), seed);
            return new SoakResult(seed, faults, failure, unpurged, cluster.Network.Now, cluster.Network.Deliveries);
        }
        catch (InvalidOperationException e)
        {
            return new SoakResult(seed, faults, e.Message, null, cluster.Network.Now, cluster.Network.Deliveries);
        }
    }

    private static (string? Failure, string? Unpurged) Drive(NodeCluster cluster, SoakFaults faults, Random random, int seed)
    {
        var members = cluster.AddNodes(faults.Members);
        cluster.Join(members, Group);
        cluster.SettleViews(Group, members);
        var sender = members[0];
        sender.PublishNumbered(Group, faults.Messages, faults.MessageBytes);

        // A second publisher that crashes mid-stream (it stops without leaving): its own numbered stream, at a steady
        // rate so that it is still going when it dies. Its faults come from their own generator, so every other draw of
        // the seed stays as it was.
        var crashRandom = new Random(seed ^ 0xC4A5);
        var crasher = faults.SenderCrash ? members[^1] : null;
        crasher?.PublishNumbered(Group, CrasherMessages, faults.MessageBytes, perSecond: CrasherRate);

        // Each event (a crash, a join, a leave) happens once the slowest live receiver has a random share of the stream.
        var limit = TimeSpan.FromSeconds(120);
        var events = new List<(int At, Action Act)>();
        var receivers = members.Skip(1).ToList();
        var joiners = new List<(NodeCluster.Node Node, int Owed)>();
        var gone = new HashSet<NodeCluster.Node>();

        // A receiver the GMS dropped (silent under heavy loss) that registered again is a new member from then on: like a
        // joiner, it is owed every message the sender takes once its view of the region includes the new id. Observe
        // notes that point for each new id, as the run goes (it is called from every wait's condition).
        var rejoinOwed = new Dictionary<NodeCluster.Node, (uint Id, int Owed)>();
        bool Observe()
        {
            foreach (var node in receivers.Concat(joiners.Select(j => j.Node)))
            {
                if (node.Ids.Count > 1 && node.Registered && (!rejoinOwed.TryGetValue(node, out var seen) || seen.Id != node.Id)
                    && sender.Region?.Member?.View?.IndexOf(new Membership.NodeId(node.Id)) >= 0)
                {
                    var feed = sender.Groups[Group].Published!;
                    rejoinOwed[node] = (node.Id, feed.Next <= feed.Count ? feed.Next : 0);
                }
            }

            return true;
        }
        // With a crashing publisher, one fewer receiver crashes: at most R−1 caching members go, and one receiver stays.
        int crashes = crasher is null ? faults.Crashes : Math.Min(faults.Crashes, Math.Min(new RegionOptions().ReplicationFactor - 1, faults.Members - 2) - 1);
        foreach (var victim in receivers.Where(n => n != crasher).OrderBy(_ => random.Next()).Take(crashes + faults.Leavers).Select((n, i) => (n, i)))
        {
            bool crash = victim.i < crashes;
            events.Add((random.Next(1, faults.Messages), () =>
            {
                gone.Add(victim.n);
                if (crash)
                {
                    victim.n.Sim.Crash();
                }
                else
                {
                    victim.n.Leave(Group);
                }
            }));
        }

        if (faults.Partition > TimeSpan.Zero)
        {
            // Some live receivers are cut off from everyone else (the sender and the GMS included) for a while, then the
            // network heals. A short cut is repaired by recovery; one longer than the GMS's failure timeout gets the
            // cut-off nodes dropped, and they register again as new members (held to what a joiner is, see below).
            events.Add((random.Next(1, faults.Messages), () =>
            {
                var live = receivers.Where(n => !gone.Contains(n) && n.Sim.IsUp).OrderBy(_ => random.Next()).ToList();
                var cut = live.Take(random.Next(1, Math.Max(1, live.Count / 2) + 1)).Select(n => n.Sim).ToHashSet();
                cluster.Network.Partition(cut, cluster.Network.Nodes.Where(n => !cut.Contains(n)));
                cluster.Network.RunFor(faults.Partition);
                cluster.Network.Heal();
            }));
        }

        for (int i = 0; i < faults.Joiners; i++)
        {
            events.Add((random.Next(1, faults.Messages), () =>
            {
                // A joiner is owed every message the sender takes once its view of the region includes the joiner:
                // the first such is at most the feed's next message when that view arrives (0: the stream was over).
                var joiner = cluster.AddNodes(1)[0];
                joiner.Join(Group);
                var feed = sender.Groups[Group].Published!;
                cluster.Require(() => joiner.Registered && sender.Region!.Member!.View!.IndexOf(new Membership.NodeId(joiner.Id)) >= 0, limit, $"{joiner.Label} in the sender's view");
                joiner.NoteId(); // the id it is owed under, even if every view naming it is lost (seed 9348: dropped as silent, it registered again)
                joiners.Add((joiner, feed.Next <= feed.Count ? feed.Next : 0));
            }));
        }

        if (crasher is not null)
        {
            // The publisher dies once the fastest other receiver has a random share of its stream (the slower ones may
            // lack some of it then: what they must agree on is checked at the end).
            int share = crashRandom.Next(1, 1_001);
            events.Add((crashRandom.Next(1, faults.Messages), () =>
            {
                var others = members.Where(n => n != crasher && !gone.Contains(n)).ToList();
                cluster.Require(() => others.Any(n => Count(n, crasher) >= share), limit, $"{share} messages of the crashing publisher");
                gone.Add(crasher);
                crasher.Sim.Crash();
            }));
        }

        if (faults.GmsFailover)
        {
            // The leading GMS replica's host crashes under load and, after an election timeout, another replica leads.
            events.Add((crashRandom.Next(1, faults.Messages), () =>
            {
                int down = cluster.CrashGmsLeader();
                cluster.Network.RunFor(TimeSpan.FromMilliseconds(400));
                cluster.ElectGms((down + 1) % 3);
            }));
        }

        foreach (var (at, act) in events.OrderBy(e => e.At))
        {
            if (!cluster.Network.RunUntil(() => Observe() && receivers.Where(n => !gone.Contains(n) && !Rejoined(n)).All(n => Count(n, sender) >= at), limit))
            {
                return ($"the stream stalled before message {at}: {Progress(receivers, sender)}; {Describe(members.Append(sender).Distinct())}", null);
            }

            act();
        }

        // A receiver the GMS dropped (silent under heavy loss) that registered again is a new member from then on, owed
        // only what its new member anchors at (as a joiner is), so it is not held to the whole stream; the sender
        // may have had several ids too, and its stream is the messages of all of them, oldest id first.
        // Which members registered again is known only as the run goes (a node cut off by the last event may be dropped and
        // register again afterwards), so the wait and the checks sort them each time.
        var stayed = members.Where(n => !gone.Contains(n)).ToList();
        bool Complete(NodeCluster.Node n)
            => n == sender || !Rejoined(n)
                ? Count(n, sender) == faults.Messages
                : rejoinOwed.GetValueOrDefault(n).Owed == 0 || Last(n, sender) == faults.Messages;
        bool done = cluster.Network.RunUntil(
            () => Observe()
                  && stayed.All(Complete)
                  && joiners.All(j => (Rejoined(j.Node) ? rejoinOwed.GetValueOrDefault(j.Node).Owed : j.Owed) == 0 || Last(j.Node, sender) == faults.Messages),
            limit);
        var checkedMembers = stayed.Where(n => n == sender || !Rejoined(n)).ToList();
        var rejoined = stayed.Where(n => n != sender && Rejoined(n)).ToList();
        if (!done)
        {
            return ($"not every message arrived within {limit} of virtual time: {Progress(checkedMembers.Concat(rejoined).Concat(joiners.Select(j => j.Node)), sender)}; {Describe(checkedMembers.Concat(rejoined).Concat(joiners.Select(j => j.Node)))}", null);
        }

        foreach (var node in checkedMembers)
        {
            var got = Messages(node, sender);
            for (int i = 0; i < got.Count; i++)
            {
                if (got[i] != i + 1)
                {
                    return ($"{node.Label} got message {got[i]} in place {i + 1} (from sender ids {string.Join(", ", sender.Ids)})", null);
                }
            }
        }

        // A receiver that registered again delivers each message at most once, in order, to the end of the stream.
        foreach (var node in rejoined)
        {
            var got = Messages(node, sender);
            for (int i = 1; i < got.Count; i++)
            {
                if (got[i] <= got[i - 1])
                {
                    return ($"{node.Label} (registered again) got message {got[i]} after {got[i - 1]}", null);
                }
            }
        }

        foreach (var (joiner, owed) in joiners)
        {
            var got = Messages(joiner, sender);
            bool again = Rejoined(joiner); // registered again: a new member from then on, owed only what follows
            if (!again && owed > 0 && (got.Count == 0 || got[0] > owed))
            {
                // A joiner dropped before it got anything, registered again, is held to what its new id is owed (the
                // wait above): this check compared it with its first id's start (seed 322, once the token grew 2 bytes).
                return ($"joiner {joiner.Label} started at message {got.FirstOrDefault()}, but was owed every message from {owed}", null);
            }

            for (int i = 1; i < got.Count; i++)
            {
                if (again ? got[i] <= got[i - 1] : got[i] != got[i - 1] + 1)
                {
                    return ($"joiner {joiner.Label}{(again ? " (registered again)" : "")} got message {got[i]} after {got[i - 1]}", null);
                }
            }
        }

        // Memory: every stream's packets stay within its window, and once the stream is stable everywhere the members
        // purge it (two token rounds and then some).
        var live = checkedMembers.Concat(joiners.Select(j => j.Node)).ToList();
        int bound = new RegionOptions().MaxHeldPackets;
        if (live.FirstOrDefault(n => n.Region?.Member?.Streams.Values.Any(stream => stream.HeldCount > bound) == true) is { } over)
        {
            return ($"{over.Label} holds more than {bound} packets of one stream: {over.Region!.Member!.Describe()}", null);
        }

        if (crasher is not null && CheckCrashedPublisher(cluster, crasher, checkedMembers, rejoined.Concat(joiners.Select(j => j.Node)).ToList()) is { } crashFailure)
        {
            return (crashFailure, null);
        }

        cluster.Network.RunUntil(() => live.All(n => (n.Region?.Member?.HeldPackets ?? 0) == 0), TimeSpan.FromSeconds(5));
        if (live.FirstOrDefault(n => (n.Region?.Member?.HeldPackets ?? 0) > 0) is { } holding)
        {
            return (null, $"{holding.Label} still holds {holding.Region!.Member!.HeldPackets} packets 5 s after the stream ended: " +
                          string.Join(" | ", live.Select(n => $"{n.Label}: {n.Region?.Member?.Describe() ?? "no member"}")));
        }

        return (null, null);
    }

    /// <summary>Messages the crashing publisher would publish (it dies long before) and its rate.</summary>
    private const int CrasherMessages = 1_000_000, CrasherRate = 500;

    /// <summary>What survivors must hold of a publisher that crashed mid-stream (the region's guarantee, docs/simulation.md,
    /// "Seed sweeps"): every member that was in the group throughout delivers the same prefix 1..k of its stream, in
    /// order (the packets some survivor had are recovered by the others; past the first one no survivor had, none
    /// delivers), without holding up anyone's other streams; and after <see cref="RegionOptions.RetireDepartedStreamsAfter"/>
    /// no survivor holds a stream of it. A member that joined or registered again delivers its messages at most once, in
    /// order. Null when all that holds.</summary>
    private static string? CheckCrashedPublisher(NodeCluster cluster, NodeCluster.Node crasher, List<NodeCluster.Node> stayed, List<NodeCluster.Node> others)
    {
        // Sorted as the run goes (as the main checks are): a member may be dropped and register again while this waits.
        var all = stayed.Concat(others).ToList();
        var ids = crasher.Ids.ToList();
        // A publisher that registered again before it died left its earlier id's stream to a retired sender that died
        // with it: members that had not started that stream when the views changed never get it (docs/architecture.md,
        // "Identity"), so the survivors are then held only to "at most once, in order".
        List<NodeCluster.Node> Throughout() => Rejoined(crasher) ? [] : stayed.Where(n => !Rejoined(n)).ToList();
        bool Agreed() => Throughout().Select(n => Count(n, crasher)).Distinct().Count() <= 1;
        bool Retired() => all.All(n => n.Region?.Member is not { } member || ids.All(id => !member.Streams.ContainsKey(id)));
        var wait = new RegionOptions().RetireDepartedStreamsAfter + TimeSpan.FromSeconds(60);
        cluster.Network.RunUntil(() => Agreed() && Retired(), wait);
        var throughout = Throughout();
        var later = all.Except(throughout).ToList();
        foreach (var node in throughout)
        {
            var got = Messages(node, crasher);
            for (int i = 0; i < got.Count; i++)
            {
                if (got[i] != i + 1)
                {
                    return $"{node.Label} got message {got[i]} of the crashed publisher in place {i + 1}";
                }
            }
        }

        foreach (var node in later)
        {
            var got = Messages(node, crasher);
            for (int i = 1; i < got.Count; i++)
            {
                if (got[i] <= got[i - 1])
                {
                    return $"{node.Label} (joined or registered again) got message {got[i]} of the crashed publisher after {got[i - 1]}";
                }
            }
        }

        if (!Agreed())
        {
            return $"survivors disagree on the crashed publisher's stream {wait.TotalSeconds:F0} s later: " +
                   string.Join(", ", throughout.Select(n => $"{n.Label}: {Count(n, crasher)}")) + "; " + Describe(throughout);
        }

        if (!Retired())
        {
            return $"the crashed publisher's stream (ids {string.Join("/", ids)}) is not retired {wait.TotalSeconds:F0} s later: " + Describe(all);
        }

        return null;
    }

    private static int Last(NodeCluster.Node node, NodeCluster.Node sender)
        => Messages(node, sender) is { Count: > 0 } got ? got[^1] : 0;

    /// <summary>Whether the GMS dropped <paramref name="node"/> and it registered again (it has had more than one id).</summary>
    private static bool Rejoined(NodeCluster.Node node) => node.Ids.Count > 1;

    /// <summary>How many messages <paramref name="node"/> delivered from <paramref name="sender"/>, under any of its ids.</summary>
    private static int Count(NodeCluster.Node node, NodeCluster.Node sender)
        => node.Groups.TryGetValue(Group, out var group) ? sender.Ids.Sum(id => group.CountFrom(id)) : 0;

    /// <summary>The message numbers <paramref name="node"/> delivered from <paramref name="sender"/>: those under its first
    /// id, then its next, and so on (a sender that registered again continues its stream under the new id).</summary>
    private static List<int> Messages(NodeCluster.Node node, NodeCluster.Node sender)
        => node.Groups.TryGetValue(Group, out var group)
            ? sender.Ids.SelectMany(id => group.Received.GetValueOrDefault(id) ?? []).ToList()
            : [];

    private static string Describe(IEnumerable<NodeCluster.Node> nodes)
        => string.Join(" | ", nodes.Select(n => $"{n.Label} (sim {n.Sim.Index}{(n.Sim.IsUp ? "" : ", down")}, ids {string.Join("/", n.Ids)}): {n.Region?.Describe() ?? "no region layer"}"));

    private static string Progress(IEnumerable<NodeCluster.Node> nodes, NodeCluster.Node sender)
        => string.Join(", ", nodes.Select(n => $"{n.Label}{(n.Sim.IsUp ? "" : " (down)")}{(Rejoined(n) ? " (registered again)" : "")}: {Count(n, sender)}"));
}
