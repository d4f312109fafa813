using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Qsm.Simulation;

/// <summary>
/// One simulated node of a <see cref="RegionCluster"/>: the region stack (<see cref="QsmStack.BuildRegion"/>: reliable
/// unicast and the region layer) on one endpoint, with a <see cref="RegionMember"/> if it is in the region and a
/// <see cref="RegionSender"/> if it sends. It counts
/// what it delivers per sender and checks the order as it goes (message numbers 1, 2, 3, … in the payload).
/// </summary>
internal sealed class RegionClusterNode
{
    private readonly Dictionary<uint, DeliveryLog> _delivered = new();
    private readonly RegionCluster _cluster;
    private readonly bool _isMember;

    internal RegionClusterNode(RegionCluster cluster, int slot, uint id, bool member, bool joiner = false)
    {
        Joiner = joiner;
        _cluster = cluster;
        Slot = slot;
        Id = id;
        Sim = cluster.Network.AddNode();
        Sim.ProcessingCostPerPacket = cluster.Settings.ProcessingCostPerPacket;
        Sim.ReceiveQueueLimit = cluster.Settings.ReceiveQueueLimit;
        Transport = Sim.Open(RegionCluster.Port, cluster.Settings.MaxDatagramBytes);
        Address = Transport.LocalAddress;
        Stack = QsmStack.BuildRegion(Transport, Sim, id, new QsmStackOptions
        {
            Epoch = id,
            Region = cluster.Settings.Region,
            RateControl = cluster.Settings.Rate,
            Reliable = new ReliableUnicastOptions
            {
                MaxSegmentBytes = cluster.Settings.MaxDatagramBytes - 64,
                MaxMessageBytes = cluster.Settings.MaxControlMessageBytes,
            },
        });
        Region = Stack.Get<RegionLayer>();
        Region.PacketArrived += OnArrival;
        Region.Delivered += OnDelivered;
        _isMember = member;
    }

    /// <summary>Position in <see cref="RegionCluster.Nodes"/>.</summary>
    public int Slot { get; }

    public uint Id { get; }

    public SimNode Sim { get; }

    public IDatagramTransport Transport { get; }

    public NetAddress Address { get; }

    /// <summary>This node's stack: transport → reliable unicast → region.</summary>
    public ProtocolStack Stack { get; }

    public RegionLayer Region { get; }

    public ReliableUnicast Reliable => Stack.Get<ReliableUnicast>();

    /// <summary>The node's region member (once the cluster installed the view), or null for a sender outside the region.</summary>
    public RegionMember? Member => _isMember ? Region.Member : null;

    /// <summary>Whether this node is in the region (a sender may be outside it) and has not left it.</summary>
    public bool IsMember => _isMember && !Left;

    /// <summary>Joined mid-stream (<see cref="RegionCluster.Admit"/>): its first message from a sender may be any number;
    /// from there they must run on without a gap.</summary>
    public bool Joiner { get; }

    /// <summary>Left the region (<see cref="RegionCluster.Leave"/>).</summary>
    public bool Left { get; internal set; }

    public RegionSender? Sender { get; internal set; }

    /// <summary>The number of the last message delivered in order from <paramref name="sender"/> (for a member there from
    /// the start, how many it delivered; a joiner starts wherever its stream starts).</summary>
    public long DeliveredFrom(uint sender) => _delivered.TryGetValue(sender, out var log) ? log.Base + log.Count : 0;

    /// <summary>Index of the first delivery from <paramref name="sender"/> whose message number was not the next one, or −1.</summary>
    public long FirstOutOfOrder(uint sender) => _delivered.TryGetValue(sender, out var log) ? log.FirstBad : -1;

    private void OnDelivered(uint sender, ulong seq, ReadOnlySpan<byte> payload)
    {
        if (!_delivered.TryGetValue(sender, out var log))
        {
            _delivered[sender] = log = new DeliveryLog();
        }

        int number = BitConverter.ToInt32(payload);
        if (Joiner && log.Count == 0)
        {
            log.Base = number - 1;
        }

        if (number != log.Base + log.Count + 1 && log.FirstBad < 0)
        {
            log.FirstBad = log.Count;
        }

        log.Count++;
        _cluster.Timeline.OnDelivered(Slot, sender, seq, Sim.Now);
    }

    private void OnArrival(NetAddress from, in DataHeader header)
    {
        if (_isMember)
        {
            var member = Region.Member;
            bool ownClass = member is null || (int)(header.Seq % (ulong)member.Partitions) == member.Partition;
            _cluster.Timeline.OnArrival(Slot, header.Sender, header.Seq, _cluster.IsSenderAddress(header.Sender, from), Sim.Now, ownClass);
        }
    }

    private sealed class DeliveryLog
    {
        public long Count;
        public long Base; // a joiner's first message less one
        public long FirstBad = -1;
    }
}
