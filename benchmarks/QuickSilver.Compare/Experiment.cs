using QuickSilver.Core.Security;

namespace QuickSilver.Compare;

/// <summary>One measured configuration: the same for every system measured at it. The sender first sends
/// <see cref="Warmup"/> messages that are delivered and checked but not timed, then the <see cref="Messages"/> measured
/// ones; throughput is over the measured ones only.</summary>
internal sealed record ExperimentPoint(int Receivers, int Groups, int Size, double Loss, long Messages, long Warmup = 0)
{
    /// <summary>The point's configuration without loss: where JGroups and raw UDP (which run without loss) are looked up.</summary>
    public ExperimentPoint Lossless => this with { Loss = 0 };

    /// <summary>Every message a receiver must get: warm-up and measured.</summary>
    public long Total => Warmup + Messages;

    /// <summary>Group <paramref name="g"/>'s round-robin share of all <see cref="Total"/> messages, when message i
    /// (0-based) goes to group i mod <see cref="Groups"/>. Which of them are warm-up is decided in send order over all
    /// groups (the first <see cref="Warmup"/> sent), as the JGroups and raw UDP senders do.</summary>
    public long Share(int g) => Total / Groups + (g < Total % Groups ? 1 : 0);

    /// <summary>The record's generated ToString would print <see cref="Lossless"/>, a new point, whose ToString prints its
    /// own, without end (a stack overflow in the stall diagnostics).</summary>
    public override string ToString() => string.Create(System.Globalization.CultureInfo.InvariantCulture,
        $"{Receivers} receivers, {Groups} groups, {Size} B, loss {Loss:P0}, {Warmup} + {Messages} messages");
}

/// <summary>A series of points varying one parameter (<see cref="XLabel"/>), plotted and written as one CSV.</summary>
internal sealed record Experiment(string Name, string XLabel, Func<ExperimentPoint, double> X, IReadOnlyList<ExperimentPoint> Points);

/// <summary>The systems compared.</summary>
internal static class Systems
{
    public const string QuickSilver = "QuickSilver";
    public const string JGroups = "JGroups";
    public const string RawUdp = "RawUDP";
    public const string Sockperf = "sockperf";

    public static readonly IReadOnlyList<string> All = [QuickSilver, JGroups, RawUdp, Sockperf];

    /// <summary>QuickSilver with datagram security <paramref name="mode"/>: "QuickSilver" when off, else
    /// "QuickSilver+Authenticate" or "QuickSilver+Encrypt" (a series of its own in the CSV, plot and ratios).</summary>
    public static string QuickSilverWith(DatagramSecurity mode)
        => mode == DatagramSecurity.Off ? QuickSilver : $"{QuickSilver}+{mode}";

    /// <summary>Whether <paramref name="system"/> is QuickSilver, with or without datagram security.</summary>
    public static bool IsQuickSilver(string system) => system.StartsWith(QuickSilver, StringComparison.Ordinal);
}

/// <summary>The first byte of every benchmark message, the same in the C# roles and the Java harness.</summary>
internal static class MessageKind
{
    /// <summary>A measured message.</summary>
    public const byte Data = 0;

    /// <summary>QuickSilver's probe (is every receiver in every group yet?); JGroups' DONE uses the same value.</summary>
    public const byte Probe = 1;

    /// <summary>A warm-up message: delivered and counted in the delivery check, not timed.</summary>
    public const byte Warmup = 2;
}
