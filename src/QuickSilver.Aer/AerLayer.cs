using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Core.Wire;

namespace QuickSilver.Aer;

/// <summary>
/// The AER/NCA layer of a stack (docs/aer.md): owns packet types 7–13 (reserved for AER in docs/wire-format.md) and hosts, per session (a multicast group sent
/// by one source), this node's role in it: the source (<see cref="AerSender"/>), a repair server
/// (<see cref="RepairServer"/>) or a receiver (<see cref="AerReceiver"/>). It parses the session once and hands the
/// datagram to the role, which parses its own body. Datagrams for no session here, malformed or from a node that may
/// not send them are dropped and counted in <see cref="AerCounters.Drops"/>. Needs nothing below it but the transport.
/// Core thread only.
/// </summary>
public sealed class AerLayer : IProtocolLayer, IPacketHandler
{
    private readonly Dictionary<uint, AerRole> _roles = new();
    private LayerContext? _context;

    /// <param name="random">This node's random source (the simulated node's, for replayable runs).</param>
    public AerLayer(AerOptions? options = null, Random? random = null)
    {
        Options = options ?? new AerOptions();
        Options.Validate();
        Random = random ?? new Random();
    }

    public string Name => "aer";

    public AerOptions Options { get; }

    public AerCounters Counters { get; } = new();

    internal Random Random { get; }

    internal LayerContext Context => _context ?? throw new InvalidOperationException("The AER layer is not attached to a stack yet (build the stack first).");

    internal byte[] Scratch { get; private set; } = [];

    public IReadOnlyCollection<AerRole> Roles => _roles.Values;

    public void Attach(LayerContext context)
    {
        _context = context;
        Scratch = new byte[context.MaxDatagramSize];
        foreach (var type in new[] { AerWire.DataType, AerWire.SpmType, AerWire.NakType, AerWire.CsmType, AerWire.NominateType, AerWire.AckType, AerWire.ProbeType })
        {
            context.RegisterPacketType(type, this);
        }
    }

    /// <summary>Makes this node the source of <paramref name="session"/>: it multicasts what it pulls from
    /// <paramref name="feed"/> to <paramref name="group"/>. With <paramref name="children"/> (the top repair servers and
    /// the receivers under none), repairs are subcast to them; without, re-multicast to the group (§4.1).</summary>
    public AerSender AddSender(uint session, NetAddress group, IAerFeed feed, IReadOnlyList<NetAddress>? children = null)
        => Add(new AerSender(this, session, group, feed, children));

    /// <summary>Makes this node a receiver of <paramref name="session"/> from <paramref name="source"/>; in-order
    /// payloads go to <paramref name="deliver"/> (on the core thread; the span is valid during the call).</summary>
    public AerReceiver AddReceiver(uint session, NetAddress group, NetAddress source, DeliverHandler deliver)
        => Add(new AerReceiver(this, session, group, source, deliver));

    /// <summary>Makes this node a repair server of <paramref name="session"/> for <paramref name="children"/> (receivers
    /// and lower repair servers, from configuration: docs/aer.md "Topology").</summary>
    public RepairServer AddRepairServer(uint session, NetAddress group, NetAddress source, IReadOnlyList<NetAddress> children)
        => Add(new RepairServer(this, session, group, source, children));

    /// <summary>Stops and removes this node's role in <paramref name="session"/> (a receiver says it is leaving).</summary>
    public void Remove(uint session)
    {
        if (_roles.Remove(session, out var role))
        {
            role.Stop();
        }
    }

    private T Add<T>(T role) where T : AerRole
    {
        _ = Context;
        if (!_roles.TryAdd(role.Session, role))
        {
            throw new ArgumentException($"This node already has a role in AER session {role.Session}.", nameof(role));
        }

        role.Start();
        return role;
    }

    public void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        if (!AerWire.TryReadSession(datagram, out uint session))
        {
            Counters.Drops.Increment(DropReason.Truncated);
            return;
        }

        if (!_roles.TryGetValue(session, out var role))
        {
            Counters.Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        role.OnPacket(from, header, datagram);
    }

    internal void Malformed(NetAddress from, PacketType type)
    {
        Counters.Drops.Increment(DropReason.Malformed);
        _context?.Log?.Warn(1000 + (int)type, "AER dropped a malformed datagram from {Peer}", $"{from} (type {(byte)type})");
    }

    internal void Send(NetAddress to, int length)
    {
        if (!Context.Transport.TrySend(to, Scratch.AsSpan(0, length)))
        {
            Counters.Drops.Increment(DropReason.SendQueueFull);
        }
    }

    public void Stop()
    {
        foreach (var role in _roles.Values)
        {
            role.Stop();
        }

        _roles.Clear();
    }

    public string Describe() => $"{string.Join("; ", _roles.Values.Select(r => r.Describe()))}; {Counters}";
}

/// <summary>Receives a session's payloads in order: the sequence number (from 1) and the payload, valid during the call.</summary>
public delegate void DeliverHandler(long seq, ReadOnlySpan<byte> payload);

/// <summary>The application side of an AER source: a pull-model feed of payloads (DESIGN "pull, not push").</summary>
public interface IAerFeed
{
    /// <summary>Writes the next payload into <paramref name="buffer"/> and returns its length, or 0 for "nothing now"
    /// (then call <see cref="AerSender.Signal"/> when there is).</summary>
    int Pull(Span<byte> buffer);
}

/// <summary>A node's part in one AER session: source, repair server or receiver.</summary>
public abstract class AerRole
{
    private protected AerRole(AerLayer layer, uint session, NetAddress group)
    {
        if (!group.IsMulticast)
        {
            throw new ArgumentException($"The AER group address {group} is not a multicast address (224.0.0.0/4).", nameof(group));
        }

        Layer = layer;
        Session = session;
        Group = group;
    }

    public uint Session { get; }

    public NetAddress Group { get; }

    private protected AerLayer Layer { get; }

    private protected AerOptions Options => Layer.Options;

    private protected AerCounters Counters => Layer.Counters;

    private protected Core.Alarms.IAlarmScheduler Scheduler => Layer.Context.Scheduler;

    private protected IDatagramTransport Transport => Layer.Context.Transport;

    private protected NetAddress Local => Layer.Context.LocalAddress;

    private protected TimeSpan Now => Layer.Context.Scheduler.Now;

    /// <summary>Set by the first <see cref="Stop"/>: the role takes no more packets.</summary>
    private protected bool Stopped { get; private set; }

    internal abstract void Start();

    /// <summary>Stops the role once (<see cref="OnStop"/>); later calls do nothing.</summary>
    internal void Stop()
    {
        if (Stopped)
        {
            return;
        }

        Stopped = true;
        OnStop();
    }

    private protected abstract void OnStop();

    /// <summary>A datagram of this session (its session already read); a stopped role ignores it.</summary>
    internal void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram)
    {
        if (!Stopped)
        {
            OnPacket(from, header, datagram, Now);
        }
    }

    private protected abstract void OnPacket(NetAddress from, in PacketHeader header, ReadOnlySpan<byte> datagram, TimeSpan now);

    public abstract string Describe();

    internal void NotAMember() => Counters.Drops.Increment(DropReason.NotAMember);

    internal void NotForThisNode() => Counters.Drops.Increment(DropReason.NotForThisNode);

    internal void SendNak(NetAddress to, long seq, bool downstream)
    {
        int n = AerWire.WriteNak(Layer.Scratch, new AerNak(Session, seq, downstream));
        Layer.Send(to, n);
    }

    internal void SendProbe(NetAddress to, long ticks, bool reply)
    {
        int n = AerWire.WriteProbe(Layer.Scratch, Session, ticks, reply);
        Layer.Send(to, n);
    }

    private protected void SendCsm(NetAddress to, in CongestionStateMessage csm)
    {
        int n = AerWire.WriteCsm(Layer.Scratch, csm);
        Layer.Send(to, n);
        Counters.CsmsSent++;
    }

    private protected static int Micros(TimeSpan t) => (int)Math.Min(int.MaxValue, t.Ticks / 10);
}
