namespace QuickSilver.Core.Time;

/// <summary>
/// Monotonic time as protocol code sees it. On the real core this is a monotonic stopwatch that starts at zero
/// when the core starts; in the simulated network it is virtual time. Protocol code never reads the wall clock.
/// </summary>
public interface IClock
{
    /// <summary>Time elapsed since the clock's origin. Never goes backwards.</summary>
    TimeSpan Now { get; }
}
