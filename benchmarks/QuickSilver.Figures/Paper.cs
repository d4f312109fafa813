namespace QuickSilver.Figures;

/// <summary>
/// What the QSM paper reports, as numbers its text states (our copy of the paper is its text: the figures' images are
/// not in it, so nothing here is read off a plot). Each series says where in §3 it comes from. Where the text gives a
/// relation rather than a value ("20 % higher", "80 % of"), the series is in percent of the stated reference.
/// </summary>
internal static class Paper
{
    /// <summary>§3.2: "scaling up from 1 to 71 nodes results in a drop of performance by 1/3, from 9850 to 6500 packets/s".</summary>
    public static readonly PaperSeries Fig9Throughput = new("paper, packets/s (§3.2 text)", [1, 71], [9850, 6500]);

    /// <summary>§3.4: "Throughput in a 25-node region sliced into 5 partitions is almost 20 % higher than when the whole
    /// region forms a single 25-node partition": R = 25 (one partition) at 100/1.2 % of R = 5.</summary>
    public static readonly PaperSeries Fig12PartitionSize = new("paper, 25 nodes (§3.4 text: R = 5 ~20 % above R = 25)", [5, 25], [100, 100 / 1.2]);

    /// <summary>§3.7: "with 10 senders it is still at 80 % of its original value".</summary>
    public static readonly PaperSeries Fig16Senders = new("paper (§3.7 text: 80 % at 10 senders)", [1, 10], [100, 80]);

    /// <summary>§3.9: "On average, recovery takes 2.5 token rounds, independent of system size" (its testbeds: 25 and 71 nodes).</summary>
    public static readonly PaperSeries Fig19Recovery = new("paper (§3.9 text: ~2.5 rounds at any size)", [25, 71], [2.5, 2.5]);

    /// <summary>§3.10: "In larger systems, this takes up to 3.5 token rounds, while in smaller systems it takes slightly
    /// over 1 round"; the text names no sizes, so the two values are placed at the smallest (1) and largest (71) system
    /// the paper ran.</summary>
    public static readonly PaperSeries Fig20Ack = new("paper (§3.10 text: ~1 round small, up to 3.5 large; at 1 and 71 nodes)", [1, 71], [1, 3.5]);

    /// <summary>§1.1: JGroups' aggregate throughput drops "by 6 % with 2 groups, 20 % with 32 groups and almost 60 % with
    /// 256 groups" (so 94, 80 and ~40 % of 1 group).</summary>
    public static readonly PaperSeries Fig1JGroups = new("paper JGroups (§1.1 text: -6 %, -20 %, ~-60 %)", [1, 2, 32, 256], [100, 94, 80, 40]);

    /// <summary>§3.2: "performance in our system does not directly depend on the number of groups" (no number: drawn
    /// flat at 100 % over the paper's 1 to 256 groups).</summary>
    public static readonly PaperSeries Fig1Qsm = new("paper QSM (§3.2 text: flat)", [1, 256], [100, 100]);

    /// <summary>§3.8: in the 71-node system "the rate fluctuates between 3000 and 9000 packets/s in cycles that span
    /// several minutes".</summary>
    public static readonly (double Low, double High) Fig17Band71 = (3000, 9000);
}

/// <summary>Values the paper states, in the units of the chart they are drawn on.</summary>
internal sealed record PaperSeries(string Label, double[] X, double[] Y);
