using QuickSilver.Core.Alarms;
using QuickSilver.Core.Downcalls;
using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Simulation;

/// <summary>
/// One simulated node: the <see cref="IAlarmScheduler"/> and <see cref="ICoreDispatcher"/> its protocol objects use,
/// its access link, its receive CPU, and its endpoints. A crash cancels its alarms, closes its endpoints and drops what
/// is in flight to it; a restart brings it back empty (the test re-creates its protocol objects).
/// </summary>
public sealed class SimNode : IAlarmScheduler, ICoreDispatcher
{
    private readonly SimNetwork _network;
    // Every alarm this node's protocols ever scheduled (they reuse their alarms, so this stays small); a crash cancels them.
    private readonly HashSet<Alarm> _alarms = new();
    private readonly Dictionary<ushort, SimTransport> _transports = new();
    private readonly int _seed;
    private readonly Alarm _pump;
    private readonly List<SimTransport> _feeding = new();
    private int _pumpCursor;

    internal SimNode(SimNetwork network, int index, uint ip, LinkOptions link, int seed)
    {
        _network = network;
        Index = index;
        Address = new NetAddress(ip, 0);
        Uplink = new SimLink(link);
        Downlink = new SimLink(link);
        _seed = seed;
        Random = new Random(seed);
        _pump = new Alarm(_ => Pump());
    }

    public int Index { get; }

    /// <summary>The node's IP address (port 0); endpoints add their port.</summary>
    public NetAddress Address { get; }

    public bool IsUp { get; private set; } = true;

    /// <summary>Bumped by each restart; in-flight work for an older incarnation is dropped.</summary>
    public int Incarnation { get; private set; }

    /// <summary>Receive CPU cost of each datagram: datagrams queue while the node is busy.</summary>
    public TimeSpan ProcessingCostPerPacket { get; set; }

    /// <summary>Datagrams that may wait for the receive CPU before new ones are dropped (ReceiveBufferFull).</summary>
    public int ReceiveQueueLimit { get; set; } = 1000;

    /// <summary>Datagrams this node's full receive queue dropped (<c>DropReason.ReceiveBufferFull</c>, per node).</summary>
    public long ReceiveQueueDrops { get; internal set; }

    /// <summary>Datagrams this node's receive CPU took (each costs <see cref="ProcessingCostPerPacket"/>): times the
    /// cost, over a span of virtual time, the share of that span its CPU was busy.</summary>
    public long ProcessedDatagrams { get; internal set; }

    /// <summary><see cref="ProcessedDatagrams"/> by the common header's packet type (byte 3, <c>PacketHeader</c>;
    /// datagrams shorter than that at 0): what a busy node's CPU went to.</summary>
    public long[] ProcessedByType { get; } = new long[256];

    /// <summary>A deterministic random generator for this node's protocols, derived from the network seed.</summary>
    public Random Random { get; private set; }

    public TimeSpan Now => _network.Now;

    public bool IsCoreThread => _network.IsRunning;

    internal SimLink Uplink { get; }

    internal SimLink Downlink { get; }

    internal TimeSpan CpuBusyUntil { get; set; }

    /// <summary>Until when the node's core is held up (<see cref="BusyCore.Stall"/>): datagrams wait, unread.</summary>
    internal TimeSpan StalledUntil { get; set; }

    internal int PartitionSide { get; set; }

    public void Schedule(Alarm alarm, TimeSpan deadline)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        if (!IsUp)
        {
            return;
        }

        _network.ScheduleEvent(alarm, deadline);
        _alarms.Add(alarm);
    }

    public bool Cancel(Alarm alarm)
    {
        ArgumentNullException.ThrowIfNull(alarm);
        _alarms.Remove(alarm);
        return _network.CancelEvent(alarm);
    }

    public bool TryPost(Action<object?> action, object? state)
    {
        ArgumentNullException.ThrowIfNull(action);
        if (!IsUp)
        {
            return false;
        }

        _network.Post(this, action, state);
        return true;
    }

    /// <summary>Opens an endpoint on <paramref name="port"/>.</summary>
    public IDatagramTransport Open(ushort port, int maxDatagramSize = 1472)
    {
        if (!IsUp)
        {
            throw new InvalidOperationException($"Node {Index} is down.");
        }

        if (_transports.ContainsKey(port))
        {
            throw new InvalidOperationException($"Port {port} is already open on node {Index}.");
        }

        var transport = new SimTransport(_network, this, new NetAddress(Address.Ip, port), maxDatagramSize);
        _transports.Add(port, transport);
        return transport;
    }

    public void Crash()
    {
        if (!IsUp)
        {
            return;
        }

        IsUp = false;
        foreach (var alarm in _alarms)
        {
            _network.CancelEvent(alarm);
        }

        _alarms.Clear();
        _network.CancelEvent(_pump);
        foreach (var transport in _transports.Values)
        {
            transport.Close();
        }

        _transports.Clear();
        _feeding.Clear();
    }

    public void Restart()
    {
        if (IsUp)
        {
            return;
        }

        IsUp = true;
        Incarnation++;
        Random = new Random(_seed + Incarnation);
    }

    internal SimTransport? FindTransport(ushort port) => _transports.GetValueOrDefault(port);

    /// <summary>A transport's feeds became active: pull when the uplink has room.</summary>
    internal void WantsToSend(SimTransport transport)
    {
        if (!_feeding.Contains(transport))
        {
            _feeding.Add(transport);
        }

        if (!_pump.IsScheduled)
        {
            _network.ScheduleEvent(_pump, Now);
        }
    }

    /// <summary>Pulls feeds round robin while the uplink has less than two datagrams' worth queued, then waits for it to drain.</summary>
    private void Pump()
    {
        if (!IsUp)
        {
            return;
        }

        while (_feeding.Count > 0)
        {
            var backlog = Uplink.BusyUntil - Now;
            var slack = Uplink.SerializationTime(1500) * 2;
            if (backlog > slack)
            {
                _network.ScheduleEvent(_pump, Uplink.BusyUntil - slack);
                return;
            }

            if (_pumpCursor >= _feeding.Count)
            {
                _pumpCursor = 0;
            }

            var transport = _feeding[_pumpCursor];
            if (!transport.PullOne())
            {
                _feeding.RemoveAt(_pumpCursor);
            }
            else
            {
                _pumpCursor++;
            }
        }
    }
}
