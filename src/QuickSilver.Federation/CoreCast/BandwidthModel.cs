namespace QuickSilver.Federation.CoreCast;

/// <summary>
/// CoreCast's bandwidth model (seed 004, equations 1–9) as a pure calculator: no I/O, no state. A CoreCast source sends
/// each payload once per remote domain and then one small header packet per client; this model says how many clients
/// one line carries that way against per-receiver unicast, how much transit and local traffic a stream makes, and from
/// how many non-essential inter-domain arcs per client (α) a P2P system sends more transit traffic than CoreCast.
/// <list type="bullet">
/// <item>(1) MaxClients_CC ≃ C·T / (8·H) = C/BW · P/H, with P = H_L + P_CC and H = H_L + H_CC in bytes (§5.3).</item>
/// <item>(2) MaxClients_UC = C/BW.</item>
/// <item>(3) TT_CC = (H_L + P_CC)·j + (H_L + H_CC)·k bytes per payload; (4) BW_transit = TT_CC / T.</item>
/// <item>(5) LT_CC = (H_I + D)·k bytes per payload; (6) BW_local = LT_CC / T.</item>
/// <item>(7) TT_P2P = (H_L + P_CC)·i; (8) TT_CC ≤ TT_P2P ⇔ (H_L + H_CC)/(H_L + P_CC) ≤ (i − j)/k;
/// (9) with i − j = α·k: α ≥ (H_L + H_CC)/(H_L + P_CC).</item>
/// </list>
/// Whole client counts are the floor of equations 1 and 2 (a line cannot serve part of a client); that is the rounding
/// the seed's 397,135 and 26,041 use. docs/federation.md compares every reproduced figure with the seed's.
/// </summary>
public static class BandwidthModel
{
    /// <summary>Evaluates equations 1–9 for <paramref name="parameters"/> (validated first).</summary>
    /// <exception cref="ArgumentOutOfRangeException">A parameter is out of range; the exception names it.</exception>
    public static BandwidthEstimate Evaluate(BandwidthParameters parameters)
    {
        ArgumentNullException.ThrowIfNull(parameters);
        parameters.Validate();
        var p = parameters;
        int payloadPacket = p.HL + p.PCC;
        int headerPacket = p.HL + p.HCC;
        double transit = ((double)payloadPacket * p.J) + ((double)headerPacket * p.K);
        double local = (double)(p.HI + p.D) * p.K;
        double threshold = (double)headerPacket / payloadPacket;
        double? arcs = p.Alpha is { } alpha ? p.J + (alpha * p.K) : null;
        double? p2p = arcs is { } i ? payloadPacket * i : null;
        return new BandwidthEstimate
        {
            Parameters = p,
            PayloadPacketBytes = payloadPacket,
            HeaderPacketBytes = headerPacket,
            Gain = (double)payloadPacket / headerPacket,
            MaxClientsCoreCast = p.C * payloadPacket / (p.BW * headerPacket),
            MaxClientsCoreCastFromInterval = p.C * p.T / (8.0 * headerPacket),
            MaxClientsUnicast = p.C / p.BW,
            TransitBytesPerPayload = transit,
            TransitBytesPerSecond = transit / p.T,
            LocalBytesPerPayload = local,
            LocalBytesPerSecond = local / p.T,
            TransitBytesPerBroadcast = transit / p.T * p.BroadcastSeconds,
            LocalBytesPerBroadcast = local / p.T * p.BroadcastSeconds,
            AlphaThreshold = threshold,
            P2pInterDomainArcs = arcs,
            P2pTransitBytesPerPayload = p2p,
            CoreCastSendsLessTransit = p2p is { } tt ? transit <= tt : null,
        };
    }
}
