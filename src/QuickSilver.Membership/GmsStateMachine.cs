using MessagePack;
using QuickSilver.Core.Io;

namespace QuickSilver.Membership;

/// <summary>A registered node: its id, where it listens, and the incarnation (process start) it registered with.</summary>
internal sealed record Registration(NodeId Node, NetAddress Address, ulong Incarnation);

/// <summary>What applying one <see cref="GmsCommand"/> did: the membership change, the registrations it made (or
/// confirmed: a repeated one is listed again), the nodes it removed, and the leader take-overs it contained.</summary>
internal sealed record GmsApplied(MembershipChange Change, IReadOnlyList<Registration> Registered, IReadOnlyList<Registration> Removed, IReadOnlyList<GmsOp> Starts);

/// <summary>
/// The GMS's replicated state machine: the epoch, the node registry (address, incarnation) and the
/// <see cref="MembershipState"/> (groups, regions, views, the multicast address pool). <see cref="Apply"/> is
/// deterministic: every replica that applies the same commands in the same order, from the same snapshot, ends with
/// the same node ids, view numbers and multicast addresses (nothing here reads a clock, a random source or the
/// iteration order of a hash set of objects). Limits are not checked here but by the leader before it proposes a
/// command. Single-threaded and I/O-free.
/// </summary>
internal sealed class GmsStateMachine
{
    private static readonly MessagePackSerializerOptions Options =
        MessagePackSerializerOptions.Standard.WithResolver(MessagePack.Resolvers.StandardResolverAllowPrivate.Instance)
            .WithSecurity(MessagePackSecurity.UntrustedData);

    private readonly Dictionary<NetAddress, Registration> _byAddress = new();
    private readonly Dictionary<NodeId, Registration> _byNode = new();
    private readonly Func<MembershipState> _newState;

    /// <param name="newState">Makes an empty membership state (the pool and multicast settings of this GMS).</param>
    public GmsStateMachine(Func<MembershipState> newState)
    {
        _newState = newState ?? throw new ArgumentNullException(nameof(newState));
        State = newState();
    }

    public MembershipState State { get; private set; }

    /// <summary>The GMS epoch, fixed by the first take-over ever applied; 0 before it.</summary>
    public ulong Epoch { get; private set; }

    /// <summary>Commands applied since the beginning (snapshots included).</summary>
    public long CommandsApplied { get; private set; }

    public IReadOnlyCollection<Registration> Registrations => _byNode.Values;

    public Registration? RegistrationAt(NetAddress address) => _byAddress.GetValueOrDefault(address);

    public Registration? RegistrationOf(NodeId node) => _byNode.GetValueOrDefault(node);

    public GmsApplied Apply(GmsCommand command)
    {
        ArgumentNullException.ThrowIfNull(command);
        var registered = new List<Registration>();
        var removed = new List<Registration>();
        var starts = new List<GmsOp>();
        var requests = new List<MembershipRequest>();
        foreach (var op in command.Ops ?? [])
        {
            switch (op?.Kind)
            {
                case GmsOpKind.Start:
                    if (Epoch == 0 && op.Number != 0)
                    {
                        Epoch = op.Number;
                    }

                    starts.Add(op);
                    break;
                case GmsOpKind.Register:
                    var address = new NetAddress(op.Ip, op.Port);
                    if (_byAddress.TryGetValue(address, out var existing))
                    {
                        if (existing.Incarnation == op.Number)
                        {
                            registered.Add(existing);
                            break;
                        }

                        Unregister(existing);
                        removed.Add(existing);
                        requests.Add(new NodeDownRequest(existing.Node));
                    }

                    var registration = new Registration(State.RegisterNode(address, op.Text), address, op.Number);
                    _byAddress.Add(address, registration);
                    _byNode.Add(registration.Node, registration);
                    registered.Add(registration);
                    break;
                case GmsOpKind.Join when !string.IsNullOrEmpty(op.Text) && _byNode.ContainsKey(new NodeId(op.Node)):
                    requests.Add(new JoinRequest(new NodeId(op.Node), op.Text));
                    break;
                case GmsOpKind.Leave when !string.IsNullOrEmpty(op.Text) && _byNode.ContainsKey(new NodeId(op.Node)):
                    requests.Add(new LeaveRequest(new NodeId(op.Node), op.Text));
                    break;
                case GmsOpKind.Rekey when op.Number is > 0 and <= uint.MaxValue && _byNode.ContainsKey(new NodeId(op.Node)):
                    requests.Add(new RekeyRequest(new NodeId(op.Node), new RegionId((uint)op.Number)));
                    break;
                case GmsOpKind.RegionFloor when op.Number is > 0 and <= MembershipState.MaxRegionFloor:
                    State.RaiseNextRegion((uint)op.Number);
                    break;
                case GmsOpKind.Down when _byNode.TryGetValue(new NodeId(op.Node), out var down):
                    Unregister(down);
                    removed.Add(down);
                    requests.Add(new NodeDownRequest(down.Node));
                    break;
                default:
                    break; // an op naming a node that is gone (or already removed in this batch) changes nothing
            }
        }

        CommandsApplied++;
        // A seed of the wrong length is ignored (no keys), alike on every replica.
        var seed = command.KeySeed is { Length: MembershipState.KeySeedBytes } keySeed ? keySeed : null;
        return new GmsApplied(State.Apply(requests, seed), registered, removed, starts);
    }

    /// <summary>The whole state, for a snapshot: equal states give equal bytes.</summary>
    public byte[] ExportSnapshot() => MessagePackSerializer.Serialize(new GmsStateSnapshot
    {
        Epoch = Epoch,
        CommandsApplied = CommandsApplied,
        Incarnations = [.. _byNode.Values.OrderBy(r => r.Node.Value).SelectMany(r => new[] { r.Node.Value, r.Incarnation })],
        Membership = State.Export(),
    }, Options);

    /// <summary>Replaces the whole state with a snapshot's. Throws <see cref="InvalidDataException"/> when it is
    /// malformed or inconsistent (the state is then left empty).</summary>
    public void ImportSnapshot(ReadOnlyMemory<byte> bytes)
    {
        GmsStateSnapshot snapshot;
        try
        {
            snapshot = MessagePackSerializer.Deserialize<GmsStateSnapshot>(bytes, Options);
        }
        catch (MessagePackSerializationException e)
        {
            throw new InvalidDataException("The GMS snapshot is malformed.", e);
        }

        if (snapshot?.Membership is null || snapshot.Version != GmsCommand.CurrentVersion || snapshot.Incarnations is null || snapshot.Incarnations.Length % 2 != 0)
        {
            throw new InvalidDataException("The GMS snapshot is malformed or of an unknown version.");
        }

        _byAddress.Clear();
        _byNode.Clear();
        State = _newState();
        Epoch = 0;
        State.Import(snapshot.Membership);
        for (int i = 0; i < snapshot.Incarnations.Length; i += 2)
        {
            var node = new NodeId((uint)snapshot.Incarnations[i]);
            if (!State.IsAlive(node))
            {
                throw new InvalidDataException($"The GMS snapshot has an incarnation for unknown node {node}.");
            }

            var registration = new Registration(node, State.AddressOf(node), snapshot.Incarnations[i + 1]);
            _byAddress.Add(registration.Address, registration);
            _byNode.Add(node, registration);
        }

        if (_byNode.Count != State.NodeCount)
        {
            throw new InvalidDataException("The GMS snapshot's registry and membership disagree.");
        }

        Epoch = snapshot.Epoch;
        CommandsApplied = snapshot.CommandsApplied;
    }

    public static byte[] Encode(GmsCommand command) => MessagePackSerializer.Serialize(command, Options);

    /// <summary>Decodes a log entry; null when it is malformed or of an unknown version.</summary>
    public static GmsCommand? TryDecode(ReadOnlyMemory<byte> bytes)
    {
        try
        {
            var command = MessagePackSerializer.Deserialize<GmsCommand>(bytes, Options);
            return command is { Version: GmsCommand.CurrentVersion, Ops: not null } ? command : null;
        }
        catch (MessagePackSerializationException)
        {
            return null;
        }
    }

    private void Unregister(Registration registration)
    {
        _byAddress.Remove(registration.Address);
        _byNode.Remove(registration.Node);
    }
}
