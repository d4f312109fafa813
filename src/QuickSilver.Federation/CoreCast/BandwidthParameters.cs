namespace QuickSilver.Federation.CoreCast;

/// <summary>
/// The inputs of the CoreCast bandwidth model (seed 004, §3.3 and §4, equations 1–9), each named after the paper's
/// symbol. The defaults are the seed's own figures: a 10 Gbit/s server sending one 384 kbit/s channel in 1,200-byte
/// payloads every 25 ms, a 20-byte LISP header, a 60-byte CoreCast header packet, and, for the traffic equations, the
/// Set 1 CoreCast row of its Table 1 (1,853 clients in 202 ASes, a 2 h 45 min broadcast). The seed states no IP header
/// size; 20 bytes (IPv4 without options) is ours. <see cref="Validate"/> rejects values the equations cannot use, with an
/// <see cref="ArgumentOutOfRangeException"/> whose <see cref="ArgumentException.ParamName"/> is the property's name.
/// </summary>
public sealed record BandwidthParameters
{
    /// <summary>The largest packet size the model accepts, in bytes: an IPv4 datagram's maximum.</summary>
    public const int MaxPacketBytes = 65_535;

    /// <summary>The seed's parameters (the defaults of every property).</summary>
    public static BandwidthParameters Seed { get; } = new();

    /// <summary>C: the sender's line rate, in bits per second (equations 1 and 2). Default 10 Gbit/s = 10^10.</summary>
    public double C { get; init; } = 10e9;

    /// <summary>BW: the bandwidth one stream needs, in bits per second (equations 1 and 2). Default 384 kbit/s = 384,000.</summary>
    public double BW { get; init; } = 384_000;

    /// <summary>T: the time between two payloads of the stream, in seconds (equations 1, 4 and 6). Default 0.025.</summary>
    public double T { get; init; } = 0.025;

    /// <summary>H_L: the LISP (core encapsulation) header, in bytes (equations 1, 3, 7–9). Default 20.</summary>
    public int HL { get; init; } = 20;

    /// <summary>P_CC: the CoreCast PDU of a payload packet, in bytes (equations 1, 3, 7–9). Default 1,200.</summary>
    public int PCC { get; init; } = 1200;

    /// <summary>H_CC: the CoreCast PDU of a header packet, in bytes (equations 1, 3, 8, 9). Default 60.</summary>
    public int HCC { get; init; } = 60;

    /// <summary>H_I: the IP header of a rebuilt local packet, in bytes (equation 5). Default 20 (not in the seed).</summary>
    public int HI { get; init; } = 20;

    /// <summary>D: one multimedia chunk, in bytes (equation 5). Default 1,200.</summary>
    public int D { get; init; } = 1200;

    /// <summary>j: remote domains (RLOCs, egress routers) with at least one client (equations 3, 7, 8). Default 202.</summary>
    public int J { get; init; } = 202;

    /// <summary>k: clients (equations 3, 5, 8). Default 1,853.</summary>
    public int K { get; init; } = 1853;

    /// <summary>α: the P2P system's non-essential inter-domain arcs per client, so that i = j + α·k (equations 7–9);
    /// within [0, k − 1] as the seed defines it. Null (the default) leaves out the P2P comparison: the seed gives no value.</summary>
    public double? Alpha { get; init; }

    /// <summary>The length of a broadcast, in seconds, for the traffic volumes of the seed's Table 1 (equations 4 and 6
    /// times this). Default 9,900 (2 h 45 min, the Set 1 traces).</summary>
    public double BroadcastSeconds { get; init; } = 9900;

    /// <summary>Throws <see cref="ArgumentOutOfRangeException"/> naming the first parameter out of its range.</summary>
    public void Validate()
    {
        Positive(C, nameof(C), "bits per second");
        Positive(BW, nameof(BW), "bits per second");
        Positive(T, nameof(T), "seconds");
        Positive(BroadcastSeconds, nameof(BroadcastSeconds), "seconds");
        Bytes(HL, nameof(HL), 0);
        Bytes(PCC, nameof(PCC), 1);
        Bytes(HCC, nameof(HCC), 1);
        Bytes(HI, nameof(HI), 0);
        Bytes(D, nameof(D), 1);
        if (K < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(K), K, "k (clients) must be at least 1.");
        }

        if (J < 1 || J > K)
        {
            throw new ArgumentOutOfRangeException(nameof(J), J, $"j (domains with clients) must be between 1 and k = {K:N0}: every domain counted holds a client.");
        }

        if (Alpha is { } alpha && (!double.IsFinite(alpha) || alpha < 0 || alpha > K - 1))
        {
            throw new ArgumentOutOfRangeException(nameof(Alpha), alpha, $"α must be between 0 and k − 1 = {K - 1:N0}.");
        }
    }

    private static void Positive(double value, string name, string unit)
    {
        if (!double.IsFinite(value) || value <= 0)
        {
            throw new ArgumentOutOfRangeException(name, value, $"{name} must be a positive finite number of {unit}.");
        }
    }

    private static void Bytes(int value, string name, int min)
    {
        if (value < min || value > MaxPacketBytes)
        {
            throw new ArgumentOutOfRangeException(name, value, $"{name} must be between {min} and {MaxPacketBytes:N0} bytes.");
        }
    }
}
