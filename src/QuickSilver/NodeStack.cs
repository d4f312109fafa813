using System.Buffers.Binary;
using QuickSilver.Core;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;

namespace QuickSilver;

/// <summary>
/// Everything of one node that lives on its core thread: the endpoint, reliable unicast, the GMS client, the node's
/// region member (a node is in exactly one region: its region of overlap) and a sender per region it publishes into.
/// Group messages are numbered per (sender, group) and sent once per region of the group's current view (§2.2).
/// </summary>
internal sealed class NodeStack : IDatagramHandler
{
    private readonly QuickSilverCore _core;
    private readonly UdpEndpoint _endpoint;
    private readonly QuickSilverNodeOptions _options;
    private readonly ReliableUnicast _reliable;
    private readonly Dictionary<string, NodeGroup> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<uint, NodeGroup> _groupsById = new();
    private readonly Dictionary<uint, RegionSender> _senders = new();
    private readonly byte[] _packet;
    private Qsm.Region.RegionMember? _member;

    public NodeStack(QuickSilverCore core, UdpEndpoint endpoint, QuickSilverNodeOptions options, uint epoch)
    {
        _core = core;
        _endpoint = endpoint;
        _options = options;
        _reliable = new ReliableUnicast(endpoint, core, epoch,
            new ReliableUnicastOptions { MaxMessageBytes = endpoint.MaxDatagramSize - 64 });
        endpoint.SetHandler(_reliable);
        _reliable.Fallback = this;
        var demux = new ControlDemux(_reliable) { Region = OnRegionControl };
        Gms = new GmsClient(core, demux, options.Gms, epoch);
        Gms.ViewsChanged += OnViews;
        _packet = new byte[endpoint.MaxDatagramSize];
        Gms.Start();
    }

    public GmsClient Gms { get; }

    internal Dictionary<uint, RegionSender> Senders => _senders;

    internal Qsm.Region.RegionMember? Member => _member;

    public NetAddress Address => _endpoint.LocalAddress;

    public DropCounters Drops { get; } = new();

    /// <summary>The largest group message: a datagram less the region data header (24 bytes) and the group header.</summary>
    public int MaxMessageBytes => _endpoint.MaxDatagramSize - 24 - GroupWire.HeaderSize;

    public NodeGroup Join(string name, QuickSilverGroup owner)
    {
        if (_groupsByName.ContainsKey(name))
        {
            throw new InvalidOperationException($"This node has already joined group '{name}'.");
        }

        var group = new NodeGroup(name, owner);
        _groupsByName.Add(name, group);
        if (Gms.FindGroup(name) is { } view && InView(view))
        {
            Adopt(group, view);
        }

        Gms.Join(name);
        return group;
    }

    public void Leave(string name)
    {
        if (_groupsByName.Remove(name, out var group))
        {
            if (group.View is { } view)
            {
                _groupsById.Remove(view.Group.Value);
            }

            Gms.Leave(name);
            group.Owner.OnLeft();
        }
    }

    public void Enqueue(NodeGroup group, byte[] message)
    {
        group.Pending.Enqueue(message);
        Pump(group);
    }

    public void Stop() => Gms.Stop();

    private bool InView(GroupView view)
    {
        var region = _member?.View?.Region;
        return region is not null && view.Regions.Any(r => r.Region == region.Value);
    }

    private void Adopt(NodeGroup group, GroupView view)
    {
        group.View = view;
        _groupsById[view.Group.Value] = group;
        group.Owner.OnViewInstalled(view);
    }

    private void OnViews(NodeUpdate update)
    {
        var me = Gms.Node!.Value;
        foreach (var region in update.RegionViews)
        {
            if (region.IndexOf(me) >= 0)
            {
                if (_member?.View?.Region != region.Region)
                {
                    // A new region of overlap for this node (its set of groups changed).
                    _member = new Qsm.Region.RegionMember(me.Value, _endpoint, _reliable, _core, _options.Region);
                    _member.Delivered += OnRegionDelivery;
                    foreach (var (id, sender) in _senders)
                    {
                        if (id == region.Region.Value)
                        {
                            AttachLocal(sender);
                        }
                    }
                }

                _member.InstallView(region);
            }

            if (_senders.TryGetValue(region.Region.Value, out var existing))
            {
                existing.InstallView(region);
            }
        }

        foreach (var view in update.GroupViews)
        {
            if (_groupsByName.TryGetValue(view.Name, out var group))
            {
                Adopt(group, view);
            }
        }

        foreach (var group in _groupsByName.Values)
        {
            Pump(group);
        }
    }

    private void Pump(NodeGroup group)
    {
        while (group.Pending.Count > 0 && group.View is { } view)
        {
            // Every region of the view must have room; otherwise wait for SpaceAvailable.
            foreach (var rr in view.Regions)
            {
                if (GetSender(rr.Region) is not { HasSpace: true })
                {
                    return;
                }
            }

            var message = group.Pending.Dequeue();
            ulong seq = ++group.NextSequence;
            int length = GroupWire.HeaderSize + message.Length;
            GroupWire.Write(_packet, view.Group.Value, seq, message);
            foreach (var rr in view.Regions)
            {
                GetSender(rr.Region)!.TrySend(_packet.AsSpan(0, length));
            }

            group.Owner.OnSent();
        }
    }

    private RegionSender? GetSender(RegionId region)
    {
        if (_senders.TryGetValue(region.Value, out var sender))
        {
            return sender;
        }

        if (Gms.FindRegion(region) is not { } view || Gms.Node is not { } me)
        {
            return null;
        }

        sender = new RegionSender(me.Value, view, _endpoint, _core, _options.Region, _options.RateControl);
        sender.SpaceAvailable += () =>
        {
            foreach (var group in _groupsByName.Values)
            {
                Pump(group);
            }
        };
        _senders.Add(region.Value, sender);
        if (_member?.View?.Region == region)
        {
            AttachLocal(sender);
        }

        return sender;
    }

    /// <summary>A sender in its own region delivers its own messages to itself, as every member of the view does.</summary>
    private void AttachLocal(RegionSender sender)
    {
        var member = _member!;
        sender.Sent += (seq, payload) => member.OnLocalSend(Gms.Node!.Value.Value, Address, seq, payload.Span);
    }

    private void OnRegionDelivery(uint sender, ulong seq, ReadOnlySpan<byte> packet)
    {
        if (!GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out var payload))
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        if (_groupsById.TryGetValue(group, out var target))
        {
            target.Owner.Deliver(sender, groupSeq, payload);
        }
    }

    private void OnRegionControl(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (message.Length < 5)
        {
            Drops.Increment(DropReason.Malformed);
            return;
        }

        uint region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]);
        if (message[0] is 1 or 2)
        {
            if (_member?.View?.Region.Value == region)
            {
                _member.OnControl(from, message);
            }
        }
        else if (_senders.TryGetValue(region, out var sender))
        {
            sender.OnControl(from, message);
        }
        else
        {
            Drops.Increment(DropReason.NoHandler);
        }
    }

    /// <summary>QsmData datagrams (everything that is not reliable unicast).</summary>
    public void OnDatagram(NetAddress from, ReadOnlySpan<byte> datagram)
    {
        if (_member is { } member)
        {
            member.OnData(from, datagram);
        }
        else
        {
            Drops.Increment(DropReason.NoHandler);
        }
    }
}

/// <summary>A group's state on the core thread.</summary>
internal sealed class NodeGroup(string name, QuickSilverGroup owner)
{
    public string Name { get; } = name;
    public QuickSilverGroup Owner { get; } = owner;
    public GroupView? View { get; set; }
    public ulong NextSequence { get; set; }
    public Queue<byte[]> Pending { get; } = new();
}
