using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Simulation;

/// <summary>
/// A simulated switched network on virtual time (docs/simulation.md). The same protocol objects that run on a real
/// core run here, many nodes in one process: each <see cref="SimNode"/> is an <see cref="IAlarmScheduler"/> and
/// <see cref="Core.Downcalls.ICoreDispatcher"/>, and its endpoints are <see cref="IDatagramTransport"/>s. Everything is
/// driven by one event queue in (time, insertion) order and one seeded random generator, so a seed replays the same
/// trace. Single-threaded: call it from one thread.
/// </summary>
public sealed class SimNetwork
{
    private readonly AlarmQueue _events = new();
    private readonly List<SimNode> _nodes = new();
    private readonly Dictionary<uint, SimNode> _nodesByIp = new();
    private readonly Dictionary<NetAddress, List<SimTransport>> _groups = new();
    private readonly Stack<Alarm> _alarmPool = new();
    private readonly Stack<Alarm> _hopPool = new();
    private readonly Stack<SimPacket> _packetPool = new();
    private readonly Action<Alarm> _onDelivery;
    private readonly Action<Alarm> _onPosted;
    private readonly Action<Alarm> _onSwitch;
    private readonly LinkOptions _defaultLink;
    private ulong _trace = 14695981039346656037UL;

    public SimNetwork(int seed, LinkOptions? defaultLink = null)
    {
        Seed = seed;
        Random = new Random(seed);
        _defaultLink = defaultLink ?? new LinkOptions();
        _defaultLink.Validate();
        _onDelivery = OnDelivery;
        _onPosted = OnPosted;
        _onSwitch = OnSwitch;
    }

    public int Seed { get; }

    public TimeSpan Now { get; private set; }

    public IReadOnlyList<SimNode> Nodes => _nodes;

    /// <summary>Datagrams handed to a handler.</summary>
    public long Deliveries { get; private set; }

    public DropCounters Drops { get; } = new();

    /// <summary>A running hash of every delivery (time, from, to, length, first bytes): equal seeds give equal hashes.</summary>
    public ulong TraceHash => _trace;

    /// <summary>True while <see cref="RunFor"/> or <see cref="RunUntil"/> is processing events.</summary>
    public bool IsRunning { get; private set; }

    internal Random Random { get; }

    /// <summary>Adds a node with the default access link. Node k gets the virtual address 127.1.(k/256).(k%256).</summary>
    public SimNode AddNode()
    {
        int index = _nodes.Count;
        if (index >= 65536)
        {
            throw new InvalidOperationException("The simulated network holds at most 65,536 nodes.");
        }

        uint ip = 0x7F010000u | (uint)index;
        var node = new SimNode(this, index, ip, _defaultLink, Random.Next());
        _nodes.Add(node);
        _nodesByIp.Add(ip, node);
        return node;
    }

    /// <summary>Sets a node's access link (both directions).</summary>
    public void SetLink(SimNode node, LinkOptions options)
    {
        CheckOwned(node);
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        node.Uplink.Options = options;
        node.Downlink.Options = options;
    }

    /// <summary>Cuts every path between the two sides (both ways) until <see cref="Heal"/>.</summary>
    public void Partition(IEnumerable<SimNode> sideA, IEnumerable<SimNode> sideB)
    {
        ArgumentNullException.ThrowIfNull(sideA);
        ArgumentNullException.ThrowIfNull(sideB);
        foreach (var n in sideA)
        {
            CheckOwned(n).PartitionSide = 1;
        }

        foreach (var n in sideB)
        {
            CheckOwned(n).PartitionSide = 2;
        }
    }

    public void Heal()
    {
        foreach (var n in _nodes)
        {
            n.PartitionSide = 0;
        }
    }

    private SimNode CheckOwned(SimNode node)
    {
        ArgumentNullException.ThrowIfNull(node);
        if (node.Index >= _nodes.Count || _nodes[node.Index] != node)
        {
            throw new ArgumentException($"Node {node.Index} belongs to another simulated network.", nameof(node));
        }

        return node;
    }

    /// <summary>Processes every event due within <paramref name="duration"/> of virtual time.</summary>
    public void RunFor(TimeSpan duration)
    {
        var end = Now + duration;
        bool wasRunning = IsRunning;
        IsRunning = true;
        try
        {
            while (_events.TryPeekDeadline(out var next) && next <= end)
            {
                var alarm = _events.PopMin()!;
                Now = alarm.Deadline;
                alarm.Fire();
            }
        }
        finally
        {
            IsRunning = wasRunning;
        }

        Now = end;
    }

    /// <summary>Runs until <paramref name="condition"/> holds (checked every millisecond of virtual time) or
    /// <paramref name="limit"/> passes. Returns whether the condition held.</summary>
    public bool RunUntil(Func<bool> condition, TimeSpan limit)
    {
        ArgumentNullException.ThrowIfNull(condition);
        var end = Now + limit;
        while (!condition())
        {
            if (Now >= end)
            {
                return false;
            }

            RunFor(TimeSpan.FromMilliseconds(1));
        }

        return true;
    }

    internal void ScheduleEvent(Alarm alarm, TimeSpan deadline) => _events.Schedule(alarm, deadline < Now ? Now : deadline);

    internal bool CancelEvent(Alarm alarm) => _events.Cancel(alarm);

    internal void Post(SimNode node, Action<object?> action, object? state)
    {
        var alarm = RentAlarm(_onPosted);
        alarm.State = new PostedWork(node, node.Incarnation, action, state);
        ScheduleEvent(alarm, Now);
    }

    internal SimPacket RentPacket(ReadOnlySpan<byte> bytes, NetAddress from)
    {
        var packet = _packetPool.Count > 0 ? _packetPool.Pop() : new SimPacket();
        if (packet.Buffer.Length < bytes.Length)
        {
            packet.Buffer = new byte[bytes.Length];
        }

        bytes.CopyTo(packet.Buffer);
        packet.Length = bytes.Length;
        packet.From = from;
        packet.References = 1; // the sender's reference, released after fan-out
        return packet;
    }

    internal void Release(SimPacket packet)
    {
        if (--packet.References == 0)
        {
            _packetPool.Push(packet);
        }
    }

    /// <summary>Sends one datagram from <paramref name="source"/>: reserves the sender's uplink now, and when the
    /// datagram reaches the switch (an event at that virtual time) each receiver's downlink, applying partitions, loss,
    /// reordering and duplication per receiver. Downlinks are reserved in the order datagrams reach the switch, so a
    /// sender whose uplink is backlogged does not book a receiver's downlink ahead of datagrams that arrive earlier from
    /// other senders.</summary>
    internal void Send(SimTransport source, NetAddress to, ReadOnlySpan<byte> datagram) => Send(source, to, datagram, source.LocalAddress);

    /// <summary>Sends <paramref name="datagram"/> through <paramref name="via"/>'s node and links, but with
    /// <paramref name="claimedSource"/> as its source address, as a host that forges source addresses would (tests of
    /// hostile networks). The receiver sees the claimed source; its answers go there, not to <paramref name="via"/>.</summary>
    public void SendSpoofed(IDatagramTransport via, NetAddress claimedSource, NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (via is not SimTransport source)
        {
            throw new ArgumentException("The sending endpoint must be an endpoint of a simulated network.", nameof(via));
        }

        CheckOwned(source.Node);
        Send(source, to, datagram, claimedSource);
    }

    private void Send(SimTransport source, NetAddress to, ReadOnlySpan<byte> datagram, NetAddress from)
    {
        var node = source.Node;
        var upDone = node.Uplink.Reserve(Now, datagram.Length);
        if (upDone is null)
        {
            Drops.Increment(DropReason.LinkQueueFull);
            return;
        }

        if (node.Uplink.Loses(Random))
        {
            Drops.Increment(DropReason.LinkLoss);
            return;
        }

        var packet = RentPacket(datagram, from);
        var alarm = _hopPool.Count > 0 ? _hopPool.Pop() : new Alarm(_onSwitch) { State = new SimHop() };
        var hop = (SimHop)alarm.State!;
        hop.Packet = packet; // the sender's reference moves to the hop
        hop.Source = source;
        hop.To = to;
        ScheduleEvent(alarm, upDone.Value + node.Uplink.Options.Latency);
    }

    /// <summary>A datagram reaches the switch: on to the receivers' downlinks.</summary>
    private void OnSwitch(Alarm alarm)
    {
        var hop = (SimHop)alarm.State!;
        var packet = hop.Packet!;
        var source = hop.Source!;
        var to = hop.To;
        hop.Packet = null;
        hop.Source = null;
        _hopPool.Push(alarm);
        var node = source.Node;
        if (to.IsMulticast)
        {
            if (_groups.TryGetValue(to, out var members))
            {
                foreach (var member in members)
                {
                    if (member != source)
                    {
                        Forward(packet, node, member, Now);
                    }
                }
            }
        }
        else if (_nodesByIp.TryGetValue(to.Ip, out var target) && target.FindTransport(to.Port) is { } transport)
        {
            Forward(packet, node, transport, Now);
        }
        else
        {
            Drops.Increment(DropReason.NoHandler);
        }

        Release(packet);
    }

    private void Forward(SimPacket packet, SimNode from, SimTransport target, TimeSpan atSwitch)
    {
        var to = target.Node;
        if (from.PartitionSide != 0 && to.PartitionSide != 0 && from.PartitionSide != to.PartitionSide)
        {
            Drops.Increment(DropReason.Partitioned);
            return;
        }

        var down = to.Downlink;
        var downDone = down.Reserve(atSwitch, packet.Length);
        if (downDone is null)
        {
            Drops.Increment(DropReason.LinkQueueFull);
            return;
        }

        if (down.Loses(Random))
        {
            Drops.Increment(DropReason.LinkLoss);
            return;
        }

        var arrival = downDone.Value + down.Options.Latency;
        var options = down.Options;
        if (options.ReorderRate > 0 && Random.NextDouble() < options.ReorderRate)
        {
            arrival += options.ReorderDelay;
        }

        ScheduleDelivery(packet, target, arrival);
        if (options.DuplicateRate > 0 && Random.NextDouble() < options.DuplicateRate)
        {
            ScheduleDelivery(packet, target, arrival + TimeSpan.FromTicks(1));
        }
    }

    private void ScheduleDelivery(SimPacket packet, SimTransport target, TimeSpan arrival)
    {
        packet.References++;
        var alarm = RentAlarm(_onDelivery);
        var delivery = alarm.State as SimDelivery ?? new SimDelivery();
        delivery.Packet = packet;
        delivery.Target = target;
        delivery.TargetIncarnation = target.Node.Incarnation;
        delivery.ViaCpu = false;
        alarm.State = delivery;
        ScheduleEvent(alarm, arrival);
    }

    private void OnDelivery(Alarm alarm)
    {
        var delivery = (SimDelivery)alarm.State!;
        var packet = delivery.Packet!;
        var target = delivery.Target!;
        var node = target.Node;
        if (!node.IsUp || node.Incarnation != delivery.TargetIncarnation || target.IsClosed)
        {
            Drops.Increment(DropReason.NodeDown);
            Finish(alarm, delivery);
            return;
        }

        // A stalled core (BusyCore.Stall) reads nothing until the stall ends; then what waited goes through the
        // receiving CPU below, in arrival order.
        if (node.StalledUntil > Now)
        {
            delivery.ViaCpu = false;
            ScheduleEvent(alarm, node.StalledUntil);
            return;
        }

        // The receiving CPU: each datagram costs ProcessingCostPerPacket; a full receive queue drops.
        if (!delivery.ViaCpu && node.ProcessingCostPerPacket > TimeSpan.Zero)
        {
            var start = node.CpuBusyUntil > Now ? node.CpuBusyUntil : Now;
            if ((start - Now).Ticks / node.ProcessingCostPerPacket.Ticks >= node.ReceiveQueueLimit)
            {
                Drops.Increment(DropReason.ReceiveBufferFull);
                node.ReceiveQueueDrops++;
                Finish(alarm, delivery);
                return;
            }

            node.CpuBusyUntil = start + node.ProcessingCostPerPacket;
            node.ProcessedDatagrams++;
            node.ProcessedByType[packet.Length > 3 ? packet.Buffer[3] : 0]++;
            delivery.ViaCpu = true;
            ScheduleEvent(alarm, node.CpuBusyUntil);
            return;
        }

        Deliveries++;
        Mix((ulong)Now.Ticks);
        Mix(((ulong)packet.From.Ip << 16) | packet.From.Port);
        Mix(((ulong)target.LocalAddress.Ip << 16) | target.LocalAddress.Port);
        Mix((ulong)packet.Length);
        if (packet.Length >= 8)
        {
            Mix(BitConverter.ToUInt64(packet.Buffer, 0));
        }

        target.Deliver(packet.From, packet.Span);
        Finish(alarm, delivery);
    }

    private void Finish(Alarm alarm, SimDelivery delivery)
    {
        Release(delivery.Packet!);
        delivery.Packet = null;
        delivery.Target = null;
        ReturnAlarm(alarm);
    }

    private void OnPosted(Alarm alarm)
    {
        var work = (PostedWork)alarm.State!;
        alarm.State = null;
        ReturnAlarm(alarm);
        if (work.Node.IsUp && work.Node.Incarnation == work.Incarnation)
        {
            work.Action(work.State);
        }
    }

    private void Mix(ulong value)
    {
        _trace ^= value;
        _trace *= 1099511628211UL;
    }

    private Alarm RentAlarm(Action<Alarm> callback)
    {
        // Pooled alarms are keyed by callback: delivery alarms keep their SimDelivery object for reuse.
        if (callback == _onDelivery && _alarmPool.Count > 0)
        {
            return _alarmPool.Pop();
        }

        return new Alarm(callback);
    }

    private void ReturnAlarm(Alarm alarm)
    {
        if (alarm.State is SimDelivery)
        {
            _alarmPool.Push(alarm);
        }
    }

    internal void JoinGroup(NetAddress group, SimTransport transport)
    {
        if (!_groups.TryGetValue(group, out var members))
        {
            _groups[group] = members = new List<SimTransport>();
        }

        if (!members.Contains(transport))
        {
            members.Add(transport);
        }
    }

    internal void LeaveGroup(NetAddress group, SimTransport transport)
    {
        if (_groups.TryGetValue(group, out var members))
        {
            members.Remove(transport);
        }
    }

    private sealed record PostedWork(SimNode Node, int Incarnation, Action<object?> Action, object? State);
}
