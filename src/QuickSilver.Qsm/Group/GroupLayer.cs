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
/// <para>Sending is pulled from below: each region sender has a <see cref="RegionFeed"/> as its packet source, and when
/// the transport has a free slot, rate control a credit and the window room, the sender asks it for a payload; the
/// feed then takes the groups' messages (published ones, or pulled from the application's feed) round robin and writes
/// their records straight into the send slot. A message bound for several regions waits in its group's
/// <see cref="GroupOutbox"/> until each region's feed has written it.</para>
/// </summary>
internal sealed class GroupLayer : IProtocolLayer
{
    private readonly Dictionary<string, NodeGroup> _groupsByName = new(StringComparer.Ordinal);
    private readonly Dictionary<uint, NodeGroup> _groupsById = new();
    private readonly Dictionary<uint, RegionFeed> _feeds = new();
    private readonly List<NodeGroup> _paused = new();
    private GmsClient _gms = null!;
    private RegionLayer _regions = null!;

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
        _gms.ViewsChanged += OnViews;
        _gms.JoinRefused += OnJoinRefused;
        _regions.Consumer = OnRegionDelivery;
        _regions.Skipped += OnRegionSkip;
        _regions.Swept += ForgetDepartedSenders;
    }

    public void Stop()
    {
    }

    public string Describe() => $"{_groupsByName.Count} groups, drops {Drops.Total}, duplicates {Duplicates}, outbox full {_groupsByName.Values.Sum(g => g.OutboxFullCount)}";

    /// <summary>Whether this node is in group <paramref name="name"/> (joined and not left).</summary>
    internal bool IsJoined(string name) => _groupsByName.ContainsKey(name);

    /// <summary>The highest message number this node used in a group it has left: a group joined (again) numbers its
    /// messages above it. Members key duplicate suppression on (sender id, group number), and a member may still hold
    /// this node's progress in a group it left and joins again under the same id (it forgets it only once the sender's
    /// stream is retired, docs/qsm.md, "Departed senders"): numbering from 1 again had every member drop the new
    /// messages as duplicates. One number for the node, not one per group ever left, so it costs nothing per group.</summary>
    private ulong _sequenceFloor;

    internal NodeGroup Join(string name, IGroupOwner owner)
    {
        if (_groupsByName.ContainsKey(name))
        {
            throw new InvalidOperationException($"This node has already joined group '{name}'.");
        }

        var group = new NodeGroup(name, owner) { NextSequence = _sequenceFloor };
        _groupsByName.Add(name, group);
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
            Detach(group);
            _gms.Leave(name);
            _sequenceFloor = Math.Max(_sequenceFloor, group.NextSequence);
            group.Owner.OnLeft(group.DiscardPending()); // the published messages it never sent (their slots free)
            ReleaseIdleFeeds();
            return true;
        }

        return false;
    }

    /// <summary>The GMS refused the join (a limit of its own): the group is dropped here as on a leave, and its owner
    /// told why.</summary>
    private void OnJoinRefused(string name, GmsRefusedException refusal)
    {
        if (_groupsByName.Remove(name, out var group))
        {
            Detach(group);
            _sequenceFloor = Math.Max(_sequenceFloor, group.NextSequence);
            group.Owner.OnJoinRefused(refusal, group.DiscardPending());
            ReleaseIdleFeeds();
        }
    }

    private void Detach(NodeGroup group)
    {
        if (group.View is { } view)
        {
            _groupsById.Remove(view.Group.Value);
            foreach (var rr in view.Regions)
            {
                _feeds.GetValueOrDefault(rr.Region.Value)?.Groups.Remove(group);
            }
        }
    }

    internal void Enqueue(NodeGroup group, byte[] message)
    {
        group.Pending.Enqueue(message);
        SignalRegions(group);
    }

    internal void Signal(NodeGroup group)
    {
        group.FeedActive = true;
        SignalRegions(group);
    }

    /// <summary>The application published into the group's owner queue: its regions pull when they can.</summary>
    internal void SignalPublished(NodeGroup group)
    {
        group.PublishSignalled = true;
        SignalRegions(group);
    }

    /// <summary>The group has something to send: its regions' senders pull when they can.</summary>
    private void SignalRegions(NodeGroup group)
    {
        if (group.View is not { } view)
        {
            return;
        }

        foreach (var rr in view.Regions)
        {
            _feeds.GetValueOrDefault(rr.Region.Value)?.Sender?.Signal();
        }
    }

    private bool InView(GroupView view)
    {
        var region = _regions.Member?.View?.Region;
        return region is not null && view.Regions.Any(r => r.Region == region.Value);
    }

    private void Adopt(NodeGroup group, GroupView view)
    {
        var previous = group.View;
        if (group.View is { } old)
        {
            foreach (var rr in old.Regions)
            {
                _feeds.GetValueOrDefault(rr.Region.Value)?.Groups.Remove(group);
            }
        }

        group.View = view;
        _groupsById[view.Group.Value] = group;
        var regions = new uint[view.Regions.Length];
        for (int i = 0; i < regions.Length; i++)
        {
            regions[i] = view.Regions[i].Region.Value;
            if (!_feeds.TryGetValue(regions[i], out var feed))
            {
                _feeds[regions[i]] = feed = new RegionFeed(this, regions[i]);
            }

            feed.Groups.Add(group);
            EnsureSender(feed);
        }

        group.Outbox.SetRegions(regions);
        if (previous is not null && _regions.Options.FifoDelivery)
        {
            ReplayToMovedMembers(group, previous, view, regions);
        }

        group.Owner.OnViewInstalled(view);
    }

    private void OnViews(NodeUpdate update)
    {
        uint node = _gms.Node!.Value.Value;
        if (_viewsEpoch != 0 && _gms.ViewsEpoch != _viewsEpoch)
        {
            StartNewEpoch(update);
        }

        _viewsEpoch = _gms.ViewsEpoch;
        if (_regions.NodeId is { } old && old != node)
        {
            // Registered again under a new id: the region layer retires the senders of the old one, so each feed gets a
            // new sender (EnsureSender below) that continues the groups' numbering under the new id.
            foreach (var feed in _feeds.Values)
            {
                feed.Sender = null;
            }
        }

        _regions.SetNode(node);
        RememberSenderMembers();
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

        AdmitSenders();
        ReleaseIdleFeeds();
        if (_regions.Member?.View?.Region is { } own && !_gms.Groups.Any(g => g.Regions.Any(r => r.Region == own)))
        {
            _regions.LeaveRegion(); // the GMS moved this node out of its region: it left its last group
        }

        foreach (var feed in _feeds.Values)
        {
            EnsureSender(feed);
            feed.Sender?.Signal();
        }
    }

    private readonly List<uint> _idleScratch = new();

    /// <summary>Per region this node sends into, the node ids of its senders' views before the update being applied
    /// (<see cref="ReplayToMovedMembers"/>).</summary>
    private readonly Dictionary<uint, HashSet<uint>> _senderMembers = new();

    private void RememberSenderMembers()
    {
        _senderMembers.Clear();
        foreach (var sender in _regions.Senders.Values.Concat(_regions.RetiredSenders))
        {
            if (!_senderMembers.TryGetValue(sender.Region, out var members))
            {
                _senderMembers[sender.Region] = members = new HashSet<uint>();
            }

            foreach (var member in sender.View.Members)
            {
                members.Add(member.Node.Value);
            }
        }
    }

    /// <summary>Each group record of a region packet's payload: (group id, group sequence, the message as a view of
    /// <paramref name="payload"/>). Stops at the first malformed record.</summary>
    private static void ForEachRecord(ReadOnlyMemory<byte> payload, Action<uint, ulong, ReadOnlyMemory<byte>> record)
    {
        var rest = payload;
        while (GroupWire.TryRead(rest.Span, out uint group, out ulong sequence, out var body, out int consumed))
        {
            record(group, sequence, rest.Slice(GroupWire.HeaderSize, body.Length));
            rest = rest[consumed..];
        }
    }

    /// <summary>Group messages sent again into a new region of a group for members that moved there from the group's old
    /// regions (<see cref="ReplayToMovedMembers"/>), and those the outbox had no room for.</summary>
    public long MovedMemberReplays { get; private set; }

    public long MovedMemberReplaysDropped { get; private set; }

    /// <summary>A group's new view maps it to regions it was not in before, and some of their members were members of its
    /// old regions as this node's senders saw them: nodes that moved region (they joined or left another group). A
    /// sender numbers into its own view of a region, which may be older than the moving node's: what it sent into the
    /// old region after the node had stopped its member there never reached it (a message published in a group view
    /// the node was in). So the new regions get, before anything else, the group's messages of the packets the old
    /// regions' senders have not had acknowledged, and everything the outbox still holds
    /// (<see cref="GroupOutbox.Replay"/>); members that had them drop them by their sequence. Only with FIFO delivery,
    /// whose duplicate filter makes this safe.</summary>
    private void ReplayToMovedMembers(NodeGroup group, GroupView previous, GroupView view, uint[] regions)
    {
        var oldRegions = previous.Regions.Select(r => r.Region.Value).ToHashSet();
        var earlier = new HashSet<uint>();
        foreach (uint region in oldRegions)
        {
            if (_senderMembers.TryGetValue(region, out var members))
            {
                earlier.UnionWith(members);
            }
        }

        if (earlier.Count == 0)
        {
            return; // this node sent nothing into the old regions
        }

        var movedInto = regions.Where(r => !oldRegions.Contains(r)
            && _gms.FindRegion(new RegionId(r)) is { } rv && rv.Members.Any(m => earlier.Contains(m.Node.Value))).ToList();
        if (movedInto.Count == 0)
        {
            return;
        }

        var replay = new SortedList<ulong, ReadOnlyMemory<byte>>();
        foreach (var sender in _regions.Senders.Values.Concat(_regions.RetiredSenders).Where(s => oldRegions.Contains(s.Region)))
        {
            foreach (var payload in sender.UnacknowledgedPayloads())
            {
                ForEachRecord(payload, (id, sequence, body) =>
                {
                    if (id == view.Group.Value)
                    {
                        replay.TryAdd(sequence, body);
                    }
                });
            }
        }

        MovedMemberReplays += replay.Count;
        MovedMemberReplaysDropped += group.Outbox.Replay([.. replay.Select(p => (p.Key, p.Value))], movedInto);
    }

    /// <summary>Messages of packets sent and not acknowledged when the GMS restarted that no group's outbox had room for
    /// (<see cref="GroupOutbox.Restart"/>): lost for the members that had not received them.</summary>
    public long ResendsDroppedAtNewEpoch { get; private set; }

    /// <summary>The GMS restarted (docs/membership.md, "A restarted GMS"): ids, region ids and view numbers of the old
    /// epoch mean nothing now. The region layer stops its member and senders (<see cref="RegionLayer.StartNewEpoch"/>),
    /// handing back the group records of every packet they had not had acknowledged; each group puts those messages
    /// (by their group numbers, oldest first) ahead of what its outbox still holds, for the new epoch's regions to send
    /// again; and each group carries its per-sender duplicate filter over to the senders' new ids by address, so a
    /// member that delivered a message before drops it when it comes again.</summary>
    private void StartNewEpoch(NodeUpdate update)
    {
        var resend = new Dictionary<NodeGroup, SortedList<ulong, ReadOnlyMemory<byte>>>();
        _regions.StartNewEpoch(payload => ForEachRecord(payload, (group, sequence, body) =>
        {
            if (_groupsById.TryGetValue(group, out var target))
            {
                if (!resend.TryGetValue(target, out var list))
                {
                    resend[target] = list = new SortedList<ulong, ReadOnlyMemory<byte>>();
                }

                list.TryAdd(sequence, body); // one copy per region it went to
            }
        }));
        foreach (var feed in _feeds.Values)
        {
            feed.Sender = null;
        }

        var previous = _gms.PreviousEpochAddresses;
        var now = new Dictionary<Core.Io.NetAddress, uint>();
        foreach (var member in update.RegionViews.SelectMany(r => r.Members))
        {
            now[member.Address] = member.Node.Value;
        }

        foreach (var group in _groupsByName.Values)
        {
            group.RenumberSenders(old => previous.TryGetValue(old, out var address) && now.TryGetValue(address, out uint id) ? id : null);
            var list = resend.GetValueOrDefault(group);
            ResendsDroppedAtNewEpoch += group.Outbox.Restart(list is null ? [] : [.. list.Select(p => (p.Key, p.Value))]);
        }

        _groupsById.Clear(); // group ids of the old epoch; each group is adopted again under its new id
    }

    /// <summary>The GMS epoch of the views last applied (0: none yet).</summary>
    private ulong _viewsEpoch;

    /// <summary>Regions none of this node's groups maps to any more (every group of their feed left, or its view moved to
    /// other regions): the feed goes, and the region layer retires the sender (<see cref="RegionLayer.Release"/>), so a
    /// node that joins and leaves many groups keeps feeds and senders only for the regions its groups map to now.</summary>
    private void ReleaseIdleFeeds()
    {
        foreach (var (region, feed) in _feeds)
        {
            if (feed.Groups.Count == 0)
            {
                _idleScratch.Add(region);
            }
        }

        foreach (uint region in _idleScratch)
        {
            _feeds.Remove(region);
            _regions.Release(region);
        }

        _idleScratch.Clear();
    }

    /// <summary>Tells the region layer who may send into this node's region of overlap: the members of every region of
    /// every group mapped to it. Those groups are this node's own (a region is the set of nodes in exactly the same
    /// groups), and the GMS sends this node the views of all their regions (it sends into each), so the set follows
    /// from the views this node has (docs/security.md, "Accept only members").</summary>
    private void AdmitSenders()
    {
        if (_regions.Member?.View?.Region is not { } region)
        {
            return;
        }

        var senders = new List<ViewMember>();
        foreach (var group in _gms.Groups)
        {
            if (!group.Regions.Any(r => r.Region == region))
            {
                continue;
            }

            foreach (var rr in group.Regions)
            {
                if (_gms.FindRegion(rr.Region) is { } view)
                {
                    senders.AddRange(view.Members);
                }
            }
        }

        _regions.AdmitSenders(senders);
    }

    /// <summary>A region this node sends into gets a sender once its view is known, fed by the region's feed.</summary>
    private void EnsureSender(RegionFeed feed)
    {
        if (feed.Sender is null && feed.Groups.Count > 0 && _gms.Node is not null && _gms.FindRegion(new RegionId(feed.Region)) is { } regionView)
        {
            feed.Sender = _regions.Sender(regionView);
            feed.Sender.Source = feed;
            feed.Sender.PeersWaiting = () => PeersWaiting(feed);
        }
    }

    /// <summary>Whether a sender of this node into another region of a group this feed carries is waiting for data while
    /// this one is held back: that region's sender has taken every message its window allowed and is not held itself,
    /// so the group's messages wait for this region alone (<see cref="RegionSender.PeersWaiting"/>). Only asked while
    /// this region's sender is held back.</summary>
    private bool PeersWaiting(RegionFeed feed)
    {
        foreach (var group in feed.Groups)
        {
            if (group.View is not { } view)
            {
                continue;
            }

            foreach (var rr in view.Regions)
            {
                if (rr.Region.Value != feed.Region && _feeds.GetValueOrDefault(rr.Region.Value)?.Sender is { } other && !other.IsHeld)
                {
                    return true;
                }
            }
        }

        return false;
    }

    /// <summary>
    /// The packet source of one region's sender: the groups mapped to the region, served round robin. A packet starts
    /// with the group whose message did not fit in the last one, or with the next group when that group filled the whole
    /// last packet, so no group starves the others, and a packet never scans the groups the last one just emptied: it
    /// started one group further on each time, and at 1,024 groups published to in turn the sender looked through about
    /// 16 empty groups a packet, each a call into its source (docs/benchmarks.md, "Groups: memory and CPU per group"). It writes
    /// group records straight into the payload span, which is the transport's send slot (§2.2 packing: small messages
    /// bound for the same region share one packet).
    /// </summary>
    internal sealed class RegionFeed(GroupLayer layer, uint region) : IRegionPacketSource
    {
        private int _start;

        public uint Region => region;

        public List<NodeGroup> Groups { get; } = new();

        public RegionSender? Sender { get; set; }

        public int WritePayload(Span<byte> payload)
        {
            int written = 0;
            int count = Groups.Count;
            if (count == 0)
            {
                return 0;
            }

            int first = _start % count;
            for (int i = 0; i < count; i++)
            {
                int index = (first + i) % count;
                var group = Groups[index];
                if (group.RegionCount == 0)
                {
                    continue; // no view yet
                }

                while (true)
                {
                    if (group.Outbox.IsEmptyFor(region))
                    {
                        // The group's one region, with nothing held: the message goes from the application straight
                        // into the packet, not through the outbox's ring. One that does not fit goes into the ring, and
                        // the ring's path below ends the packet and starts the next one with it.
                        if (!group.TryTake(layer.MaxMessageBytes, layer.Drops, out var taken, out ulong number, out bool published))
                        {
                            break;
                        }

                        if (written + GroupWire.HeaderSize + taken.Length > payload.Length)
                        {
                            group.Outbox.Add(taken, number, published);
                            continue;
                        }

                        written += GroupWire.Write(payload[written..], group.Id, number, taken.Span);
                        if (published)
                        {
                            group.Owner.OnSent(taken);
                        }

                        continue;
                    }

                    if (!group.Outbox.TryPeek(region, out var message, out ulong sequence))
                    {
                        if (!group.TryTakeNext(layer.MaxMessageBytes, layer.Drops))
                        {
                            break;
                        }

                        if (group.RegionCount > 1)
                        {
                            layer.SignalRegions(group); // the group's other regions have a new message too
                        }

                        continue;
                    }

                    int length = GroupWire.HeaderSize + message.Length;
                    if (written + length > payload.Length)
                    {
                        // The packet is full. The next one starts with this group's message, unless this group filled
                        // all of it: then with the group after it, so no group takes two packets while others wait.
                        _start = i == 0 ? index + 1 : index;
                        return written;
                    }

                    written += GroupWire.Write(payload[written..], group.Id, sequence, message.Span);
                    group.Outbox.Advance(region);
                }
            }

            _start = first + 1; // every group had its turn and the packet has room: the next one starts one further on
            return written;
        }
    }

    private readonly List<uint> _forgetScratch = new();

    /// <summary>Per-sender delivery progress forgotten because its sender departed (<see cref="ForgetDepartedSenders"/>).</summary>
    public long SendersForgotten { get; private set; }

    /// <summary>Per-sender delivery progress entries kept now, over every group this node is in.</summary>
    public int SendersTracked => _groupsByName.Values.Sum(g => g.SendersTracked);

    /// <summary>After each look of the region member for departed streams: every group forgets the delivery progress of
    /// senders the member no longer knows (not this node, not in the region view, not admitted to send into the region,
    /// no stream left: its stream was retired, or the member that had it was replaced). Their packets are dropped before
    /// they reach this layer, so nothing of theirs can be delivered twice. A sender admitted again later (it joined a
    /// group mapped here again, under the same id) starts a new region stream, anchored where its view starts, as any
    /// sender heard mid-stream does; its group numbering goes on from where it was (docs/qsm.md, "Departed senders").</summary>
    private void ForgetDepartedSenders(RegionMember member)
    {
        foreach (var group in _groupsByName.Values)
        {
            SendersForgotten += group.Forget(member.Knows, _forgetScratch);
        }
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
    internal int MaxRecordsPerPacket => Math.Max(1, _regions.MaxPayload / GroupWire.HeaderSize);

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

        uint lastGroup = 0;
        NodeGroup? lastTarget = null;
        bool looked = false;
        bool fifo = _regions.Options.FifoDelivery;
        while (!packet.IsEmpty)
        {
            if (!GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out var payload, out int consumed))
            {
                Drops.Increment(DropReason.Malformed);
                return true;
            }

            packet = packet[consumed..];
            if (!looked || group != lastGroup)
            {
                // A packet's records mostly come from one group (the feed fills a packet from one group before the next).
                looked = true;
                lastGroup = group;
                lastTarget = _groupsById.GetValueOrDefault(group);
            }

            if (lastTarget is not { } target)
            {
                continue; // a group this node is not in (the region carries every group mapped to it)
            }

            if (!target.Advance(sender, groupSeq, fifo))
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

    /// <summary>Group messages passed over because their sender told this node to skip ahead (it held the sender back
    /// too long: <see cref="SlowReceiverPolicy.SkipAhead"/>).</summary>
    public long Skipped { get; private set; }

    /// <summary>A region packet this node skips: each record for a group this node is in counts as delivered for
    /// duplicate suppression (a repair of it later is not delivered) and its owner hears of the loss.</summary>
    private void OnRegionSkip(uint sender, ulong seq, ReadOnlySpan<byte> packet)
    {
        while (!packet.IsEmpty && GroupWire.TryRead(packet, out uint group, out ulong groupSeq, out _, out int consumed))
        {
            packet = packet[consumed..];
            if (_groupsById.TryGetValue(group, out var target) && target.Advance(sender, groupSeq, _regions.Options.FifoDelivery))
            {
                Skipped++;
                target.Owner.OnSkipped(sender, groupSeq);
            }
        }
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
