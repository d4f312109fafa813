namespace QuickSilver.Core.Alarms;

/// <summary>
/// The alarm queue of QSM §2.5: a splay tree of <see cref="Alarm"/> nodes keyed by (deadline, insertion order).
/// Schedule, cancel, reschedule and pop are O(log n) amortized. Not thread-safe: owned by one core (or the simulator).
/// </summary>
public sealed class AlarmQueue
{
    /// <summary>Number of scheduled alarms.</summary>
    public int Count => throw new NotImplementedException();

    /// <summary>Inserts <paramref name="alarm"/> with <paramref name="deadline"/>. If it is already in this queue it is moved;
    /// if it is in another queue, throws InvalidOperationException. Ties on deadline fire in insertion order.</summary>
    public void Schedule(Alarm alarm, TimeSpan deadline) => throw new NotImplementedException();

    /// <summary>Removes <paramref name="alarm"/>. Returns false if it was not in this queue.</summary>
    public bool Cancel(Alarm alarm) => throw new NotImplementedException();

    /// <summary>The earliest deadline, if any alarm is scheduled.</summary>
    public bool TryPeekDeadline(out TimeSpan deadline) => throw new NotImplementedException();

    /// <summary>Removes and returns the earliest alarm if its deadline is at or before <paramref name="now"/>; otherwise null.
    /// The caller then calls <see cref="Alarm.Fire"/>.</summary>
    public Alarm? PopDue(TimeSpan now) => throw new NotImplementedException();

    /// <summary>Removes and returns the earliest alarm, or null when empty.</summary>
    public Alarm? PopMin() => throw new NotImplementedException();
}
