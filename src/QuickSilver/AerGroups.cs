using QuickSilver.Aer;
using QuickSilver.Core.Stack;
using QuickSilver.Qsm.Group;

namespace QuickSilver;

/// <summary>
/// A node's AER groups and in-node repair servers, by name, on the core thread: the one place that makes them, for the
/// real node and the whole-stack simulation alike. A name is a QSM group or an AER group, never both; a node has one
/// role per AER session.
/// </summary>
internal sealed class AerGroups(ProtocolStack stack)
{
    private readonly Dictionary<string, AerGroupSession> _byName = new(StringComparer.Ordinal);

    public AerLayer Layer { get; } = stack.Get<AerLayer>();

    private GroupLayer Qsm { get; } = stack.Get<GroupLayer>();

    /// <summary>Called on the core thread with a copy of the layer's roles whenever they change (the node's
    /// <see cref="AerMeter"/> reads them from other threads).</summary>
    public Action<AerRole[]>? RolesChanged { get; set; }

    /// <summary>The in-node repair servers.</summary>
    public List<RepairServer> RepairServers { get; } = new();

    public bool IsJoined(string name) => _byName.ContainsKey(name);

    public AerGroupSession? Find(string name) => _byName.GetValueOrDefault(name);

    /// <summary>Joins AER group <paramref name="name"/>: this node becomes its source or a receiver.</summary>
    public AerGroupSession Join(string name, AerGroupOptions options, IGroupOwner owner)
    {
        if (_byName.ContainsKey(name) || Qsm.IsJoined(name))
        {
            throw new InvalidOperationException($"This node has already joined group '{name}'.");
        }

        CheckSessionFree(options.Session);
        var session = AerGroupSession.Start(Layer, name, options, owner, stack.Transport.LocalAddress, stack.Transport.MaxDatagramSize);
        _byName.Add(name, session);
        RolesChanged?.Invoke([.. Layer.Roles]);
        return session;
    }

    /// <summary>Leaves AER group <paramref name="name"/>; false when this node is not in it.</summary>
    public bool Leave(string name)
    {
        if (!_byName.Remove(name, out var session))
        {
            return false;
        }

        session.Stop();
        RolesChanged?.Invoke([.. Layer.Roles]);
        return true;
    }

    /// <summary>Starts a repair server for each of <paramref name="servers"/> (<see cref="QuickSilverNodeOptions.RepairServers"/>).</summary>
    public void AddRepairServers(IEnumerable<AerRepairServerOptions> servers)
    {
        foreach (var server in servers)
        {
            CheckSessionFree(server.Session);
            RepairServers.Add(Layer.AddRepairServer(server.Session, server.Group, server.Source, server.Children));
        }

        RolesChanged?.Invoke([.. Layer.Roles]);
    }

    private void CheckSessionFree(uint session)
    {
        if (Layer.Roles.Any(r => r.Session == session))
        {
            throw new InvalidOperationException(
                $"This node already has a role in AER session {session} (another AER group, or a repair server from QuickSilverNodeOptions.RepairServers): a node takes one role per session.");
        }
    }
}
