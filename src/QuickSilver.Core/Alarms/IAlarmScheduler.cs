using QuickSilver.Core.Time;

namespace QuickSilver.Core.Alarms;

/// <summary>
/// The alarm service a protocol state machine gets from its host: the real core, or a node of the simulated network.
/// All calls are made on the host's (core) thread.
/// </summary>
public interface IAlarmScheduler : IClock
{
    /// <summary>Schedules <paramref name="alarm"/> to fire at the absolute time <paramref name="deadline"/>
    /// (on the <see cref="IClock.Now"/> scale). An alarm already scheduled is moved (rescheduled).</summary>
    void Schedule(Alarm alarm, TimeSpan deadline);

    /// <summary>Cancels <paramref name="alarm"/>. Returns false when it was not scheduled.</summary>
    bool Cancel(Alarm alarm);
}

/// <summary>Convenience extensions over <see cref="IAlarmScheduler"/>.</summary>
public static class AlarmSchedulerExtensions
{
    /// <summary>Schedules <paramref name="alarm"/> to fire <paramref name="delay"/> from now.</summary>
    public static void ScheduleAfter(this IAlarmScheduler scheduler, Alarm alarm, TimeSpan delay)
        => scheduler.Schedule(alarm, scheduler.Now + delay);
}
