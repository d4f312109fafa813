using QuickSilver.Core.Io;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Qsm.Simulation;

/// <summary>
/// One simulated node of a <see cref="RegionCluster"/>: one endpoint carrying both QSM data and reliable unicast
/// control, a <see cref="RegionMember"/> if it is in the region and a <see cref="RegionSender"/> if it sends. It counts
/// what it delivers per sender and checks the order as it goes (message numbers 1, 2, 3, … in the payload).
/// </summary>
public sealed class RegionClusterNode
{
    private readonly Dictionary<uint, DeliveryLog> _delivered = new();
    private readonly RegionCluster _cluster;

    internal RegionClusterNode(RegionCluster cluster, int slot, uint id, bool member)
    {
        _cluster = cluster;
        Slot = slot;
        Id = id;
        Sim = cluster.Network.AddNode();
        Sim.ProcessingCostPerPacket = cluster.Settings.ProcessingCostPerPacket;
        Sim.ReceiveQueueLimit = cluster.Settings.ReceiveQueueLimit;
        Transport = Sim.Open(RegionCluster.Port, cluster.Settings.MaxDatagramBytes);
        Address = Transport.LocalAddress;
        Reliable = new ReliableUnicast(Transport, Sim, id, new ReliableUnicastOptions
        {
            MaxSegmentBytes = cluster.Settings.MaxDatagramBytes - 64,
            MaxMessageBytes = cluster.Settings.MaxControlMessageBytes,
        });
        Transport.SetHandler(Reliable);
        Reliable.Fallback = new DataHandler(this);
        Reliable.MessageReceived += OnControl;
        if (member)
        {
            Member = new RegionMember(id, Transport, Reliable, Sim, cluster.Settings.Region, cluster.Settings.Rate);
            Member.Delivered += OnDelivered;
        }
    }

    /// <summary>Position in <see cref="RegionCluster.Nodes"/>.</summary>
    public int Slot { get; }

    public uint Id { get; }

    public SimNode Sim { get; }

    public IDatagramTransport Transport { get; }

    public NetAddress Address { get; }

    public ReliableUnicast Reliable { get; }

    public RegionMember? Member { get; }

    public RegionSender? Sender { get; internal set; }

    /// <summary>Messages delivered from <paramref name="sender"/>.</summary>
    public long DeliveredFrom(uint sender) => _delivered.TryGetValue(sender, out var log) ? log.Count : 0;

    /// <summary>Index of the first delivery from <paramref name="sender"/> whose message number was not the next one, or −1.</summary>
    public long FirstOutOfOrder(uint sender) => _delivered.TryGetValue(sender, out var log) ? log.FirstBad : -1;

    private void OnDelivered(uint sender, ulong seq, ReadOnlySpan<byte> payload)
    {
        if (!_delivered.TryGetValue(sender, out var log))
        {
            _delivered[sender] = log = new DeliveryLog();
        }

        if (BitConverter.ToInt32(payload) != log.Count + 1 && log.FirstBad < 0)
        {
            log.FirstBad = log.Count;
        }

        log.Count++;
        _cluster.Timeline.OnDelivered(Slot, sender, seq, Sim.Now);
    }

    private void OnControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.Length > 0 && message[0] is 1 or 2)
        {
            Member?.OnControl(from, message);
        }
        else if (Sender is { } sender)
        {
            ulong before = sender.Acknowledged;
            sender.OnControl(from, message);
            if (sender.Acknowledged > before)
            {
                _cluster.Timeline.OnAcknowledged(Id, before, sender.Acknowledged, Sim.Now);
            }
        }
    }

    private sealed class DeliveryLog
    {
        public long Count;
        public long FirstBad = -1;
    }

    private sealed class DataHandler(RegionClusterNode node) : IDatagramHandler
    {
        public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
        {
            if (node.Member is null)
            {
                return;
            }

            if (RegionWire.TryReadData(datagram, out var header, out _) && node._cluster.IsSenderAddress(header.Sender, from))
            {
                node._cluster.Timeline.OnArrivalFromSender(node.Slot, header.Sender, header.Seq);
            }

            node.Member.OnData(from, datagram);
        }
    }
}
