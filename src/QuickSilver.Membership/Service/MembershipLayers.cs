using QuickSilver.Core.Io;
using QuickSilver.Core.Security;
using QuickSilver.Core.Stack;
using Microsoft.Extensions.Logging;

namespace QuickSilver.Membership.Service;

/// <summary>The reliable control channel ids the membership service owns (docs/wire-format.md).</summary>
internal static class MembershipChannels
{
    /// <summary>GMS ⇄ node messages (MessagePack <see cref="GmsMessage"/>).</summary>
    public const byte Gms = 1;
}

/// <summary>
/// A node's membership layer: the <see cref="GmsClient"/> on control channel <see cref="MembershipChannels.Gms"/>. It
/// starts registering as soon as it is attached and says goodbye when the stack stops. Layers above it read the node's
/// id and views from <see cref="Client"/> and subscribe to <see cref="GmsClient.ViewsChanged"/>.
/// </summary>
internal sealed class MembershipLayer(NetAddress gms, ulong incarnation, GmsClientOptions? options = null) : IProtocolLayer
{
    private GmsClient? _client;

    public string Name => "membership";

    /// <summary>Installs and retires the per-region keys the GMS hands out (null when the stack does not seal datagrams).</summary>
    public RegionKeyKeeper? Keys { get; private set; }

    /// <summary>The GMS client (after the stack is built).</summary>
    public GmsClient Client => _client ?? throw new InvalidOperationException("The membership layer is not attached to a stack yet.");

    public void Attach(LayerContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        _client = new GmsClient(context.Scheduler, context.OpenControlChannel(MembershipChannels.Gms), gms, incarnation, options);
        if (context.Transport is SecureTransport secure)
        {
            Keys = new RegionKeyKeeper(secure, _client, context.Scheduler);
        }

        _client.Start();
    }

    public void Stop() => _client?.Stop();

    public string Describe() => $"node {(_client?.Node is { } node ? $"{node.Value}" : "unregistered")}, GMS {_client?.CurrentGms ?? gms}, epoch {_client?.Epoch}, GMS switches {_client?.GmsSwitches}, drops {_client?.Drops.Total}, region views {_client?.RegionViewCount} (forgotten {_client?.RegionViewsForgotten}), requests waiting {_client?.RequestsWaiting}";
}

/// <summary>The GMS server as a stack layer, on control channel <see cref="MembershipChannels.Gms"/> (embedded in a
/// node's process, standalone in <c>qs gms</c>, or on a simulated node).</summary>
internal sealed class GmsServerLayer(ulong epoch, GmsOptions? options = null, ILogger? logger = null) : IProtocolLayer
{
    private GmsServer? _server;

    public string Name => "gms-server";

    public GmsServer Server => _server ?? throw new InvalidOperationException("The GMS server layer is not attached to a stack yet.");

    public void Attach(LayerContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        _server = new GmsServer(context.Scheduler, context.OpenControlChannel(MembershipChannels.Gms), epoch, options, logger)
        {
            KeyWrap = (context.Transport as SecureTransport)?.KeyWrap,
        };
    }

    public void Stop()
    {
    }

    public string Describe() => _server is { } s
        ? $"{(s.IsLeading ? "leading" : $"following {s.Leader?.ToString() ?? "nobody"}")}, epoch {s.Epoch}, {s.State.NodeCount} nodes, batches {s.BatchesApplied}, failures {s.FailuresDetected}, take-overs {s.TakeOvers}, redirects {s.Redirects}, proposals lost {s.ProposalsLost}, drops {s.Drops.Total}"
        : "not attached";
}
