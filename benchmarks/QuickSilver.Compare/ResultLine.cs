using System.Globalization;
using System.Text;

namespace QuickSilver.Compare;

/// <summary>The one machine-readable line every benchmark process prints: <c>RESULT role=... key=value ...</c>.
/// The Java harness prints the same format.</summary>
internal static class ResultLine
{
    public const string Prefix = "RESULT ";

    public static string Format(string role, params (string Key, object Value)[] fields)
    {
        var text = new StringBuilder(Prefix).Append("role=").Append(role);
        foreach (var (key, value) in fields)
        {
            text.Append(' ').Append(key).Append('=').Append(Convert.ToString(value, CultureInfo.InvariantCulture));
        }

        return text.ToString();
    }

    /// <summary>The fields of a result line, or null when <paramref name="line"/> is not one.</summary>
    public static Dictionary<string, string>? TryParse(string? line)
    {
        if (line is null || !line.StartsWith(Prefix, StringComparison.Ordinal))
        {
            return null;
        }

        var fields = new Dictionary<string, string>(StringComparer.Ordinal);
        foreach (var part in line[Prefix.Length..].Split(' ', StringSplitOptions.RemoveEmptyEntries))
        {
            int eq = part.IndexOf('=', StringComparison.Ordinal);
            if (eq > 0)
            {
                fields[part[..eq]] = part[(eq + 1)..];
            }
        }

        return fields;
    }

    public static long Long(this IReadOnlyDictionary<string, string> fields, string key)
        => fields.TryGetValue(key, out var text) && long.TryParse(text, NumberStyles.Integer, CultureInfo.InvariantCulture, out long value) ? value : 0;

    /// <summary>Microseconds since the Unix epoch: comparable between processes on one machine (Java prints the same).</summary>
    public static long NowMicros() => (DateTime.UtcNow - DateTime.UnixEpoch).Ticks / 10;
}
