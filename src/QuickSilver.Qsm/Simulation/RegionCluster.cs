using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Qsm.Simulation;

/// <summary>
/// A simulated region for tests and benchmarks: <c>members</c> nodes in one region plus <c>senders</c> senders, on a
/// seeded <see cref="SimNetwork"/>. The region view is installed directly, standing in for the GMS, so this exercises
/// the regional protocol alone. <see cref="Timeline"/> records send, delivery and ACK times in virtual time.
/// </summary>
internal sealed class RegionCluster
{
    public const ushort Port = 5000;
    public static readonly NetAddress Group = new(0xEF0A0001, 6000);

    private readonly Dictionary<uint, NetAddress> _senderAddresses = new();

    public RegionCluster(int seed, int members, int senders, LinkOptions link, RegionOptions options, bool sendersAreMembers = false)
        : this(seed, members, senders, new RegionClusterOptions { Link = link, Region = options, SendersAreMembers = sendersAreMembers })
    {
    }

    public RegionCluster(int seed, int members, int senders, RegionClusterOptions settings)
    {
        ArgumentNullException.ThrowIfNull(settings);
        ArgumentOutOfRangeException.ThrowIfLessThan(members, 1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(senders, settings.SendersAreMembers ? members : 1000);
        ArgumentOutOfRangeException.ThrowIfLessThan(settings.PayloadBytes, sizeof(int));
        Settings = settings;
        Network = new SimNetwork(seed, settings.Link);
        Timeline = new RegionTimeline(settings.TrackRecovery);
        for (int i = 0; i < members; i++)
        {
            Nodes.Add(new RegionClusterNode(this, Nodes.Count, (uint)(i + 1), member: true));
        }

        for (int i = 0; i < senders; i++)
        {
            var node = settings.SendersAreMembers ? Nodes[i] : new RegionClusterNode(this, Nodes.Count, (uint)(1000 + i), member: false);
            if (!settings.SendersAreMembers)
            {
                Nodes.Add(node);
            }

            Senders.Add(node);
            _senderAddresses[node.Id] = node.Address;
        }

        View = new RegionView(new RegionId(1), 1,
            [.. Nodes.Where(n => n.IsMember).Select(n => new ViewMember(new NodeId(n.Id), n.Address)).OrderBy(m => m.Address.Port).ThenBy(m => m.Address.Ip)],
            Group);
        var admitted = Senders.Select(s => new ViewMember(new NodeId(s.Id), s.Address)).ToArray();
        foreach (var node in Nodes)
        {
            node.Region.InstallView(View);
            node.Region.AdmitSenders(admitted); // the GMS's part: who may send into the region (docs/security.md)
        }

        foreach (var s in Senders)
        {
            var node = s;
            node.Sender = node.Region.Sender(View);
            node.Sender.Transmitted += seq => Timeline.OnTransmit(node.Id, seq, node.Sim.Now);
            node.Sender.RepairAsked += seq => Timeline.OnRepairAsked(node.Id, seq, node.Sim.Now);
            node.Sender.AcknowledgedAdvanced += (before, after) => Timeline.OnAcknowledged(node.Id, before, after, node.Sim.Now);
        }
    }

    public SimNetwork Network { get; }

    public RegionClusterOptions Settings { get; }

    public RegionTimeline Timeline { get; }

    public RegionView View { get; private set; }

    public List<RegionClusterNode> Nodes { get; } = new();

    public List<RegionClusterNode> Senders { get; } = new();

    public IEnumerable<RegionClusterNode> LiveMembers => Nodes.Where(n => n.IsMember && n.Sim.IsUp);

    /// <summary>Each sender sends <paramref name="count"/> numbered messages (or without end) as fast as its window and
    /// rate allow: one message per packet, pulled by the sender when it can send.</summary>
    public void SendFromAll(long count = long.MaxValue)
    {
        foreach (var sender in Senders)
        {
            var s = sender;
            s.Sim.TryPost(_ =>
            {
                s.Sender!.Source = new NumberedSource(count, Settings.PayloadBytes);
                s.Sender.Signal();
            }, null);
        }
    }

    /// <summary>Payloads numbered 1..count (4-byte little-endian, padded to the payload size).</summary>
    private sealed class NumberedSource(long count, int size) : IRegionPacketSource
    {
        private long _next = 1;

        public int WritePayload(Span<byte> payload)
        {
            if (_next > count)
            {
                return 0;
            }

            BitConverter.TryWriteBytes(payload, (int)_next++);
            payload[sizeof(int)..size].Clear();
            return size;
        }
    }

    /// <summary>Installs a new view without the given nodes (the GMS reporting them dead).</summary>
    public void Exclude(params RegionClusterNode[] dead)
    {
        var gone = dead.Select(d => d.Id).ToHashSet();
        View = View with { ViewNumber = View.ViewNumber + 1, Members = [.. View.Members.Where(m => !gone.Contains(m.Node.Value))] };
        foreach (var node in Nodes.Where(n => n.Sim.IsUp && (n.IsMember || n.Sender is not null)))
        {
            node.Region.InstallView(View); // the member's view and, on a sender, the sender's
        }
    }

    /// <summary>Adds a member mid-run (the GMS admitting a joiner): a new node and a view with it, which every live node
    /// installs (members, and senders outside the region). The joiner gets each sender's stream from where the view that
    /// added it starts.</summary>
    public RegionClusterNode Admit()
    {
        uint id = Nodes.Where(n => n.Id < 1000).Max(n => n.Id) + 1;
        var node = new RegionClusterNode(this, Nodes.Count, id, member: true, joiner: true);
        Nodes.Add(node);
        node.Region.AdmitSenders(Senders.Select(s => new ViewMember(new NodeId(s.Id), s.Address)).ToArray());
        View = View with
        {
            ViewNumber = View.ViewNumber + 1,
            Members = [.. View.Members.Append(new ViewMember(new NodeId(id), node.Address)).OrderBy(m => m.Address.Port).ThenBy(m => m.Address.Ip)],
        };
        foreach (var n in Nodes.Where(n => n.Sim.IsUp && (n.IsMember || n.Sender is not null)))
        {
            n.Region.InstallView(View);
        }

        return node;
    }

    /// <summary>A member leaves the region: a view without it, which every live node installs; then it goes away (its node
    /// stops, as a node that moved to another region no longer serves this one).</summary>
    public void Leave(RegionClusterNode member)
    {
        Exclude(member);
        member.Left = true;
        member.Sim.Crash();
    }

    /// <summary>Null if every live member got 1..count from every sender exactly once, in order; else what is wrong.</summary>
    public string? CheckDelivery(long count)
    {
        foreach (var node in LiveMembers)
        {
            foreach (var sender in Senders)
            {
                long got = node.DeliveredFrom(sender.Id);
                long bad = node.FirstOutOfOrder(sender.Id);
                if (got != count || bad >= 0)
                {
                    return $"node {node.Id} has {got} of {count} from sender {sender.Id} (first out of order at {bad})";
                }
            }
        }

        return null;
    }

    public bool AllDelivered(long count) => LiveMembers.All(n => Senders.All(s => n.DeliveredFrom(s.Id) >= count));

    /// <summary>Messages every live member has delivered: per sender the least any member has, summed over senders.</summary>
    public long DeliveredToAll() => Senders.Sum(DeliveredToAll);

    /// <summary>Messages of <paramref name="sender"/> that every live member delivered.</summary>
    public long DeliveredToAll(RegionClusterNode sender) => LiveMembers.Min(n => n.DeliveredFrom(sender.Id));

    internal bool IsSenderAddress(uint sender, NetAddress from) => _senderAddresses.TryGetValue(sender, out var address) && address == from;
}
