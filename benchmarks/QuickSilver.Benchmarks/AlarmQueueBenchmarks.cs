using BenchmarkDotNet.Attributes;
using BenchmarkDotNet.Configs;
using QuickSilver.Core.Alarms;

namespace QuickSilver.Benchmarks;

/// <summary>
/// The alarm splay tree against <see cref="PriorityQueue{TElement, TPriority}"/> (a 4-ary array heap) on the three
/// workloads a core sees: timers that fire, timers that are cancelled, and timers that are pushed back again and again
/// (retransmission and failure-detection timeouts refreshed on every packet).
/// </summary>
/// <remarks>
/// PriorityQueue cannot remove or re-key an element, so the heap side uses lazy deletion, the usual workaround: each
/// alarm carries a stamp with the sequence number of its live entry; cancel sets the stamp to -1 (the "cancelled"
/// flag), reschedule enqueues a new entry with a new sequence, and pops skip entries whose sequence no longer matches.
/// Stale entries stay in the heap until they surface, so the heap pays for cancellations at pop time and grows with
/// reschedules. Every benchmark ends with both queues empty, so both sides do the same logical work.
/// </remarks>
[MemoryDiagnoser]
[GroupBenchmarksBy(BenchmarkLogicalGroupRule.ByCategory)]
[CategoriesColumn]
public class AlarmQueueBenchmarks
{
    private const int ReschedulesPerAlarm = 4;
    private const int OpsPerTick = 16;

    private readonly AlarmQueue _splay = new();
    private readonly PriorityQueue<Alarm, (TimeSpan Deadline, long Sequence)> _heap = new();
    private Alarm[] _alarms = [];
    private TimeSpan[] _deadlines = [];
    private int[] _cancelOrder = [];
    private int[] _reschedulePicks = [];
    private TimeSpan[] _rescheduleDelays = [];
    private long _heapSequence;

    [Params(1_000, 100_000)]
    public int N { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        var rng = new Random(42);
        _alarms = new Alarm[N];
        _deadlines = new TimeSpan[N];
        for (int i = 0; i < N; i++)
        {
            _alarms[i] = new Alarm(static _ => { }, new HeapStamp());
            _deadlines[i] = TimeSpan.FromTicks(rng.NextInt64(0, TimeSpan.TicksPerSecond));
        }

        _cancelOrder = Enumerable.Range(0, N).ToArray();
        rng.Shuffle(_cancelOrder);

        _reschedulePicks = new int[N * ReschedulesPerAlarm];
        _rescheduleDelays = new TimeSpan[N * ReschedulesPerAlarm];
        for (int i = 0; i < _reschedulePicks.Length; i++)
        {
            _reschedulePicks[i] = rng.Next(N);
            _rescheduleDelays[i] = TimeSpan.FromMilliseconds(50 + rng.Next(200));
        }

        // Grow the heap's array once so that steady-state allocation shows up, not first-use growth.
        for (int i = 0; i < N * (ReschedulesPerAlarm + 1); i++)
        {
            _heap.Enqueue(_alarms[i % N], default);
        }

        _heap.Clear();
    }

    [BenchmarkCategory("ScheduleThenPopAll"), Benchmark]
    public int SplayScheduleThenPopAll()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            _splay.Schedule(_alarms[i], _deadlines[i]);
        }

        int fired = 0;
        while (_splay.PopMin() is not null)
        {
            fired++;
        }

        return fired;
    }

    [BenchmarkCategory("ScheduleThenPopAll"), Benchmark(Baseline = true)]
    public int HeapScheduleThenPopAll()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            HeapSchedule(_alarms[i], _deadlines[i]);
        }

        int fired = 0;
        while (HeapPopMin() is not null)
        {
            fired++;
        }

        return fired;
    }

    [BenchmarkCategory("ScheduleThenCancelAll"), Benchmark]
    public int SplayScheduleThenCancelAll()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            _splay.Schedule(_alarms[i], _deadlines[i]);
        }

        int cancelled = 0;
        foreach (int i in _cancelOrder)
        {
            if (_splay.Cancel(_alarms[i]))
            {
                cancelled++;
            }
        }

        return cancelled;
    }

    [BenchmarkCategory("ScheduleThenCancelAll"), Benchmark(Baseline = true)]
    public int HeapScheduleThenCancelAll()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            HeapSchedule(_alarms[i], _deadlines[i]);
        }

        int cancelled = 0;
        foreach (int i in _cancelOrder)
        {
            if (HeapCancel(_alarms[i]))
            {
                cancelled++;
            }
        }

        // Lazy deletion: the cancelled entries are still in the heap; draining them is part of the cost.
        while (HeapPopMin() is not null)
        {
        }

        return cancelled;
    }

    /// <summary>All N alarms scheduled, then 4N reschedules to now + 50..250 ms while virtual time advances 1 ms every 16
    /// operations and due alarms fire; a fired alarm comes back when it is next picked. Ends by draining the queue.</summary>
    [BenchmarkCategory("RescheduleHeavy"), Benchmark]
    public int SplayRescheduleHeavy()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            _splay.Schedule(_alarms[i], _deadlines[i]);
        }

        var now = TimeSpan.Zero;
        int fired = 0;
        for (int op = 0; op < _reschedulePicks.Length; op++)
        {
            _splay.Schedule(_alarms[_reschedulePicks[op]], now + _rescheduleDelays[op]);
            if (op % OpsPerTick == 0)
            {
                now += TimeSpan.FromMilliseconds(1);
                while (_splay.PopDue(now) is not null)
                {
                    fired++;
                }
            }
        }

        while (_splay.PopMin() is not null)
        {
            fired++;
        }

        return fired;
    }

    [BenchmarkCategory("RescheduleHeavy"), Benchmark(Baseline = true)]
    public int HeapRescheduleHeavy()
    {
        for (int i = 0; i < _alarms.Length; i++)
        {
            HeapSchedule(_alarms[i], _deadlines[i]);
        }

        var now = TimeSpan.Zero;
        int fired = 0;
        for (int op = 0; op < _reschedulePicks.Length; op++)
        {
            HeapSchedule(_alarms[_reschedulePicks[op]], now + _rescheduleDelays[op]);
            if (op % OpsPerTick == 0)
            {
                now += TimeSpan.FromMilliseconds(1);
                while (HeapPopDue(now) is not null)
                {
                    fired++;
                }
            }
        }

        while (HeapPopMin() is not null)
        {
            fired++;
        }

        return fired;
    }

    // ---- The heap side: PriorityQueue with lazy deletion (see the class remarks). ----

    private void HeapSchedule(Alarm alarm, TimeSpan deadline)
    {
        // A reschedule just supersedes the old entry: it stays in the heap and is skipped when it surfaces.
        var stamp = (HeapStamp)alarm.State!;
        stamp.Sequence = _heapSequence++;
        _heap.Enqueue(alarm, (deadline, stamp.Sequence));
    }

    private static bool HeapCancel(Alarm alarm)
    {
        var stamp = (HeapStamp)alarm.State!;
        if (stamp.Sequence < 0)
        {
            return false;
        }

        stamp.Sequence = HeapStamp.Cancelled;
        return true;
    }

    private Alarm? HeapPopMin()
    {
        while (_heap.TryDequeue(out var alarm, out var key))
        {
            var stamp = (HeapStamp)alarm.State!;
            if (stamp.Sequence == key.Sequence)
            {
                stamp.Sequence = HeapStamp.Cancelled;
                return alarm;
            }
        }

        return null;
    }

    private Alarm? HeapPopDue(TimeSpan now)
    {
        while (_heap.TryPeek(out var alarm, out var key) && key.Deadline <= now)
        {
            _heap.Dequeue();
            var stamp = (HeapStamp)alarm.State!;
            if (stamp.Sequence == key.Sequence)
            {
                stamp.Sequence = HeapStamp.Cancelled;
                return alarm;
            }
        }

        return null;
    }

    /// <summary>The heap side's per-alarm state: the sequence of the live heap entry, or <see cref="Cancelled"/>.</summary>
    private sealed class HeapStamp
    {
        public const long Cancelled = -1;

        public long Sequence = Cancelled;
    }
}
