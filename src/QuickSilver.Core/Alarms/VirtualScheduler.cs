namespace QuickSilver.Core.Alarms;

/// <summary>
/// A deterministic, single-threaded <see cref="IAlarmScheduler"/> on virtual time: alarms fire in (deadline, insertion)
/// order as <see cref="RunFor"/> advances the clock, with no wall clock and no threads. For unit tests of protocol state
/// machines and small simulations.
/// </summary>
public sealed class VirtualScheduler : IAlarmScheduler
{
    private readonly AlarmQueue _alarms = new();

    public TimeSpan Now { get; private set; }

    public int Pending => _alarms.Count;

    /// <summary>Schedules an alarm; a deadline in the past fires at the current instant.</summary>
    public void Schedule(Alarm alarm, TimeSpan deadline) => _alarms.Schedule(alarm, deadline < Now ? Now : deadline);

    public bool Cancel(Alarm alarm) => _alarms.Cancel(alarm);

    /// <summary>Fires every alarm due within <paramref name="duration"/>, then leaves the clock at its end.</summary>
    public void RunFor(TimeSpan duration)
    {
        var end = Now + duration;
        while (_alarms.TryPeekDeadline(out var next) && next <= end)
        {
            var alarm = _alarms.PopMin()!;
            Now = alarm.Deadline;
            alarm.Fire();
        }

        Now = end;
    }

    /// <summary>Runs in <paramref name="step"/>s until <paramref name="condition"/> holds or <paramref name="limit"/> of
    /// virtual time has passed. Returns whether the condition held.</summary>
    public bool RunUntil(Func<bool> condition, TimeSpan limit, TimeSpan? step = null)
    {
        ArgumentNullException.ThrowIfNull(condition);
        var end = Now + limit;
        var stride = step ?? TimeSpan.FromMilliseconds(10);
        while (!condition())
        {
            if (Now >= end)
            {
                return false;
            }

            RunFor(stride);
        }

        return true;
    }

    /// <summary>Runs <paramref name="action"/> once, <paramref name="delay"/> from now (allocates: for tests and set-up).</summary>
    public void After(TimeSpan delay, Action action)
    {
        ArgumentNullException.ThrowIfNull(action);
        this.ScheduleAfter(new Alarm(_ => action()), delay);
    }
}
