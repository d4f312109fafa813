namespace QuickSilver.Core.Alarms;

/// <summary>
/// A re-usable alarm handle. Protocol code allocates its alarms once, then schedules, cancels and reschedules them
/// as often as it likes without allocating. The alarm object is itself the node of the <see cref="AlarmQueue"/>
/// splay tree, so it can be in at most one queue at a time.
/// </summary>
public sealed class Alarm
{
    private readonly Action<Alarm> _callback;

    /// <param name="callback">Called on the core thread when the alarm fires. Cache the delegate; do not allocate per schedule.</param>
    /// <param name="state">Optional state the callback can read back through <see cref="State"/>.</param>
    public Alarm(Action<Alarm> callback, object? state = null)
    {
        ArgumentNullException.ThrowIfNull(callback);
        _callback = callback;
        State = state;
    }

    /// <summary>Caller-owned state.</summary>
    public object? State { get; set; }

    /// <summary>True while the alarm sits in a queue.</summary>
    public bool IsScheduled => Owner is not null;

    /// <summary>The deadline the alarm was last scheduled for.</summary>
    public TimeSpan Deadline { get; internal set; }

    // Splay-tree node state, owned by AlarmQueue.
    internal AlarmQueue? Owner;
    internal long Sequence;
    internal Alarm? Left;
    internal Alarm? Right;
    internal Alarm? Parent;

    /// <summary>Runs the callback. Called by the core (or the simulator) after the alarm has been removed from its queue.</summary>
    public void Fire() => _callback(this);
}
