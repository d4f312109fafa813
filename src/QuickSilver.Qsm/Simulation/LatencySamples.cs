namespace QuickSilver.Qsm.Simulation;

/// <summary>Latency samples in virtual milliseconds, with the summary figures the runner reports.</summary>
internal sealed class LatencySamples
{
    private readonly List<double> _ms = new();
    private bool _sorted = true;

    public int Count => _ms.Count;

    public double Mean => _ms.Count == 0 ? double.NaN : _ms.Average();

    public double Max => _ms.Count == 0 ? double.NaN : _ms.Max();

    public void Add(TimeSpan latency)
    {
        _ms.Add(latency.TotalMilliseconds);
        _sorted = false;
    }

    /// <summary>The <paramref name="fraction"/> quantile (0.5 = median), NaN without samples.</summary>
    public double Quantile(double fraction)
    {
        if (_ms.Count == 0)
        {
            return double.NaN;
        }

        if (!_sorted)
        {
            _ms.Sort();
            _sorted = true;
        }

        return _ms[(int)Math.Clamp(Math.Round(fraction * (_ms.Count - 1)), 0, _ms.Count - 1)];
    }

    public void Clear() => _ms.Clear();
}
