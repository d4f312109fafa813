using System.Buffers.Binary;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Aer.Simulation;

/// <summary>
/// A wide-area AER session on a <see cref="TreeNetwork"/> (docs/aer.md "Simulation"): the source hangs off the root
/// router; each of <see cref="Sites"/> site routers hangs off the root by a backbone link and holds, optionally, a
/// repair server and <see cref="ReceiversPerSite"/> receivers, each on its own access link.
/// </summary>
public sealed record AerScenarioOptions
{
    public int Seed { get; init; } = 1;
    public int Sites { get; init; } = 3;
    public int ReceiversPerSite { get; init; } = 4;
    public bool RepairServers { get; init; } = true;

    /// <summary>Sites whose repair server is absent even when <see cref="RepairServers"/> is on (partial deployment).</summary>
    public IReadOnlySet<int> SitesWithoutRepairServer { get; init; } = new HashSet<int>();

    /// <summary>Repair servers (by site) that crash at <see cref="CrashAt"/>.</summary>
    public IReadOnlySet<int> CrashRepairServers { get; init; } = new HashSet<int>();

    public TimeSpan CrashAt { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>Receivers (site, index) that crash at <see cref="CrashAt"/>.</summary>
    public IReadOnlySet<(int Site, int Receiver)> CrashReceivers { get; init; } = new HashSet<(int, int)>();

    /// <summary>The source subcasts repairs to its children (repair servers, receivers of sites without one) instead of
    /// re-multicasting them.</summary>
    public bool SourceSubcast { get; init; } = true;

    /// <summary>When set, the source's nominee at that time crashes (NCA failover).</summary>
    public TimeSpan? CrashNomineeAt { get; init; }

    /// <summary>When set, the source's nominee at that time leaves the session (its CSM says so).</summary>
    public TimeSpan? LeaveNomineeAt { get; init; }

    public int Messages { get; init; } = 2000;
    public int PayloadBytes { get; init; } = 1000;
    public TreeLink SourceLink { get; init; } = new() { Latency = TimeSpan.FromMilliseconds(1), BandwidthBitsPerSecond = 100_000_000 };
    public TreeLink BackboneLink { get; init; } = new() { Latency = TimeSpan.FromMilliseconds(40), LossRate = 0.02, BandwidthBitsPerSecond = 100_000_000 };
    public TreeLink RepairServerLink { get; init; } = new() { Latency = TimeSpan.FromMilliseconds(1), BandwidthBitsPerSecond = 100_000_000 };
    public TreeLink AccessLink { get; init; } = new() { Latency = TimeSpan.FromMilliseconds(2), LossRate = 0.01, BandwidthBitsPerSecond = 100_000_000 };

    /// <summary>Per-site overrides of <see cref="BackboneLink"/> (site index → link), e.g. one more congested site.</summary>
    public IReadOnlyDictionary<int, TreeLink> SiteBackboneLinks { get; init; } = new Dictionary<int, TreeLink>();

    public AerOptions Aer { get; init; } = new();
    public TimeSpan TimeLimit { get; init; } = TimeSpan.FromSeconds(120);
}

/// <summary>What an <see cref="AerScenario"/> run saw.</summary>
public sealed record AerScenarioResult(
    bool AllDelivered,
    long[] DeliveredPerReceiver,
    long OrderViolations,
    long NaksAtSource,
    long RepairsSentBySource,
    TimeSpan Finished,
    double MeanRepairLatencyMs,
    long RepairSamples,
    long MaxRepairCacheBytes,
    AerCounters Totals,
    IReadOnlyList<NetAddress> NomineeHistory,
    NetAddress? RemovedNominee,
    IReadOnlyDictionary<NetAddress, int> SiteOf,
    long LinkBytes,
    string Describe);

/// <summary>Builds and runs one <see cref="AerScenarioOptions"/> on virtual time; every stack is built by <see cref="StackBuilder"/>.</summary>
public sealed class AerScenario
{
    public const uint Session = 7;
    public static readonly NetAddress Group = new(0xEF010203, 7000); // 239.1.2.3:7000

    private readonly AerScenarioOptions _o;
    private readonly List<(SimNode Node, ProtocolStack Stack, AerLayer Layer)> _stacks = new();
    private readonly List<Receiver> _receivers = new();
    private readonly List<(int Site, SimNode Node, AerLayer Layer, RepairServer Server)> _servers = new();
    private double _latencySum;
    private long _latencyCount;
    private readonly Dictionary<int, (double Sum, long Count)> _latencyBySite = new();

    public AerScenario(AerScenarioOptions options)
    {
        _o = options ?? throw new ArgumentNullException(nameof(options));
        _o.Aer.Validate();
        if (_o.Sites < 1 || _o.ReceiversPerSite < 1 || _o.Messages < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(options), "AerScenarioOptions needs at least one site, one receiver per site and one message.");
        }

        Network = new SimNetwork(_o.Seed);
        Tree = new TreeNetwork(Network, _o.Seed * 7919 + 1);
        var sourceNode = Network.AddNode();
        var sourceTransport = Tree.Attach(sourceNode, 0, _o.SourceLink);
        SourceAddress = sourceTransport.LocalAddress;

        var sourceChildren = new List<NetAddress>();
        var plan = new List<(int Site, int Router, SimNode? RsNode, List<SimNode> Receivers)>();
        for (int site = 0; site < _o.Sites; site++)
        {
            int router = Tree.AddRouter(0, _o.SiteBackboneLinks.GetValueOrDefault(site) ?? _o.BackboneLink);
            SimNode? rs = _o.RepairServers && !_o.SitesWithoutRepairServer.Contains(site) ? Network.AddNode() : null;
            var receivers = new List<SimNode>();
            for (int r = 0; r < _o.ReceiversPerSite; r++)
            {
                receivers.Add(Network.AddNode());
            }

            plan.Add((site, router, rs, receivers));
        }

        foreach (var (site, router, rsNode, receivers) in plan)
        {
            var receiverAddresses = receivers.Select(n => new NetAddress(n.Address.Ip, 7000)).ToList();
            if (rsNode is not null)
            {
                var layer = Build(rsNode, Tree.Attach(rsNode, router, _o.RepairServerLink));
                var server = layer.AddRepairServer(Session, Group, SourceAddress, receiverAddresses);
                _servers.Add((site, rsNode, layer, server));
                sourceChildren.Add(new NetAddress(rsNode.Address.Ip, 7000));
            }
            else
            {
                sourceChildren.AddRange(receiverAddresses);
            }

            for (int r = 0; r < receivers.Count; r++)
            {
                var node = receivers[r];
                var layer = Build(node, Tree.Attach(node, router, _o.AccessLink));
                var receiver = new Receiver(site, r, node);
                receiver.Role = layer.AddReceiver(Session, Group, SourceAddress, receiver.OnDeliver);
                receiver.Role.RepairLatency = t =>
                {
                    _latencySum += t.TotalMilliseconds;
                    _latencyCount++;
                    var (sum, count) = _latencyBySite.GetValueOrDefault(site);
                    _latencyBySite[site] = (sum + t.TotalMilliseconds, count + 1);
                };
                _receivers.Add(receiver);
            }
        }

        var sourceLayer = Build(sourceNode, sourceTransport);
        Feed = new CountingFeed(_o.Messages, _o.PayloadBytes);
        Sender = sourceLayer.AddSender(Session, Group, Feed, _o.SourceSubcast ? sourceChildren : null);
        SourceLayer = sourceLayer;
    }

    public SimNetwork Network { get; }

    public TreeNetwork Tree { get; }

    public NetAddress SourceAddress { get; }

    public AerSender Sender { get; }

    public AerLayer SourceLayer { get; }

    public CountingFeed Feed { get; }

    public IReadOnlyList<RepairServer> RepairServers => _servers.Select(s => s.Server).ToList();

    public IReadOnlyList<AerReceiver> Receivers => _receivers.Select(r => r.Role!).ToList();

    public IEnumerable<AerLayer> Layers => _stacks.Select(s => s.Layer);

    /// <summary>The mean repair latency (ms) of the receivers of one site so far, and how many repairs it averages.</summary>
    public (double MeanMs, long Count) SiteRepairLatency(int site) =>
        _latencyBySite.TryGetValue(site, out var v) && v.Count > 0 ? (v.Sum / v.Count, v.Count) : (0, 0);

    private AerLayer Build(SimNode node, TreeTransport transport)
    {
        var layer = new AerLayer(_o.Aer, node.Random);
        var stack = new StackBuilder(transport, node).Add(layer).Build();
        _stacks.Add((node, stack, layer));
        return layer;
    }

    /// <summary>Raised every 10 ms of virtual time while <see cref="Run"/> runs (tests inject traffic here).</summary>
    public event Action? Tick;

    /// <summary>Runs until every live receiver has every message, or the time limit.</summary>
    public AerScenarioResult Run()
    {
        NetAddress? removedNominee = null;
        bool crashed = _o.CrashRepairServers.Count == 0 && _o.CrashReceivers.Count == 0;
        long maxCache = 0;
        var end = Network.Now + _o.TimeLimit;
        bool done = false;
        while (Network.Now < end)
        {
            Network.RunFor(TimeSpan.FromMilliseconds(10));
            foreach (var s in _servers)
            {
                maxCache = Math.Max(maxCache, s.Server.Cache.Bytes);
            }

            if (!crashed && Network.Now >= _o.CrashAt)
            {
                crashed = true;
                foreach (var s in _servers.Where(s => _o.CrashRepairServers.Contains(s.Site)))
                {
                    s.Node.Crash();
                }

                foreach (var r in _receivers.Where(r => _o.CrashReceivers.Contains((r.Site, r.Index))))
                {
                    r.Node.Crash();
                }
            }

            foreach (var (at, crash) in new[] { (_o.CrashNomineeAt, true), (_o.LeaveNomineeAt, false) })
            {
                if (at is { } when && removedNominee is null && Network.Now >= when && Sender.Nominee is { } nominee)
                {
                    var victim = _receivers.First(r => r.Role!.Session == Session && new NetAddress(r.Node.Address.Ip, 7000) == nominee);
                    removedNominee = nominee;
                    victim.Left = true;
                    if (crash)
                    {
                        victim.Node.Crash();
                    }
                    else
                    {
                        _stacks.First(s => s.Node == victim.Node).Layer.Remove(Session);
                    }
                }
            }

            Tick?.Invoke();
            if (_receivers.All(r => !r.Node.IsUp || r.Left || r.Delivered >= _o.Messages))
            {
                done = true;
                break;
            }
        }

        var totals = new AerCounters();
        foreach (var (_, _, layer) in _stacks)
        {
            Add(totals, layer.Counters);
        }

        return new AerScenarioResult(
            done,
            _receivers.Where(r => r.Node.IsUp && !r.Left).Select(r => r.Delivered).ToArray(),
            _receivers.Sum(r => r.OrderViolations),
            Tree.Arrivals.GetValueOrDefault((SourceAddress, (byte)AerWire.NakType)),
            SourceLayer.Counters.RepairsSent,
            Network.Now,
            _latencyCount == 0 ? 0 : _latencySum / _latencyCount,
            _latencyCount,
            maxCache,
            totals,
            Sender.NomineeHistory.ToList(),
            removedNominee,
            _receivers.ToDictionary(r => new NetAddress(r.Node.Address.Ip, 7000), r => r.Site),
            Tree.LinkBytes,
            string.Join("\n", _stacks.Select(s => s.Stack.Describe())));
    }

    private static void Add(AerCounters into, AerCounters c)
    {
        into.DataSent += c.DataSent;
        into.SpmsSent += c.SpmsSent;
        into.NaksSent += c.NaksSent;
        into.NaksSuppressed += c.NaksSuppressed;
        into.NakTimeouts += c.NakTimeouts;
        into.NaksReceived += c.NaksReceived;
        into.NakSubcasts += c.NakSubcasts;
        into.RepairsSent += c.RepairsSent;
        into.RepairsForwarded += c.RepairsForwarded;
        into.RepairsReceived += c.RepairsReceived;
        into.Duplicates += c.Duplicates;
        into.Delivered += c.Delivered;
        into.Unrecoverable += c.Unrecoverable;
        into.CacheEvictions += c.CacheEvictions;
        into.CsmsSent += c.CsmsSent;
        into.AcksSent += c.AcksSent;
        into.AcksReceived += c.AcksReceived;
        into.NomineeChanges += c.NomineeChanges;
        into.UpstreamFailovers += c.UpstreamFailovers;
        into.WindowOverflow += c.WindowOverflow;
        into.RepairQueueFull += c.RepairQueueFull;
    }

    private sealed class Receiver(int site, int index, SimNode node)
    {
        public int Site { get; } = site;
        public int Index { get; } = index;
        public SimNode Node { get; } = node;
        public AerReceiver? Role { get; set; }
        public bool Left { get; set; }
        public long Delivered { get; private set; }
        public long OrderViolations { get; private set; }

        public void OnDeliver(long seq, ReadOnlySpan<byte> payload)
        {
            long carried = payload.Length >= 8 ? BinaryPrimitives.ReadInt64LittleEndian(payload) : -1;
            if (seq != Delivered + 1 || carried != seq)
            {
                OrderViolations++;
            }

            Delivered++;
        }
    }
}

/// <summary>An application feed of <c>count</c> numbered payloads (the first 8 bytes carry the number, from 1).</summary>
public sealed class CountingFeed(int count, int payloadBytes) : IAerFeed
{
    public long Pulled { get; private set; }

    public int Pull(Span<byte> buffer)
    {
        if (Pulled >= count)
        {
            return 0;
        }

        int n = Math.Clamp(payloadBytes, 8, buffer.Length);
        BinaryPrimitives.WriteInt64LittleEndian(buffer, ++Pulled);
        buffer[8..n].Fill((byte)Pulled);
        return n;
    }
}
