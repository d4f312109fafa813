using System.Collections.Immutable;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Qsm.RateControl;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Qsm.Tests;

/// <summary>
/// Test harness: a simulated region. Each node has one endpoint carrying both QSM data and reliable unicast control,
/// a <see cref="RegionMember"/> (if in the region) and a <see cref="RegionSender"/> (if it sends). The region view is
/// installed directly, standing in for the GMS, so these tests exercise the regional protocol alone.
/// </summary>
internal sealed class RegionCluster
{
    public const ushort Port = 5000;
    public static readonly NetAddress Group = new(0xEF0A0001, 6000);

    public RegionCluster(int seed, int members, int senders, LinkOptions link, RegionOptions options, bool sendersAreMembers = false)
    {
        Network = new SimNetwork(seed, link);
        Options = options;
        for (int i = 0; i < members; i++)
        {
            Nodes.Add(new Node(this, (uint)(i + 1), member: true));
        }

        for (int i = 0; i < senders; i++)
        {
            var node = sendersAreMembers ? Nodes[i] : new Node(this, (uint)(1000 + i), member: false);
            if (!sendersAreMembers)
            {
                Nodes.Add(node);
            }

            Senders.Add(node);
        }

        View = new RegionView(new RegionId(1), 1,
            [.. Nodes.Where(n => n.Member is not null).Select(n => new ViewMember(new NodeId(n.Id), n.Address)).OrderBy(m => m.Address.Port).ThenBy(m => m.Address.Ip)],
            Group);
        foreach (var node in Nodes)
        {
            node.Member?.InstallView(View);
        }

        foreach (var sender in Senders)
        {
            sender.Sender = new RegionSender(sender.Id, View, sender.Transport, sender.Sim, options, new RateControlOptions { MinRate = 2000 });
            if (sender.Member is { } member)
            {
                var s = sender;
                sender.Sender.Sent += (seq, payload) => member.OnLocalSend(s.Id, s.Address, seq, payload.Span);
            }
        }
    }

    public SimNetwork Network { get; }

    public RegionOptions Options { get; }

    public RegionView View { get; private set; }

    public List<Node> Nodes { get; } = new();

    public List<Node> Senders { get; } = new();

    public IEnumerable<Node> LiveMembers => Nodes.Where(n => n.Member is not null && n.Sim.IsUp);

    /// <summary>Each sender sends <paramref name="count"/> numbered messages as fast as its window and rate allow.</summary>
    public void SendFromAll(int count)
    {
        foreach (var sender in Senders)
        {
            var s = sender;
            int next = 1;
            var payload = new byte[64];
            void Pump()
            {
                while (next <= count && s.Sim.IsUp)
                {
                    BitConverter.TryWriteBytes(payload, next);
                    if (!s.Sender!.TrySend(payload))
                    {
                        return;
                    }

                    next++;
                }
            }

            s.Sender!.SpaceAvailable += Pump;
            s.Sim.TryPost(_ => Pump(), null);
        }
    }

    /// <summary>Installs a new view without the given nodes (the GMS reporting them dead).</summary>
    public void Exclude(params Node[] dead)
    {
        var gone = dead.Select(d => d.Id).ToHashSet();
        View = View with { ViewNumber = View.ViewNumber + 1, Members = [.. View.Members.Where(m => !gone.Contains(m.Node.Value))] };
        foreach (var node in LiveMembers)
        {
            node.Member!.InstallView(View);
        }

        foreach (var sender in Senders.Where(s => s.Sim.IsUp))
        {
            sender.Sender!.InstallView(View);
        }
    }

    /// <summary>Asserts every live member got 1..count from every sender exactly once, in order.</summary>
    public string? CheckDelivery(int count)
    {
        foreach (var node in LiveMembers)
        {
            foreach (var sender in Senders)
            {
                var got = node.Received.GetValueOrDefault(sender.Id) ?? new List<int>();
                if (got.Count != count || !got.SequenceEqual(Enumerable.Range(1, count)))
                {
                    int firstBad = Enumerable.Range(0, Math.Min(got.Count, count)).FirstOrDefault(i => got[i] != i + 1, -1);
                    return $"node {node.Id} has {got.Count} of {count} from sender {sender.Id} (first out of order at {firstBad})";
                }
            }
        }

        return null;
    }

    public bool AllDelivered(int count)
        => LiveMembers.All(n => Senders.All(s => n.Received.TryGetValue(s.Id, out var got) && got.Count >= count));

    internal sealed class Node
    {
        public Node(RegionCluster cluster, uint id, bool member)
        {
            Id = id;
            Sim = cluster.Network.AddNode();
            Transport = Sim.Open(Port, 16 * 1024);
            Address = Transport.LocalAddress;
            Reliable = new ReliableUnicast(Transport, Sim, id, new ReliableUnicastOptions { MaxMessageBytes = 15_000 });
            Transport.SetHandler(Reliable);
            Reliable.Fallback = new DataHandler(this);
            Reliable.MessageReceived += (from, message) =>
            {
                if (message.Length > 0 && message[0] is 1 or 2)
                {
                    Member?.OnControl(from, message);
                }
                else
                {
                    Sender?.OnControl(from, message);
                }
            };
            if (member)
            {
                Member = new RegionMember(id, Transport, Reliable, Sim, cluster.Options);
                Member.Delivered += (sender, seq, payload) =>
                {
                    if (!Received.TryGetValue(sender, out var list))
                    {
                        Received[sender] = list = new List<int>();
                    }

                    list.Add(BitConverter.ToInt32(payload));
                };
            }
        }

        public uint Id { get; }
        public SimNode Sim { get; }
        public IDatagramTransport Transport { get; }
        public NetAddress Address { get; }
        public ReliableUnicast Reliable { get; }
        public Region.RegionMember? Member { get; }
        public RegionSender? Sender { get; set; }
        public Dictionary<uint, List<int>> Received { get; } = new();

        private sealed class DataHandler(Node node) : IDatagramHandler
        {
            public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram) => node.Member?.OnData(from, datagram);
        }
    }
}
