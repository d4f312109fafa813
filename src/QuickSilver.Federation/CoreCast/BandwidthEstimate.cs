namespace QuickSilver.Federation.CoreCast;

/// <summary>
/// What <see cref="BandwidthModel.Evaluate"/> computes from <see cref="BandwidthParameters"/>: each equation's quantity
/// of seed 004 with its unit in the name. Sizes are bytes, rates bytes per second unless the name says bits.
/// </summary>
public sealed record BandwidthEstimate
{
    /// <summary>The parameters this was computed from.</summary>
    public required BandwidthParameters Parameters { get; init; }

    /// <summary>P = H_L + P_CC: a payload packet as it crosses the core, in bytes (the seed's §5.3 reading of equation 1).</summary>
    public required int PayloadPacketBytes { get; init; }

    /// <summary>H = H_L + H_CC: a header packet as it crosses the core, in bytes.</summary>
    public required int HeaderPacketBytes { get; init; }

    /// <summary>P/H: CoreCast's gain in clients per line over unicast (equation 1 divided by equation 2).</summary>
    public required double Gain { get; init; }

    /// <summary>Equation 1, right-hand form: C/BW · P/H, the clients one line can serve with CoreCast, unrounded.</summary>
    public required double MaxClientsCoreCast { get; init; }

    /// <summary>Equation 1, middle form: C·T / (8·H), the header packets that fit in one payload interval, unrounded.
    /// Equal to the right-hand form only when T = 8·P/BW; with the seed's T = 25 ms and P = 1,220 B it is not.</summary>
    public required double MaxClientsCoreCastFromInterval { get; init; }

    /// <summary>Equation 2: C/BW, the clients one line can serve by per-receiver unicast, unrounded.</summary>
    public required double MaxClientsUnicast { get; init; }

    /// <summary>⌊equation 1⌋: whole clients with CoreCast (the seed's 397,135).</summary>
    public long WholeClientsCoreCast => (long)Math.Floor(MaxClientsCoreCast);

    /// <summary>⌊equation 2⌋: whole clients with unicast (the seed's 26,041).</summary>
    public long WholeClientsUnicast => (long)Math.Floor(MaxClientsUnicast);

    /// <summary>Equation 3: TT_CC = (H_L + P_CC)·j + (H_L + H_CC)·k, transit bytes per payload.</summary>
    public required double TransitBytesPerPayload { get; init; }

    /// <summary>Equation 4: BW_transit = TT_CC / T, in bytes per second.</summary>
    public required double TransitBytesPerSecond { get; init; }

    /// <summary>Equation 5: LT_CC = (H_I + D)·k, local (intra-domain) bytes per payload.</summary>
    public required double LocalBytesPerPayload { get; init; }

    /// <summary>Equation 6: BW_local = LT_CC / T, in bytes per second.</summary>
    public required double LocalBytesPerSecond { get; init; }

    /// <summary>Equation 4 times the broadcast length: transit bytes over the whole broadcast (Table 1's TT).</summary>
    public required double TransitBytesPerBroadcast { get; init; }

    /// <summary>Equation 6 times the broadcast length: local bytes over the whole broadcast (Table 1's LT).</summary>
    public required double LocalBytesPerBroadcast { get; init; }

    /// <summary>Equations 8 and 9: (H_L + H_CC) / (H_L + P_CC), the least α for which CoreCast sends no more transit
    /// traffic than a P2P system (0.0656 at 1,200-byte payloads, 0.1905 at 400).</summary>
    public required double AlphaThreshold { get; init; }

    /// <summary>i = j + α·k: the P2P system's inter-domain arcs; null without α.</summary>
    public double? P2pInterDomainArcs { get; init; }

    /// <summary>Equation 7: TT_P2P = (H_L + P_CC)·i, the P2P system's transit bytes per payload; null without α.</summary>
    public double? P2pTransitBytesPerPayload { get; init; }

    /// <summary>TT_CC ≤ TT_P2P (equation 3 against equation 7, which equation 9 restates as α ≥ the threshold); null without α.</summary>
    public bool? CoreCastSendsLessTransit { get; init; }
}
