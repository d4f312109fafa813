using System.Globalization;
using Microsoft.Extensions.Logging;
using QuickSilver.Core.Time;

namespace QuickSilver.Core.Diagnostics;

/// <summary>
/// Writes at most one warning per <see cref="Interval"/> per key (for example a drop reason), and says how many
/// were suppressed in between, so a peer that floods garbage cannot flood the log. Core thread only. The drop paths
/// that call it are per datagram: with warnings disabled it returns after one <see cref="ILogger.IsEnabled"/> call,
/// before any lookup, formatting or allocation; enabled, a suppressed line costs one dictionary update.
/// </summary>
public sealed class RateLimitedLog
{
    private readonly ILogger _logger;
    private readonly IClock _clock;
    private readonly Dictionary<int, (TimeSpan Last, long Suppressed)> _state = new();

    public RateLimitedLog(ILogger logger, IClock clock, TimeSpan? interval = null)
    {
        _logger = logger ?? throw new ArgumentNullException(nameof(logger));
        _clock = clock ?? throw new ArgumentNullException(nameof(clock));
        Interval = interval ?? TimeSpan.FromSeconds(10);
    }

    public TimeSpan Interval { get; }

    /// <summary>Logs <paramref name="messageTemplate"/> (one "{Name}" hole, filled with <paramref name="arg0"/>) unless
    /// warnings are disabled or a line with the same key was written less than <see cref="Interval"/> ago. Returns true
    /// when the line was written.</summary>
    public bool Warn<T0>(int key, string messageTemplate, T0 arg0) => Warn(key, messageTemplate, arg0, (object?)null);

    /// <summary>As <see cref="Warn{T0}"/>, with two holes; the arguments are formatted only when the line is written.</summary>
    public bool Warn<T0, T1>(int key, string messageTemplate, T0 arg0, T1 arg1)
    {
        if (!_logger.IsEnabled(LogLevel.Warning))
        {
            return false;
        }

        var now = _clock.Now;
        if (_state.TryGetValue(key, out var s) && now - s.Last < Interval)
        {
            _state[key] = (s.Last, s.Suppressed + 1);
            return false;
        }

        _state[key] = (now, 0);
        string message = Fill(Fill(messageTemplate, arg0), arg1);
        if (s.Suppressed > 0)
        {
            CoreLog.RateLimitedWithSuppressed(_logger, message, s.Suppressed);
        }
        else
        {
            CoreLog.RateLimited(_logger, message);
        }

        return true;
    }

    /// <summary>The template with its first hole filled (once per <see cref="Interval"/> at most, so formatting here is cheap).</summary>
    private static string Fill<T0>(string template, T0 arg0)
    {
        if (arg0 is null)
        {
            return template;
        }

        int open = template.IndexOf('{', StringComparison.Ordinal);
        int close = open < 0 ? -1 : template.IndexOf('}', open);
        string value = Convert.ToString(arg0, CultureInfo.InvariantCulture) ?? "";
        return close < 0 ? template : string.Concat(template.AsSpan(0, open), value, template.AsSpan(close + 1));
    }
}
