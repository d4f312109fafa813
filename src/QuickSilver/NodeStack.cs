using System.Buffers.Binary;
using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Region;
using QuickSilver.Transport.Reliable;

namespace QuickSilver;

/// <summary>
/// Everything of one node that lives on its core thread: reliable unicast, the GMS client, the node's region member (a
/// node is in exactly one region: its region of overlap), a sender per region it publishes into, and the group layer
/// (§2.2): messages numbered per (sender, group), one regional request per region of the group's current view, small
/// messages packed into shared packets. I/O-free: it runs on the real core or on a simulated node.
/// </summary>
internal sealed class NodeStack : IDatagramHandler
{
    private readonly IAlarmScheduler _scheduler;
    private readonly IDatagramTransport _endpoint;
    private readonly QuickSilverNodeOptions _options;
    private readonly ReliableUnicast _reliable;
    private readonly Dictionary<string, NodeGroup> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<uint, NodeGroup> _groupsById = new();
    private readonly Dictionary<uint, RegionSender> _senders = new();
    private readonly List<NodeGroup> _pumpOrder = new();
    private readonly byte[] _record;
    private RegionMember? _member;
    private int _pumpStart;

    /// <param name="log">Where malformed control datagrams are reported (rate-limited); none in simulation.</param>
    public NodeStack(IAlarmScheduler scheduler, IDatagramTransport endpoint, QuickSilverNodeOptions options, uint epoch, RateLimitedLog? log = null)
    {
        _scheduler = scheduler;
        _endpoint = endpoint;
        _options = options;
        _reliable = new ReliableUnicast(endpoint, scheduler, epoch,
            new ReliableUnicastOptions { MaxSegmentBytes = endpoint.MaxDatagramSize - 64 }, log: log);
        endpoint.SetHandler(_reliable);
        _reliable.Fallback = this;
        var demux = new ControlDemux(_reliable) { Region = OnRegionControl };
        Gms = new GmsClient(scheduler, demux, options.Gms, epoch);
        Gms.ViewsChanged += OnViews;
        _record = new byte[endpoint.MaxDatagramSize];
        Gms.Start();
    }

    public GmsClient Gms { get; }

    public NetAddress Address => _endpoint.LocalAddress;

    public DropCounters Drops { get; } = new();

    /// <summary>Set by the host to publish QSM counters; null in simulation.</summary>
    public QsmCounters? Counters { get; set; }

    /// <summary>Group messages dropped as duplicates of ones already delivered (per sender and group).</summary>
    public long Duplicates { get; private set; }

    internal IReadOnlyDictionary<uint, RegionSender> Senders => _senders;

    internal DropCounters ReliableDrops => _reliable.Drops;

    internal RegionMember? Member => _member;

    /// <summary>The largest group message: a region packet's payload less the group record header.</summary>
    public int MaxMessageBytes => RegionSender.PayloadCapacity(_endpoint.MaxDatagramSize, _options.Region) - GroupWire.HeaderSize;

    public NodeGroup Join(string name, IGroupOwner owner)
    {
        if (_groupsByName.ContainsKey(name))
        {
            throw new InvalidOperationException($"This node has already joined group '{name}'.");
        }

        var group = new NodeGroup(name, owner);
        _groupsByName.Add(name, group);
        _pumpOrder.Add(group);
        if (Gms.FindGroup(name) is { } view && InView(view))
        {
            Adopt(group, view);
        }

        Gms.Join(name);
        return group;
    }

    /// <summary>Leaves a group. Messages still waiting to be sent in it are discarded (their publishers were told
    /// nothing was guaranteed before the send); the GMS removes the node from the group's next view. False when the
    /// node is not in the group.</summary>
    public bool Leave(string name)
    {
        if (_groupsByName.Remove(name, out var group))
        {
            _pumpOrder.Remove(group);
            if (group.View is { } view)
            {
                _groupsById.Remove(view.Group.Value);
            }

            Gms.Leave(name);
            group.Owner.OnLeft(group.DiscardPending());
            return true;
        }

        return false;
    }

    public void Enqueue(NodeGroup group, byte[] message)
    {
        group.Pending.Enqueue(message);
        Pump(group);
    }

    public void Signal(NodeGroup group)
    {
        group.FeedActive = true;
        Pump(group);
    }

    public void Stop() => Gms.Stop();

    /// <summary>The node's protocol state in a few lines (diagnostics): its region member, its senders, its drops.</summary>
    public string Describe() =>
        $"node {Gms.Node?.Value} at {Address}: member: {_member?.Describe() ?? "none"}" +
        string.Concat(_senders.Values.Select(s => $" | sender to region {s.Region}: last {s.LastSequence}, acked {s.Acknowledged}, " +
            $"unacked {s.Unacknowledged}, μ_snd {s.RateController.TargetRate:F0}/s, credits {s.RateController.Credits:F0}, " +
            $"resent on NAK {s.RetransmittedOnNak} / timeout {s.RetransmittedOnTimeout}")) +
        $" | drops: group {Drops.Total}, reliable {_reliable.Drops.Total}, duplicates {Duplicates}";

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
                    // A new region of overlap for this node (its set of groups changed): the old member stops.
                    _member?.Stop(region.MulticastAddress);
                    _member = new RegionMember(me.Value, _endpoint, _reliable, _scheduler, _options.Region, _options.RateControl);
                    _member.Delivered += OnRegionDelivery;
                    Counters?.SetMember(_member);
                    if (_senders.TryGetValue(region.Region.Value, out var own))
                    {
                        AttachLocal(own);
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

        PumpAll();
    }

    /// <summary>Sends what a group has (published messages first, then its feed) while every region of its view can
    /// take another record.</summary>
    private void Pump(NodeGroup group)
    {
        while (group.View is { } view)
        {
            if (group.Next is null && !group.TryTakeNext(MaxMessageBytes, Drops))
            {
                return;
            }

            var message = group.Next!.Value;
            int length = GroupWire.HeaderSize + message.Length;
            foreach (var rr in view.Regions)
            {
                if (GetSender(rr.Region) is not { } sender || !sender.CanAppend(length))
                {
                    return; // SpaceAvailable resumes
                }
            }

            GroupWire.Write(_record, view.Group.Value, ++group.NextSequence, message.Span);
            foreach (var rr in view.Regions)
            {
                _senders[rr.Region.Value].TryAppend(_record.AsSpan(0, length));
            }

            group.MarkSent();
        }
    }

    /// <summary>Pumps every group, starting one further along each time so no group starves the others.</summary>
    private void PumpAll()
    {
        int count = _pumpOrder.Count;
        if (count == 0)
        {
            return;
        }

        _pumpStart = (_pumpStart + 1) % count;
        for (int i = 0; i < count && i < _pumpOrder.Count; i++)
        {
            Pump(_pumpOrder[(_pumpStart + i) % _pumpOrder.Count]);
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

        sender = new RegionSender(me.Value, view, _endpoint, _scheduler, _options.Region, _options.RateControl);
        sender.SpaceAvailable += PumpAll;
        _senders.Add(region.Value, sender);
        Counters?.Add(region.Value, sender);
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
        while (!packet.IsEmpty)
        {
            if (!GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out var payload, out int consumed))
            {
                Drops.Increment(DropReason.Malformed);
                return;
            }

            packet = packet[consumed..];
            if (!_groupsById.TryGetValue(group, out var target))
            {
                continue; // a group this node is not in (the region carries every group mapped to it)
            }

            if (!target.Advance(sender, groupSeq, _options.Region.FifoDelivery))
            {
                Duplicates++;
                continue;
            }

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
        if (RegionMember.IsMemberControl(message[0]))
        {
            if (_member?.View?.Region.Value == region)
            {
                _member.OnControl(from, message);
            }
            else
            {
                Drops.Increment(DropReason.NotForThisNode);
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
