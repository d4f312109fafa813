using QuickSilver.Federation.Naming;
using QuickSilver.Federation.Routing;

namespace QuickSilver.Federation.Gateway;

/// <summary>A gateway's options. The seed gives only the 30 s refresh of its example; the other values are ours
/// (docs/federation.md, "Options"). <see cref="Validate"/> names the option that is wrong.</summary>
public sealed record GatewayOptions
{
    public required GatewayId Gateway { get; init; }

    public required IslandId Island { get; init; }

    /// <summary>A KEEPALIVE goes out on a link that has sent nothing for this long.</summary>
    public TimeSpan KeepAliveInterval { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>A peer heard from for none of this long is declared dead: its routes are withdrawn (seed §5.1).</summary>
    public TimeSpan HoldTime { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>Period of refresh JOINs upstream (the seed's example uses 30 s).</summary>
    public TimeSpan JoinRefreshInterval { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>Tree state (a downstream peer, or local clients) not refreshed for this long is removed.</summary>
    public TimeSpan JoinHoldTime { get; init; } = TimeSpan.FromSeconds(95);

    /// <summary>How long a JOIN waits for SROUTE_RESPONSE before choosing on routing costs alone.</summary>
    public TimeSpan SrouteTimeout { get; init; } = TimeSpan.FromSeconds(2);

    public int MaxPeers { get; init; } = 64;

    public int MaxSessions { get; init; } = 4096;

    public int MaxPendingSroutes { get; init; } = 256;

    /// <summary>Origins the duplicate filter remembers.</summary>
    public int MaxOrigins { get; init; } = 1024;

    /// <summary>Largest native payload forwarded (the peering frame adds a 16-byte header).</summary>
    public int MaxPayloadBytes { get; init; } = 65_000;

    /// <summary>Bytes of frames (length prefixes included) that may wait on one peering link's send queue; at the bound
    /// a DATA frame is dropped and counted (<see cref="GatewayCounters.PeerSendFailed"/>) and a control frame closes
    /// the link. 8 MiB: about 8,000 DATA frames of 1,000 B.</summary>
    public int PeerQueueBytes { get; init; } = Transport.Framing.FramedConnection.DefaultOutgoingByteLimit;

    public IRoutePolicy Policy { get; init; } = OpenPolicy.Instance;

    /// <summary>Announce CoreCast support to peers (CAPABILITIES): they may then send this gateway a per-receiver
    /// session's payload once and headers per receiver. Off: they send it a full frame per receiver.</summary>
    public bool CoreCast { get; init; } = true;

    /// <summary>Receivers of one per-receiver session a gateway tracks (its own and those behind its downstream peers).</summary>
    public int MaxReceivers { get; init; } = Peering.PeerCodec.MaxReceivers;

    public RouterOptions Router { get; init; } = new();

    /// <summary>The secret every gateway of the federation shares (at least
    /// <see cref="Peering.PeeringHandshake.MinSecretBytes"/> bytes, random), or null (the default): peering links in the
    /// clear, as the seed has them. With one, a link starts with PEER_AUTH both ways and every later frame is sealed
    /// under keys derived from the secret and both sides' nonces (<see cref="Peering.PeeringHandshake"/>); a peer
    /// without it, or with another, never peers. It is never sent.</summary>
    public byte[]? PeeringSecret { get; init; }

    public void Validate()
    {
        if (Gateway.Value == 0)
        {
            throw new ArgumentOutOfRangeException(nameof(Gateway), "gateway number must be 1 or more");
        }

        if (Island.Value == 0)
        {
            throw new ArgumentOutOfRangeException(nameof(Island), "island number must be 1 or more");
        }

        Positive(KeepAliveInterval, nameof(KeepAliveInterval));
        Positive(JoinRefreshInterval, nameof(JoinRefreshInterval));
        Positive(SrouteTimeout, nameof(SrouteTimeout));
        if (HoldTime <= KeepAliveInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(HoldTime), $"hold time ({HoldTime.TotalSeconds} s) must exceed the keep-alive interval ({KeepAliveInterval.TotalSeconds} s)");
        }

        if (JoinHoldTime <= JoinRefreshInterval)
        {
            throw new ArgumentOutOfRangeException(nameof(JoinHoldTime), $"join hold time ({JoinHoldTime.TotalSeconds} s) must exceed the refresh interval ({JoinRefreshInterval.TotalSeconds} s)");
        }

        Range(MaxPeers, 1, 1024, nameof(MaxPeers));
        Range(MaxSessions, 1, 1_000_000, nameof(MaxSessions));
        Range(MaxPendingSroutes, 1, 100_000, nameof(MaxPendingSroutes));
        Range(MaxOrigins, 1, 1_000_000, nameof(MaxOrigins));
        Range(MaxReceivers, 1, Peering.PeerCodec.MaxReceivers, nameof(MaxReceivers));
        Range(MaxPayloadBytes, 1, Peering.PeerCodec.MaxFrameBytes - Forwarding.DataHeader.Size, nameof(MaxPayloadBytes));
        Range(PeerQueueBytes, Peering.PeerCodec.MaxFrameBytes + 4, 1 << 30, nameof(PeerQueueBytes));
        if (PeeringSecret is { Length: < Peering.PeeringHandshake.MinSecretBytes })
        {
            throw new ArgumentOutOfRangeException(nameof(PeeringSecret), $"{nameof(PeeringSecret)} must be at least {Peering.PeeringHandshake.MinSecretBytes} bytes (e.g. 'head -c 32 /dev/urandom | base64'); got {PeeringSecret.Length}");
        }
    }

    private static void Positive(TimeSpan value, string name)
    {
        if (value <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(name, $"{name} must be positive");
        }
    }

    private static void Range(int value, int min, int max, string name)
    {
        if (value < min || value > max)
        {
            throw new ArgumentOutOfRangeException(name, $"{name} must be between {min} and {max}; got {value}");
        }
    }
}
