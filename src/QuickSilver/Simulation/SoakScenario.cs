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
    int Leavers)
{
    public override string ToString() => string.Create(CultureInfo.InvariantCulture,
        $"{Members} members, {Messages} × {MessageBytes} B, loss {Loss:P1}{(Burst is { } b ? $" + bursts ({b.GoodToBad:P1} in, {b.BadToGood:P0} out)" : "")}, " +
        $"reorder {Reorder:P1}, duplicate {Duplicate:P1}, {Crashes} crash(es), {Joiners} joiner(s), {Leavers} leaver(s)");
}

/// <summary>What one soak seed found: null <see cref="Failure"/> when every check held.</summary>
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
/// least one receiver stays), nodes joining and leaving mid-stream. It asserts that every member alive and in the
/// group at the end got every message once, in order (a joiner: every message from where it started to the last),
/// and that once the stream is over every live member's receive buffers are purged (memory back to its floor).
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
            Leavers: random.Next(0, 2));
    }

    /// <summary>Runs seed <paramref name="seed"/>; never throws for a protocol failure (it is the result).</summary>
    public static SoakResult Run(int seed)
    {
        var faults = Draw(seed);
        var link = new LinkOptions
        {
            LossRate = faults.Loss,
            Burst = faults.Burst,
            ReorderRate = faults.Reorder,
            DuplicateRate = faults.Duplicate,
        };
        var cluster = new NodeCluster(seed, link);
        try
        {
            var (failure, unpurged) = Drive(cluster, faults, new Random(seed ^ 0x5EED));
            return new SoakResult(seed, faults, failure, unpurged, cluster.Network.Now, cluster.Network.Deliveries);
        }
        catch (InvalidOperationException e)
        {
            return new SoakResult(seed, faults, e.Message, null, cluster.Network.Now, cluster.Network.Deliveries);
        }
    }

    private static (string? Failure, string? Unpurged) Drive(NodeCluster cluster, SoakFaults faults, Random random)
    {
        var members = cluster.AddNodes(faults.Members);
        cluster.Join(members, Group);
        cluster.SettleViews(Group, members);
        var sender = members[0];
        sender.PublishNumbered(Group, faults.Messages, faults.MessageBytes);

        // Each event (a crash, a join, a leave) happens once the slowest live receiver has a random share of the stream.
        var limit = TimeSpan.FromSeconds(120);
        var events = new List<(int At, Action Act)>();
        var receivers = members.Skip(1).ToList();
        var joiners = new List<(NodeCluster.Node Node, int Owed)>();
        var gone = new HashSet<NodeCluster.Node>();
        foreach (var victim in receivers.OrderBy(_ => random.Next()).Take(faults.Crashes + faults.Leavers).Select((n, i) => (n, i)))
        {
            bool crash = victim.i < faults.Crashes;
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

        for (int i = 0; i < faults.Joiners; i++)
        {
            events.Add((random.Next(1, faults.Messages), () =>
            {
                // A joiner is owed every message the sender takes once its view of the region includes the joiner:
                // the first such is at most the feed's next message when that view arrives (0: the stream was over).
                var joiner = cluster.AddNodes(1)[0];
                joiner.Join(Group);
                var feed = sender.Groups[Group].Published!;
                cluster.Require(() => sender.Region!.Member!.View!.IndexOf(new Membership.NodeId(joiner.Id)) >= 0, limit, $"node {joiner.Id} in the sender's view");
                joiners.Add((joiner, feed.Next <= feed.Count ? feed.Next : 0));
            }));
        }

        foreach (var (at, act) in events.OrderBy(e => e.At))
        {
            if (!cluster.Network.RunUntil(() => receivers.Where(n => !gone.Contains(n)).All(n => n.Groups[Group].CountFrom(sender.Id) >= at), limit))
            {
                return ($"the stream stalled before message {at}: {Progress(receivers, sender)}", null);
            }

            act();
        }

        var checkedMembers = members.Where(n => !gone.Contains(n)).ToList();
        bool done = cluster.Network.RunUntil(
            () => checkedMembers.All(n => n.Groups[Group].CountFrom(sender.Id) == faults.Messages)
                  && joiners.All(j => j.Owed == 0 || Last(j.Node, sender) == faults.Messages),
            limit);
        if (!done)
        {
            return ($"not every message arrived within {limit} of virtual time: {Progress(checkedMembers.Concat(joiners.Select(j => j.Node)), sender)}", null);
        }

        foreach (var node in checkedMembers)
        {
            var got = node.Groups[Group].Received[sender.Id];
            for (int i = 0; i < got.Count; i++)
            {
                if (got[i] != i + 1)
                {
                    return ($"node {node.Id} got message {got[i]} in place {i + 1}", null);
                }
            }
        }

        foreach (var (joiner, owed) in joiners)
        {
            var got = joiner.Groups[Group].Received.GetValueOrDefault(sender.Id) ?? [];
            if (owed > 0 && (got.Count == 0 || got[0] > owed))
            {
                return ($"joiner {joiner.Id} started at message {got.FirstOrDefault()}, but was owed every message from {owed}", null);
            }

            for (int i = 1; i < got.Count; i++)
            {
                if (got[i] != got[i - 1] + 1)
                {
                    return ($"joiner {joiner.Id} got message {got[i]} after {got[i - 1]}", null);
                }
            }
        }

        // Memory: every stream's packets stay within its window, and once the stream is stable everywhere the members
        // purge it (two token rounds and then some).
        var live = checkedMembers.Concat(joiners.Select(j => j.Node)).ToList();
        int bound = new RegionOptions().MaxHeldPackets;
        if (live.FirstOrDefault(n => n.Region?.Member?.Streams.Values.Any(stream => stream.HeldCount > bound) == true) is { } over)
        {
            return ($"node {over.Id} holds more than {bound} packets of one stream: {over.Region!.Member!.Describe()}", null);
        }

        cluster.Network.RunUntil(() => live.All(n => (n.Region?.Member?.HeldPackets ?? 0) == 0), TimeSpan.FromSeconds(5));
        if (live.FirstOrDefault(n => (n.Region?.Member?.HeldPackets ?? 0) > 0) is { } holding)
        {
            return (null, $"node {holding.Id} still holds {holding.Region!.Member!.HeldPackets} packets 5 s after the stream ended: " +
                          string.Join(" | ", live.Select(n => $"node {n.Id}: {n.Region?.Member?.Describe() ?? "no member"}")));
        }

        return (null, null);
    }

    private static int Last(NodeCluster.Node node, NodeCluster.Node sender)
        => node.Groups.TryGetValue(Group, out var group) && group.Received.TryGetValue(sender.Id, out var got) && got.Count > 0 ? got[^1] : 0;

    private static string Progress(IEnumerable<NodeCluster.Node> nodes, NodeCluster.Node sender)
        => string.Join(", ", nodes.Select(n => $"node {n.Id}{(n.Sim.IsUp ? "" : " (down)")}: {n.Groups[Group].CountFrom(sender.Id)}"));
}
