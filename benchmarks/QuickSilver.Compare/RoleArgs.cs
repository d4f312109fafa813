using System.Globalization;

namespace QuickSilver.Compare;

/// <summary>The <c>key=value</c> arguments of a hidden child role (the Java harness takes the same form).</summary>
internal sealed class RoleArgs(IEnumerable<string> args)
{
    private readonly Dictionary<string, string> _values = args
        .Select(a => a.Split('=', 2))
        .Where(p => p.Length == 2)
        .ToDictionary(p => p[0], p => p[1], StringComparer.Ordinal);

    public int Int(string key, int fallback) => _values.TryGetValue(key, out var v) ? int.Parse(v, CultureInfo.InvariantCulture) : fallback;

    public long Long(string key, long fallback) => _values.TryGetValue(key, out var v) ? long.Parse(v, CultureInfo.InvariantCulture) : fallback;

    public double Double(string key, double fallback) => _values.TryGetValue(key, out var v) ? double.Parse(v, CultureInfo.InvariantCulture) : fallback;

    public string String(string key, string fallback) => _values.GetValueOrDefault(key, fallback);

    public static string[] Make(params (string Key, object Value)[] fields)
        => fields.Select(f => f.Key + "=" + Convert.ToString(f.Value, CultureInfo.InvariantCulture)).ToArray();
}
