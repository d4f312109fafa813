using QuickSilver.Core.Time;
using Serilog;

namespace QuickSilver.Core.Diagnostics;

/// <summary>
/// Writes at most one warning per <see cref="Interval"/> per key (for example a drop reason), and says how many
/// were suppressed in between, so a peer that floods garbage cannot flood the log. Core thread only.
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

    /// <summary>Logs <paramref name="messageTemplate"/> unless a line with the same key was written less than
    /// <see cref="Interval"/> ago. Returns true when the line was written.</summary>
    public bool Warn<T0>(int key, string messageTemplate, T0 arg0)
    {
        var now = _clock.Now;
        if (_state.TryGetValue(key, out var s) && now - s.Last < Interval)
        {
            _state[key] = (s.Last, s.Suppressed + 1);
            return false;
        }

        _state[key] = (now, 0);
        if (s.Suppressed > 0)
        {
            _logger.Warning(messageTemplate + " ({Suppressed} similar suppressed)", arg0, s.Suppressed);
        }
        else
        {
            _logger.Warning(messageTemplate, arg0);
        }

        return true;
    }
}
