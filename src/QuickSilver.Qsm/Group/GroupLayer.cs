using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Stack;
using QuickSilver.Membership;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm.Region;

namespace QuickSilver.Qsm.Group;

/// <summary>
/// QSM's group layer (§2.2) as a stack layer, above the membership layer and the region layer: messages numbered per
/// (sender, group), one regional request per region of the group's current view, small messages packed into shared
/// region packets, per-sender FIFO and duplicate suppression on delivery. It turns the GMS's views into region views
/// for the region layer (the node's region of overlap, the regions it sends into). I/O-free: it runs on the real core
/// or on a simulated node. Core thread only.
/// </summary>
public sealed class GroupLayer : IProtocolLayer
{
    private readonly Dictionary<string, NodeGroup> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<uint, NodeGroup> _groupsById = new();
    private readonly List<NodeGroup> _pumpOrder = new();
    private readonly List<NodeGroup> _paused = new();
    private GmsClient _gms = null!;
    private RegionLayer _regions = null!;
    private byte[] _record = [];
    private int _pumpStart;

    public string Name => "qsm-group";

    /// <summary>Group records this layer could not decode or feed items it could not send (oversized).</summary>
    public DropCounters Drops { get; } = new();

    /// <summary>Group messages dropped as duplicates of ones already delivered (per sender and group).</summary>
    public long Duplicates { get; private set; }

    /// <summary>The largest group message: a region packet's payload less the group record header.</summary>
    public int MaxMessageBytes => _regions.MaxPayload - GroupWire.HeaderSize;

    public void Attach(LayerContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        _gms = context.Below<MembershipLayer>().Client;
        _regions = context.Below<RegionLayer>();
        _record = new byte[context.MaxDatagramSize];
        _gms.ViewsChanged += OnViews;
        _regions.Consumer = OnRegionDelivery;
        _regions.SpaceAvailable += PumpAll;
    }

    public void Stop()
    {
    }

    public string Describe() => $"{_groupsByName.Count} groups, drops {Drops.Total}, duplicates {Duplicates}";

    internal NodeGroup Join(string name, IGroupOwner owner)
    {
        if (_groupsByName.ContainsKey(name))
        {
            throw new InvalidOperationException($"This node has already joined group '{name}'.");
        }

        var group = new NodeGroup(name, owner);
        _groupsByName.Add(name, group);
        _pumpOrder.Add(group);
        if (_gms.FindGroup(name) is { } view && InView(view))
        {
            Adopt(group, view);
        }

        _gms.Join(name);
        return group;
    }

    /// <summary>Leaves a group. Messages still waiting to be sent in it are discarded (their publishers were told
    /// nothing was guaranteed before the send); the GMS removes the node from the group's next view. False when the
    /// node is not in the group.</summary>
    internal bool Leave(string name)
    {
        if (_groupsByName.Remove(name, out var group))
        {
            _pumpOrder.Remove(group);
            if (group.View is { } view)
            {
                _groupsById.Remove(view.Group.Value);
            }

            _gms.Leave(name);
            group.Owner.OnLeft(group.DiscardPending());
            return true;
        }

        return false;
    }

    internal void Enqueue(NodeGroup group, byte[] message)
    {
        group.Pending.Enqueue(message);
        Pump(group);
    }

    internal void Signal(NodeGroup group)
    {
        group.FeedActive = true;
        Pump(group);
    }

    private bool InView(GroupView view)
    {
        var region = _regions.Member?.View?.Region;
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
        _regions.SetNode(_gms.Node!.Value.Value);
        foreach (var region in update.RegionViews)
        {
            _regions.InstallView(region);
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
                _regions.Senders[rr.Region.Value].TryAppend(_record.AsSpan(0, length));
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
        if (_regions.Senders.TryGetValue(region.Value, out var sender))
        {
            return sender;
        }

        return _gms.FindRegion(region) is { } view && _gms.Node is not null ? _regions.Sender(view) : null;
    }

    // ---- receiving: delivery, and its pause while a group's reader is behind (docs/qsm.md, "Receive buffering") ----

    /// <summary>Region packets refused because they carried a record for a group whose owner was full.</summary>
    public long DeliveriesRefused { get; private set; }

    /// <summary>Times a group's owner filled up and delivery in that group paused.</summary>
    public long DeliveryPauses { get; private set; }

    /// <summary>Groups whose delivery is paused now.</summary>
    public int PausedGroups => _paused.Count;

    /// <summary>The most records one region packet can carry (each has a header): how far past its bound one accepted
    /// packet can take a group's queue.</summary>
    internal int MaxRecordsPerPacket => Math.Max(1, _record.Length / GroupWire.HeaderSize);

    /// <summary>The owner of <paramref name="group"/> has room again (a downcall from its reader): delivery resumes,
    /// held packets first, in order. Core thread.</summary>
    internal void ResumeDelivery(NodeGroup group)
    {
        ArgumentNullException.ThrowIfNull(group);
        if (group.DeliveryPaused)
        {
            group.DeliveryPaused = false;
            _paused.Remove(group);
        }

        _regions.ResumeDelivery();
    }

    /// <summary>Delivers a region packet's records to the groups this node is in, or refuses the whole packet (false:
    /// the member keeps it and offers it again on resume) when it carries a record for a group whose owner is full. A
    /// packet is never cut: an owner takes every record of a packet it was offered, so its queue can pass its bound by
    /// at most one packet's records.</summary>
    private bool OnRegionDelivery(uint sender, ulong seq, ReadOnlySpan<byte> packet)
    {
        if (_paused.Count > 0 && CarriesPausedGroup(packet))
        {
            DeliveriesRefused++;
            return false;
        }

        while (!packet.IsEmpty)
        {
            if (!GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out var payload, out int consumed))
            {
                Drops.Increment(DropReason.Malformed);
                return true;
            }

            packet = packet[consumed..];
            if (!_groupsById.TryGetValue(group, out var target))
            {
                continue; // a group this node is not in (the region carries every group mapped to it)
            }

            if (!target.Advance(sender, groupSeq, _regions.Options.FifoDelivery))
            {
                Duplicates++;
                continue;
            }

            if (!target.Owner.Deliver(sender, groupSeq, payload) && !target.DeliveryPaused)
            {
                target.DeliveryPaused = true; // the owner calls ResumeDelivery once its reader has made room
                _paused.Add(target);
                DeliveryPauses++;
            }
        }

        return true;
    }

    /// <summary>Whether the packet has a record for a paused group this node is still in. Groups left since they paused
    /// are forgotten here (their owner may never resume them).</summary>
    private bool CarriesPausedGroup(ReadOnlySpan<byte> packet)
    {
        for (int i = _paused.Count - 1; i >= 0; i--)
        {
            var paused = _paused[i];
            if (paused.View is not { } view || !_groupsById.TryGetValue(view.Group.Value, out var current) || current != paused)
            {
                paused.DeliveryPaused = false;
                _paused.RemoveAt(i);
            }
        }

        while (_paused.Count > 0 && GroupWire.TryRead(packet, out uint group, out _, out _, out int consumed))
        {
            packet = packet[consumed..];
            if (_groupsById.TryGetValue(group, out var target) && target.DeliveryPaused)
            {
                return true;
            }
        }

        return false;
    }
}
