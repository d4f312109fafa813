namespace QuickSilver.Figures;

/// <summary>Jain's fairness index (Jain, Chiu and Hawe, 1984) of a set of throughputs.</summary>
internal static class JainFairness
{
    /// <summary>(Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has everything; NaN for none or all zero.</summary>
    public static double Index(IReadOnlyList<double> x)
    {
        ArgumentNullException.ThrowIfNull(x);
        double sum = 0, squares = 0;
        foreach (double v in x)
        {
            sum += v;
            squares += v * v;
        }

        return x.Count == 0 || squares == 0 ? double.NaN : sum * sum / (x.Count * squares);
    }
}
