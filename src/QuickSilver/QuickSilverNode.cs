using QuickSilver.Aer;
using QuickSilver.Core;
using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Core.Stack;
using QuickSilver.Membership.Service;
using QuickSilver.Qsm;
using QuickSilver.Qsm.Group;
using QuickSilver.Qsm.Region;

namespace QuickSilver;

/// <summary>What an embedded GMS knows at one moment (<see cref="QuickSilverNode.GetGmsSnapshotAsync"/>). Nodes counts
/// every registered node, this one included.</summary>
public sealed record GmsSnapshot(int Nodes, int Groups, int Regions, IReadOnlyDictionary<string, GmsGroupSnapshot> GroupsByName)
{
    /// <summary>The snapshot of <paramref name="state"/> (read on the GMS's core thread).</summary>
    internal static GmsSnapshot Of(Membership.MembershipState state) => new(state.NodeCount, state.GroupCount, state.RegionCount,
        state.GroupViews.ToDictionary(
            v => v.Name,
            v => new GmsGroupSnapshot(v.ViewNumber, v.Regions.Length, v.Regions.Sum(r => state.RegionViewOf(r.Region).Count)),
            StringComparer.Ordinal));
}

/// <summary>One group as the GMS sees it: its current view number, how many regions of overlap it spans, and its members.</summary>
public sealed record GmsGroupSnapshot(uint ViewNumber, int Regions, int Members);

/// <summary>A node's membership state (<see cref="QuickSilverNode.GetStatusAsync"/>): whether its core runs, whether the
/// GMS has it registered (and under which id), and how many groups the GMS has given it views of.</summary>
public sealed record NodeStatus(bool CoreRunning, bool Registered, uint? Id, int Groups);

/// <summary>
/// A QuickSilver node: a core thread with one UDP endpoint, the GMS client (and, if asked, an embedded GMS), and the
/// protocol stack: QSM regions for datacenter groups and the AER layer for wide-area ones, chosen per group
/// (<see cref="GroupOptions"/>). Join groups with <see cref="JoinGroupAsync(string, GroupOptions, CancellationToken)"/>;
/// dispose to leave the system (the GMS is told at once). Thread-safe; protocol work happens on the node's core thread.
/// </summary>
public sealed class QuickSilverNode : IAsyncDisposable
{
    private readonly QuickSilverCore _core;
    private readonly ProtocolStack _stack;
    private readonly GroupLayer _groups;
    private readonly AerGroups _aer;
    private readonly QuickSilverNodeOptions _options;
    private readonly AerMeter _aerMeter;
    private static readonly Action<object?> PublishedWake = static group => ((QuickSilverGroup)group!).OnPublishedWake();

    private QuickSilverNode(QuickSilverCore core, ProtocolStack stack, AerGroups aer, QuickSilverNodeOptions options, GmsServer? gms, QsmCounters counters, AerMeter aerMeter)
    {
        _aerMeter = aerMeter;
        _core = core;
        _stack = stack;
        _groups = stack.Get<GroupLayer>();
        _aer = aer;
        _options = options;
        EmbeddedGms = gms;
        Counters = counters;
    }

    /// <summary>This node's unicast address.</summary>
    public NetAddress Address => _stack.Transport.LocalAddress;

    /// <summary>The id the GMS assigned.</summary>
    public uint Id { get; private set; }

    /// <summary>The embedded GMS, when this node runs one (core thread only).</summary>
    internal GmsServer? EmbeddedGms { get; }

    internal QuickSilverCore Core => _core;

    /// <summary>How many members this node's current view of <paramref name="group"/> lists (the members of every region
    /// of overlap the group maps to, as the GMS last told this node); 0 before the first view. Works with any GMS:
    /// embedded, standalone or replicated.</summary>
    public Task<int> GetViewMemberCountAsync(QuickSilverGroup group)
    {
        ArgumentNullException.ThrowIfNull(group);
        var client = _stack.Get<MembershipLayer>().Client;
        return _core.InvokeAsync(() => group.View is { } view ? view.Regions.Sum(r => client.FindRegion(r.Region)?.Count ?? 0) : 0);
    }

    /// <summary>What this node's embedded GMS knows now: node, group and region counts, and per group its view number
    /// and member count. Throws <see cref="InvalidOperationException"/> on a node without an embedded GMS.</summary>
    public Task<GmsSnapshot> GetGmsSnapshotAsync()
    {
        if (EmbeddedGms is not { } gms)
        {
            throw new InvalidOperationException("This node does not run the GMS (QuickSilverNodeOptions.EmbeddedGms is false).");
        }

        return _core.InvokeAsync(() => GmsSnapshot.Of(gms.State));
    }

    internal int MaxMessageBytes { get; private set; }

    /// <summary>Buffers for published messages, from the publishing thread until every region has sent them (a pool of
    /// the node's own, sized to the publish buffer, so bursts in flight do not outgrow it and allocate).</summary>
    internal System.Buffers.ArrayPool<byte> PublishPool { get; private set; } = System.Buffers.ArrayPool<byte>.Shared;

    /// <summary>The node's protocol stack (transport → reliable unicast → membership → region + AER → group). Core thread only.</summary>
    internal ProtocolStack Stack => _stack;

    internal GroupLayer Groups => _groups;

    /// <summary>The node's AER groups and repair servers. Core thread only.</summary>
    internal AerGroups AerGroups => _aer;

    private QsmCounters Counters { get; }

    /// <summary>Starts a node and waits until the GMS has registered it. Throws <see cref="GmsRefusedException"/> when
    /// the GMS refuses to (one of its <see cref="GmsOptions"/> limits).</summary>
    public static async Task<QuickSilverNode> StartAsync(QuickSilverNodeOptions? options = null, CancellationToken cancellationToken = default)
    {
        options ??= new QuickSilverNodeOptions();
        options.Validate();
        var loggers = options.LoggerFactory ?? Microsoft.Extensions.Logging.Abstractions.NullLoggerFactory.Instance;
        var logger = loggers.CreateLogger("QuickSilver.Node");
        var protocolLogger = loggers.CreateLogger("QuickSilver.Protocol");
        var core = QuickSilverCore.Start(new CoreOptions { Name = "node", Backend = options.Backend, Logger = loggers.CreateLogger("QuickSilver.Core"), MeterFactory = options.MeterFactory, DowncallQueueCapacity = options.DowncallQueueCapacity });
        try
        {
            uint epoch = (uint)Random.Shared.Next(1, int.MaxValue);
            GmsServer? gms = null;
            if (options.EmbeddedGms)
            {
                var gmsEndpoint = core.OpenUdp(options.EndpointOptions(options.Gms));
                var gmsOptions = options.GmsServer;
                if (gmsOptions.UseMulticast && !await MulticastWorksAsync(core, gmsEndpoint, gmsOptions.MulticastPoolStart).ConfigureAwait(false))
                {
                    NodeLog.MulticastUnavailable(logger, gmsOptions.MulticastPoolStart);
                    gmsOptions = gmsOptions with { UseMulticast = false };
                }

                gms = await core.InvokeAsync(() => QsmStack.BuildGms(gmsEndpoint, core, epoch ^ 0x5A5A5A5Au | 1,
                        (ulong)Random.Shared.NextInt64(1, long.MaxValue), gmsOptions, reliable: options.EffectiveReliableUnicast, logger: loggers.CreateLogger("QuickSilver.Gms"), log: new RateLimitedLog(protocolLogger, core), security: options.Security)
                    .Get<GmsServerLayer>().Server).ConfigureAwait(false);
            }

            var endpoint = core.OpenUdp(options.EndpointOptions(options.Bind) with { InjectedLossRate = options.InjectedLossRate });
            var counters = new QsmCounters(endpoint.LocalAddress.ToString(), options.MeterFactory);
            var wideArea = new AerLayer(options.Aer, new Random());
            var aerMeter = new AerMeter(endpoint.LocalAddress.ToString(), wideArea.Counters, options.MeterFactory);
            var (stack, aer) = await core.InvokeAsync(() =>
            {
                var built = QsmStack.BuildNode(endpoint, core, new QsmStackOptions
                {
                    WideArea = wideArea,
                    Epoch = epoch,
                    Gms = options.FirstGms,
                    GmsClient = new GmsClientOptions { Replicas = options.GmsReplicas },
                    Region = options.Region,
                    RateControl = options.RateControl,
                    Security = options.Security,
                    Reliable = options.EffectiveReliableUnicast,
                }, new RateLimitedLog(protocolLogger, core));
                counters.SetSecurity(built.Security?.Counters);
                counters.Attach(built.Get<RegionLayer>());
                var aerGroups = new AerGroups(built);
                aerGroups.RolesChanged = aerMeter.SetRoles;
                aerGroups.AddRepairServers(options.RepairServers);
                return (built, aerGroups);
            }).ConfigureAwait(false);
            var node = new QuickSilverNode(core, stack, aer, options, gms, counters, aerMeter);
            int largestAer = 0;
            (node.MaxMessageBytes, largestAer) = await core.InvokeAsync(() => (node._groups.MaxMessageBytes, stack.Transport.MaxDatagramSize - AerWire.DataHeaderSize)).ConfigureAwait(false);
            node.PublishPool = System.Buffers.ArrayPool<byte>.Create(Math.Max(16, Math.Max(node.MaxMessageBytes, largestAer)), options.PublishBuffer);
            var membership = stack.Get<MembershipLayer>();
            while (true)
            {
                cancellationToken.ThrowIfCancellationRequested();
                var (id, refusal) = await core.InvokeAsync(() => (membership.Client.Node, membership.Client.RegistrationRefusal)).ConfigureAwait(false);
                if (id is { } registered)
                {
                    node.Id = registered.Value;
                    return node;
                }

                if (refusal is not null)
                {
                    throw refusal; // the GMS is at one of its limits (GmsOptions): a specific error rather than a wait
                }

                await Task.Delay(10, cancellationToken).ConfigureAwait(false);
            }
        }
        catch
        {
            core.Dispose();
            throw;
        }
    }

    /// <summary>The start-up multicast probe of an embedded GMS: can an endpoint join the pool's first address?</summary>
    private static Task<bool> MulticastWorksAsync(QuickSilverCore core, UdpEndpoint endpoint, NetAddress group) => core.InvokeAsync(() =>
    {
        try
        {
            endpoint.JoinGroup(group);
            endpoint.LeaveGroup(group);
            return true;
        }
        catch (System.Net.Sockets.SocketException)
        {
            return false;
        }
    });

    /// <summary>The longest group name, in UTF-8 bytes (names travel in every GMS message about the group).</summary>
    public const int MaxGroupNameBytes = 256;

    /// <summary>Joins QSM group <paramref name="name"/> and waits until the GMS has installed a view of it that includes
    /// this node. Throws <see cref="GmsRefusedException"/> when the GMS refuses the join (too many groups for this node, a
    /// name longer than it accepts, or too many requests per second: <see cref="GmsOptions"/>).</summary>
    public Task<QuickSilverGroup> JoinGroupAsync(string name, CancellationToken cancellationToken = default)
        => JoinGroupAsync(name, GroupOptions.Qsm, cancellationToken);

    /// <summary>Joins group <paramref name="name"/> over the transport <paramref name="options"/> chooses. A QSM group:
    /// as <see cref="JoinGroupAsync(string, CancellationToken)"/>. An AER group (<see cref="GroupTransport.Aer"/>): this
    /// node becomes the session's source if its <see cref="Address"/> is <see cref="AerGroupOptions.Source"/>, otherwise
    /// a receiver; returns once the role runs (there is no GMS view: docs/aer.md, "Per group in QuickSilverNode").
    /// Throws <see cref="ArgumentException"/> naming a bad option, and <see cref="InvalidOperationException"/> when this
    /// node is in a group of that name already, or (AER) already has a role in the session.</summary>
    public async Task<QuickSilverGroup> JoinGroupAsync(string name, GroupOptions options, CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(name);
        ArgumentNullException.ThrowIfNull(options);
        if (System.Text.Encoding.UTF8.GetByteCount(name) > MaxGroupNameBytes)
        {
            throw new ArgumentException($"A group name may have at most {nameof(MaxGroupNameBytes)} = {MaxGroupNameBytes} UTF-8 bytes; '{name[..16]}…' has more.", nameof(name));
        }

        options.Validate();
        var group = new QuickSilverGroup(this, name, _options, options);
        if (options.Aer is { } aer)
        {
            await _core.InvokeAsync(() =>
            {
                group.Aer = _aer.Join(name, aer, group);
                group.MaxMessageBytes = group.Aer.MaxMessageBytes;
                group.OnAerJoined();
                return true;
            }).ConfigureAwait(false);
            return group;
        }

        group.State = await _core.InvokeAsync(() => _aer.IsJoined(name)
            ? throw new InvalidOperationException($"This node has already joined group '{name}'.")
            : _groups.Join(name, group)).ConfigureAwait(false);
        await group.Ready.WaitAsync(cancellationToken).ConfigureAwait(false);
        return group;
    }

    /// <summary>The node's membership state now: whether the GMS has it registered (false after the GMS was lost, until
    /// the client registers again) and the groups it is in. <see cref="NodeStatus.CoreRunning"/> is false once the core has
    /// stopped (disposed or faulted); then the rest is not asked.</summary>
    public async Task<NodeStatus> GetStatusAsync(CancellationToken cancellationToken = default)
    {
        if (_core.Completion.IsCompleted)
        {
            return new NodeStatus(false, false, null, 0);
        }

        var membership = _stack.Get<MembershipLayer>();
        var (registered, id, groups) = await _core.InvokeAsync(() =>
            (membership.Client.IsRegistered, membership.Client.Node?.Value, membership.Client.Groups.Count())).WaitAsync(cancellationToken).ConfigureAwait(false);
        return new NodeStatus(true, registered, id, groups);
    }

    /// <summary>The node's protocol state (region member, senders, drops) as text, for diagnosing a stalled transfer.</summary>
    public Task<string> DescribeAsync() => _core.InvokeAsync(() => _stack.Describe() + $" | core drops {_core.Counters.Drops.Total}");

    internal async Task LeaveAsync(QuickSilverGroup group)
    {
        if (!await _core.InvokeAsync(() => group.Aer is not null ? _aer.Leave(group.Name) : _groups.Leave(group.Name)).ConfigureAwait(false))
        {
            throw new InvalidOperationException($"This node is not in group '{group.Name}' (it left already).");
        }
    }

    internal void SetFeed(QuickSilverGroup group, Core.Feeds.IFeed<ReadOnlyMemory<byte>>? feed) => Downcall(() =>
    {
        if (group.Aer is { } aer)
        {
            aer.Feed = feed;
            aer.Signal();
        }
        else if (group.State is { } state)
        {
            state.Feed = feed;
            _groups.Signal(state);
        }
    });

    internal void SignalFeed(QuickSilverGroup group) => Downcall(() =>
    {
        if (group.Aer is { } aer)
        {
            aer.Signal();
        }
        else if (group.State is { } state)
        {
            _groups.Signal(state);
        }
    });

    private void Downcall(Action action)
    {
        var spin = default(SpinWait);
        while (!_core.TryPost(static a => ((Action)a!)(), action))
        {
            if (_core.Completion.IsCompleted)
            {
                return;
            }

            spin.SpinOnce();
        }
    }

    /// <summary>Wakes the core to take what <paramref name="group"/> published (one downcall per burst, no allocation).
    /// False when the core has stopped.</summary>
    internal bool PostPublished(QuickSilverGroup group)
    {
        var spin = default(SpinWait);
        while (!_core.TryPost(PublishedWake, group))
        {
            if (_core.Completion.IsCompleted)
            {
                return false;
            }

            spin.SpinOnce();
        }

        return true;
    }

    /// <summary>Leaves the system: stops the stack (the GMS is told at once), then the core and the meters.</summary>
    public async ValueTask DisposeAsync()
    {
        try
        {
            await _core.InvokeAsync(() =>
            {
                _stack.Stop();
                return true;
            }).WaitAsync(TimeSpan.FromSeconds(5)).ConfigureAwait(false);
            await Task.Delay(50).ConfigureAwait(false); // let the goodbye leave the socket
        }
        catch (Exception e) when (e is TimeoutException or ObjectDisposedException)
        {
            // The core is gone already; nothing to say goodbye with.
        }

        _core.Dispose();
        Counters.Dispose();
        _aerMeter.Dispose();
    }
}
