using System.Globalization;
using System.Text;

namespace QuickSilver.Compare;

/// <summary>A receiver's arrivals per millisecond from its first one (the ramp measurement, <see cref="Output.RampOut"/>):
/// a fixed array of <see cref="MaxMilliseconds"/> counters, so recording costs one increment and nothing grows; arrivals
/// after it are counted in the last one. One thread only (the node's core thread).</summary>
internal sealed class ArrivalTimeline
{
    public const int MaxMilliseconds = 120_000;
    private readonly int[] _perMillisecond = new int[MaxMilliseconds];
    private long _firstMicros;
    private int _last;

    public void Arrived(long nowMicros)
    {
        if (_firstMicros == 0)
        {
            _firstMicros = nowMicros;
        }

        int ms = (int)Math.Clamp((nowMicros - _firstMicros) / 1000, 0, MaxMilliseconds - 1);
        _perMillisecond[ms]++;
        _last = Math.Max(_last, ms);
    }

    /// <summary>The first arrival (µs since the epoch) on the first line, then one count per millisecond.</summary>
    public string Format()
    {
        var text = new StringBuilder().Append(_firstMicros.ToString(CultureInfo.InvariantCulture)).Append('\n');
        for (int i = 0; i <= _last && _firstMicros != 0; i++)
        {
            text.Append(_perMillisecond[i].ToString(CultureInfo.InvariantCulture)).Append('\n');
        }

        return text.ToString();
    }

    /// <summary>Reads <see cref="Format"/>'s text: the first arrival and the counts.</summary>
    public static (long FirstMicros, int[] PerMillisecond) Parse(string text)
    {
        var lines = text.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        if (lines.Length == 0)
        {
            return (0, []);
        }

        return (long.Parse(lines[0], CultureInfo.InvariantCulture), [.. lines.Skip(1).Select(l => int.Parse(l, CultureInfo.InvariantCulture))]);
    }
}
