using QuickSilver.Core.Io;

namespace QuickSilver;

/// <summary>How a group's messages travel (docs/architecture.md: the recovery layer is chosen per group).</summary>
public enum GroupTransport
{
    /// <summary>A QSM region (datacenter): every member may publish; membership and views from the GMS (docs/qsm.md).
    /// The default.</summary>
    Qsm,

    /// <summary>AER/NCA (wide area): one source multicasts, repair servers close to the receivers repair losses, NCA
    /// paces the source; the session, addresses and topology come from <see cref="AerGroupOptions"/> (docs/aer.md,
    /// "Per group in QuickSilverNode").</summary>
    Aer,
}

/// <summary>Options of one group, given to <see cref="QuickSilverNode.JoinGroupAsync(string, GroupOptions, CancellationToken)"/>.
/// The default is a QSM group, as <see cref="QuickSilverNode.JoinGroupAsync(string, CancellationToken)"/> joins.</summary>
public sealed record GroupOptions
{
    /// <summary>A QSM group: the default.</summary>
    public static GroupOptions Qsm { get; } = new();

    /// <summary><see cref="GroupTransport.Qsm"/> (the default) or <see cref="GroupTransport.Aer"/>.</summary>
    public GroupTransport Transport { get; init; } = GroupTransport.Qsm;

    /// <summary>The AER session this group is (required with <see cref="GroupTransport.Aer"/>, not allowed otherwise).</summary>
    public AerGroupOptions? Aer { get; init; }

    /// <summary>An AER group with <paramref name="aer"/>.</summary>
    public static GroupOptions ForAer(AerGroupOptions aer) => new() { Transport = GroupTransport.Aer, Aer = aer };

    /// <summary>Throws <see cref="ArgumentException"/> naming the first invalid option.</summary>
    public void Validate()
    {
        switch (Transport)
        {
            case GroupTransport.Qsm when Aer is not null:
                throw new ArgumentException("GroupOptions.Aer is given but GroupOptions.Transport is Qsm; set Transport = Aer (or leave Aer null).", nameof(Aer));
            case GroupTransport.Qsm:
                return;
            case GroupTransport.Aer when Aer is null:
                throw new ArgumentException("GroupOptions.Transport is Aer but GroupOptions.Aer is null: an AER group needs its session, multicast group and source.", nameof(Aer));
            case GroupTransport.Aer:
                Aer!.Validate();
                return;
            default:
                throw new ArgumentOutOfRangeException(nameof(Transport), Transport, $"GroupOptions.Transport must be Qsm or Aer, got {Transport}.");
        }
    }
}

/// <summary>
/// One AER session as a group: where its data goes, who sends it, and (on the source) which repair servers and receivers
/// it subcasts repairs to. The topology comes from configuration, as for `qs aer-send` (docs/aer.md, "Per group in
/// QuickSilverNode"): every member gives the same <see cref="Session"/>, <see cref="Group"/> and <see cref="Source"/>;
/// the node whose address is <see cref="Source"/> is the group's only publisher, every other member a receiver. Repair
/// servers run inside nodes (<see cref="QuickSilverNodeOptions.RepairServers"/>) or as `qs repair-server`.
/// </summary>
public sealed record AerGroupOptions
{
    /// <summary>The session number every datagram of the group carries (any u32; distinct per group on a node).</summary>
    public uint Session { get; init; }

    /// <summary>The IPv4 multicast address and port the source sends to (224.0.0.0/4, non-zero port).</summary>
    public NetAddress Group { get; init; }

    /// <summary>The source's unicast address: the <see cref="QuickSilverNode.Address"/> of the one node that publishes.</summary>
    public NetAddress Source { get; init; }

    /// <summary>On the source: where it subcasts repairs (the top repair servers, and receivers under none). Empty (the
    /// default): repairs are re-multicast to the group, as the seed's source does. Receivers ignore it.</summary>
    public IReadOnlyList<NetAddress> Children { get; init; } = [];

    /// <summary>Throws <see cref="ArgumentException"/> naming the first invalid option.</summary>
    public void Validate() => ValidateSession(nameof(AerGroupOptions), Group, Source, Children);

    /// <summary>The checks an AER group and a repair server share; <paramref name="owner"/> names the options record.</summary>
    internal static void ValidateSession(string owner, NetAddress group, NetAddress source, IReadOnlyList<NetAddress>? children)
    {
        if (!group.IsMulticast || group.Port == 0)
        {
            throw new ArgumentException($"{owner}.Group must be an IPv4 multicast address (224.0.0.0/4) with a port, got {group}.", nameof(group));
        }

        if (source.IsMulticast || source.Port == 0 || source.Ip == 0)
        {
            throw new ArgumentException($"{owner}.Source must be the source node's unicast address with its port, got {source}.", nameof(source));
        }

        if (children is null)
        {
            throw new ArgumentNullException(nameof(children), $"{owner}.Children must not be null.");
        }

        foreach (var child in children)
        {
            if (child.IsMulticast || child.Port == 0 || child.Ip == 0)
            {
                throw new ArgumentException($"{owner}.Children must be unicast addresses with ports, got {child}.", nameof(children));
            }
        }
    }
}

/// <summary>A repair server run inside a node for one AER session (<see cref="QuickSilverNodeOptions.RepairServers"/>),
/// as `qs repair-server` runs one in a process of its own: it caches the session's packets, rewrites and subcasts SPMs,
/// and answers or aggregates its children's NAKs (docs/aer.md).</summary>
public sealed record AerRepairServerOptions
{
    /// <summary>The session it serves (the group's <see cref="AerGroupOptions.Session"/>).</summary>
    public uint Session { get; init; }

    /// <summary>The session's multicast address (<see cref="AerGroupOptions.Group"/>).</summary>
    public NetAddress Group { get; init; }

    /// <summary>The session's source (<see cref="AerGroupOptions.Source"/>).</summary>
    public NetAddress Source { get; init; }

    /// <summary>The receivers and lower repair servers it serves (their node addresses); at least one.</summary>
    public IReadOnlyList<NetAddress> Children { get; init; } = [];

    /// <summary>Throws <see cref="ArgumentException"/> naming the first invalid option.</summary>
    public void Validate()
    {
        AerGroupOptions.ValidateSession(nameof(AerRepairServerOptions), Group, Source, Children);
        if (Children.Count == 0)
        {
            throw new ArgumentException("AerRepairServerOptions.Children is empty: a repair server serves at least one receiver or repair server.", nameof(Children));
        }
    }
}
