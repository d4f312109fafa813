namespace QuickSilver.Compare;

/// <summary>One measured configuration: the same for every system measured at it.</summary>
internal sealed record ExperimentPoint(int Receivers, int Groups, int Size, double Loss, long Messages)
{
    /// <summary>The point's configuration without loss: where JGroups and raw UDP (which run without loss) are looked up.</summary>
    public ExperimentPoint Lossless => this with { Loss = 0 };
}

/// <summary>A series of points varying one parameter (<see cref="XLabel"/>), plotted and written as one CSV.</summary>
internal sealed record Experiment(string Name, string XLabel, Func<ExperimentPoint, double> X, IReadOnlyList<ExperimentPoint> Points);

/// <summary>The systems compared.</summary>
internal static class Systems
{
    public const string QuickSilver = "QuickSilver";
    public const string JGroups = "JGroups";
    public const string RawUdp = "RawUDP";

    public static readonly IReadOnlyList<string> All = [QuickSilver, JGroups, RawUdp];
}
