using QuickSilver.Core.Alarms;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Core.Tests;

public sealed class AlarmQueueTests
{
    private static readonly Action<Alarm> NoOp = static _ => { };

    private static Alarm NewAlarm(int id) => new(NoOp, id);

    private static int IdOf(Alarm alarm) => (int)alarm.State!;

    private static TimeSpan Ms(int ms) => TimeSpan.FromMilliseconds(ms);

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    [InlineData(5)]
    public void RandomOperationsMatchSortedSetModel(int seed) => RunAgainstModel(seed, timerLike: false);

    /// <summary>Deadlines that creep forward with time (now + a short delay), as protocol timers do: mostly-sorted
    /// insertions, which make long paths and exercise the splaying.</summary>
    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    [InlineData(5)]
    public void TimerLikeOperationsMatchSortedSetModel(int seed) => RunAgainstModel(seed, timerLike: true);

    private static void RunAgainstModel(int seed, bool timerLike)
    {
        const int Steps = 100_000;
        const int Pool = 2_000;

        var rng = new Random(seed);
        var queue = new AlarmQueue();
        var alarms = new Alarm[Pool];
        for (int i = 0; i < Pool; i++)
        {
            alarms[i] = NewAlarm(i);
        }

        // The model: the set ordered by (deadline, sequence), plus each alarm's current key.
        var model = new SortedSet<(TimeSpan Deadline, long Sequence, int Id)>();
        var keys = new (TimeSpan Deadline, long Sequence, int Id)?[Pool];
        long sequence = 0;
        int largest = 0;

        void Fail(int step, string what) => Assert.Fail($"seed {seed}, timer-like {timerLike}, step {step}: {what}");

        // Random: anywhere in a small range (many ties). Timer-like: virtual time advances 1 ms every 8 steps and
        // alarms are set a little ahead of it.
        TimeSpan NextDeadline(int step) => timerLike ? Ms((step / 8) + rng.Next(0, 200)) : Ms(rng.Next(0, 500));

        void ModelRemove(int id)
        {
            model.Remove(keys[id]!.Value);
            keys[id] = null;
        }

        void CheckPopped(int step, string op, Alarm? popped, (TimeSpan, long, int Id)? expected)
        {
            if (expected is null)
            {
                if (popped is not null)
                {
                    Fail(step, $"{op} returned alarm {IdOf(popped)}, model expected none");
                }

                return;
            }

            if (popped is null)
            {
                Fail(step, $"{op} returned null, model expected alarm {expected.Value.Id}");
                return;
            }

            if (IdOf(popped) != expected.Value.Id)
            {
                Fail(step, $"{op} returned alarm {IdOf(popped)}, model expected {expected.Value.Id}");
            }

            if (popped.IsScheduled)
            {
                Fail(step, $"{op} returned alarm {IdOf(popped)} still marked scheduled");
            }

            ModelRemove(expected.Value.Id);
        }

        for (int step = 0; step < Steps; step++)
        {
            // Alternate growing and shrinking phases so the queue size sweeps from empty to most of the pool.
            bool growing = (step / 10_000) % 2 == 0;
            int op = rng.Next(100);
            int kind = growing
                ? (op < 45 ? 0 : op < 60 ? 1 : op < 70 ? 2 : op < 90 ? 3 : 4)
                : (op < 15 ? 0 : op < 30 ? 1 : op < 45 ? 2 : op < 75 ? 3 : 4);
            if (kind == 0)
            {
                // Schedule a random alarm: new if unscheduled, a reschedule otherwise. Small deadline range: many ties.
                int id = rng.Next(Pool);
                var deadline = NextDeadline(step);
                queue.Schedule(alarms[id], deadline);
                if (keys[id] is not null)
                {
                    ModelRemove(id);
                }

                var key = (deadline, sequence++, id);
                model.Add(key);
                keys[id] = key;
            }
            else if (kind == 1)
            {
                // Reschedule an alarm that is already scheduled: pick one at random by rejection sampling.
                int id = -1;
                for (int tries = 0; tries < 64 && id < 0; tries++)
                {
                    int candidate = rng.Next(Pool);
                    if (keys[candidate] is not null)
                    {
                        id = candidate;
                    }
                }

                if (id >= 0)
                {
                    // Earlier or later than its current deadline, both.
                    var deadline = NextDeadline(step);
                    queue.Schedule(alarms[id], deadline);
                    ModelRemove(id);
                    var key = (deadline, sequence++, id);
                    model.Add(key);
                    keys[id] = key;
                }
            }
            else if (kind == 2)
            {
                int id = rng.Next(Pool);
                bool expected = keys[id] is not null;
                bool cancelled = queue.Cancel(alarms[id]);
                if (cancelled != expected)
                {
                    Fail(step, $"Cancel({id}) returned {cancelled}, model expected {expected}");
                }

                if (expected)
                {
                    ModelRemove(id);
                }

                if (alarms[id].IsScheduled)
                {
                    Fail(step, $"alarm {id} still scheduled after Cancel");
                }
            }
            else if (kind == 3)
            {
                var now = timerLike ? Ms((step / 8) + rng.Next(-20, 20)) : Ms(rng.Next(0, 500));
                var popped = queue.PopDue(now);
                (TimeSpan, long, int Id)? expected = model.Count > 0 && model.Min.Deadline <= now ? model.Min : null;
                CheckPopped(step, $"PopDue({now.TotalMilliseconds}ms)", popped, expected);
            }
            else
            {
                var popped = queue.PopMin();
                (TimeSpan, long, int Id)? expected = model.Count > 0 ? model.Min : null;
                CheckPopped(step, "PopMin", popped, expected);
            }

            if (queue.Count != model.Count)
            {
                Fail(step, $"Count {queue.Count}, model {model.Count}");
            }

            largest = Math.Max(largest, model.Count);

            bool has = queue.TryPeekDeadline(out var peeked);
            if (has != (model.Count > 0) || (has && peeked != model.Min.Deadline))
            {
                Fail(step, $"TryPeekDeadline gave ({has}, {peeked}), model ({model.Count > 0}, {(model.Count > 0 ? model.Min.Deadline : default)})");
            }

            if (step % 5_000 == 0)
            {
                try
                {
                    queue.Validate();
                }
                catch (InvalidOperationException e)
                {
                    Fail(step, "tree invariant broken: " + e.Message);
                }
            }
        }

        queue.Validate();
        Assert.True(largest > 300, $"seed {seed}: the queue only grew to {largest}; the workload is too thin");
        if (timerLike)
        {
            Assert.True(queue.SplayCount > 0, $"seed {seed}: no operation walked far enough to splay");
        }

        // Drain: the rest comes out in model order.
        int drainStep = Steps;
        while (model.Count > 0)
        {
            CheckPopped(drainStep++, "PopMin (drain)", queue.PopMin(), model.Min);
        }

        Assert.True(queue.Count == 0, $"seed {seed}: queue not empty after drain");
        Assert.True(queue.PopMin() is null, $"seed {seed}: PopMin on empty queue returned an alarm");
        for (int i = 0; i < Pool; i++)
        {
            Assert.False(alarms[i].IsScheduled, $"seed {seed}: alarm {i} still scheduled after drain");
        }
    }

    [Fact]
    public void EmptyQueueHasNothingToPeekOrPop()
    {
        var queue = new AlarmQueue();
        Assert.Equal(0, queue.Count);
        Assert.False(queue.TryPeekDeadline(out _));
        Assert.Null(queue.PopMin());
        Assert.Null(queue.PopDue(TimeSpan.MaxValue));
    }

    [Fact]
    public void TiesFireInInsertionOrder()
    {
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, 10).Select(NewAlarm).ToArray();
        foreach (int i in new[] { 3, 1, 4, 0, 5, 9, 2, 6, 8, 7 })
        {
            queue.Schedule(alarms[i], Ms(100));
        }

        // Rescheduling to the same deadline counts as a new insertion: 4 now goes last.
        queue.Schedule(alarms[4], Ms(100));

        var order = new List<int>();
        while (queue.PopDue(Ms(100)) is { } alarm)
        {
            order.Add(IdOf(alarm));
        }

        Assert.Equal("3,1,0,5,9,2,6,8,7,4", Seq(order));
    }

    [Fact]
    public void PopDueTakesOnlyAlarmsAtOrBeforeNow()
    {
        var queue = new AlarmQueue();
        var a = NewAlarm(0);
        var b = NewAlarm(1);
        queue.Schedule(a, Ms(10));
        queue.Schedule(b, Ms(20));

        Assert.Null(queue.PopDue(Ms(9)));
        Assert.Same(a, queue.PopDue(Ms(10)));
        Assert.Null(queue.PopDue(Ms(19)));
        Assert.True(queue.TryPeekDeadline(out var next));
        Assert.Equal(Ms(20), next);
        Assert.Same(b, queue.PopDue(Ms(1_000)));
        Assert.Equal(0, queue.Count);
    }

    [Fact]
    public void RescheduleEarlierMovesToFront()
    {
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, 5).Select(NewAlarm).ToArray();
        for (int i = 0; i < 5; i++)
        {
            queue.Schedule(alarms[i], Ms(100 + (10 * i)));
        }

        queue.Schedule(alarms[4], Ms(50));

        Assert.Equal(5, queue.Count);
        Assert.True(queue.TryPeekDeadline(out var deadline));
        Assert.Equal(Ms(50), deadline);
        Assert.Equal(Ms(50), alarms[4].Deadline);
        Assert.Equal("4,0,1,2,3", Seq(PopAll(queue)));
    }

    [Fact]
    public void RescheduleLaterMovesBack()
    {
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, 5).Select(NewAlarm).ToArray();
        for (int i = 0; i < 5; i++)
        {
            queue.Schedule(alarms[i], Ms(100 + (10 * i)));
        }

        Assert.True(queue.TryPeekDeadline(out var before));
        Assert.Equal(Ms(100), before);

        queue.Schedule(alarms[0], Ms(125));

        Assert.Equal(5, queue.Count);
        Assert.True(queue.TryPeekDeadline(out var after));
        Assert.Equal(Ms(110), after);
        Assert.Equal("1,2,0,3,4", Seq(PopAll(queue)));
    }

    [Fact]
    public void CancelOfUnscheduledAlarmReturnsFalse()
    {
        var queue = new AlarmQueue();
        var a = NewAlarm(0);
        var b = NewAlarm(1);
        Assert.False(queue.Cancel(a));

        queue.Schedule(a, Ms(5));
        queue.Schedule(b, Ms(6));
        Assert.True(a.IsScheduled);
        Assert.True(queue.Cancel(a));
        Assert.False(a.IsScheduled);
        Assert.False(queue.Cancel(a));
        Assert.Equal(1, queue.Count);

        // A popped alarm is no longer scheduled either.
        Assert.Same(b, queue.PopMin());
        Assert.False(b.IsScheduled);
        Assert.False(queue.Cancel(b));
        Assert.Equal(0, queue.Count);
    }

    [Fact]
    public void CancelInTheWrongQueueReturnsFalseAndLeavesTheAlarm()
    {
        var first = new AlarmQueue();
        var second = new AlarmQueue();
        var a = NewAlarm(0);
        first.Schedule(a, Ms(5));

        Assert.False(second.Cancel(a));
        Assert.True(a.IsScheduled);
        Assert.Equal(1, first.Count);
        Assert.Same(a, first.PopMin());
    }

    [Fact]
    public void SchedulingIntoASecondQueueThrows()
    {
        var first = new AlarmQueue();
        var second = new AlarmQueue();
        var a = NewAlarm(0);
        first.Schedule(a, Ms(5));

        var e = Assert.Throws<InvalidOperationException>(() => second.Schedule(a, Ms(1)));
        Assert.Contains("another AlarmQueue", e.Message, StringComparison.Ordinal);
        Assert.Equal(0, second.Count);
        Assert.Equal(1, first.Count);
        Assert.Equal(Ms(5), a.Deadline);

        // Once cancelled in the first queue it may move.
        Assert.True(first.Cancel(a));
        second.Schedule(a, Ms(1));
        Assert.Same(a, second.PopMin());
    }

    [Fact]
    public void PoppedAlarmCanBeFiredAndRescheduled()
    {
        var queue = new AlarmQueue();
        int fired = 0;
        var alarm = new Alarm(a =>
        {
            fired++;
            if (fired < 3)
            {
                queue.Schedule(a, a.Deadline + Ms(10));
            }
        });

        queue.Schedule(alarm, Ms(10));
        var now = Ms(0);
        while (queue.TryPeekDeadline(out var next))
        {
            now = next;
            queue.PopDue(now)!.Fire();
        }

        Assert.Equal(3, fired);
        Assert.Equal(Ms(30), now);
    }

    [Theory]
    [InlineData("ascending")]
    [InlineData("descending")]
    [InlineData("equal")]
    public void DegenerateSequencesOf100kDoNotOverflowTheStack(string shape)
    {
        const int N = 100_000;
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, N).Select(NewAlarm).ToArray();
        for (int i = 0; i < N; i++)
        {
            int ms = shape switch
            {
                "ascending" => i,
                "descending" => N - i,
                _ => 7,
            };
            queue.Schedule(alarms[i], Ms(ms));
        }

        queue.Validate();
        Assert.Equal(N, queue.Count);
        Assert.True(queue.SplayCount > 0, $"{shape}: sorted insertions never splayed");

        // Cancel from the far end of the degenerate spine, reschedule another deep node, then drain in order.
        var deepest = shape == "descending" ? alarms[0] : alarms[N - 1];
        Assert.True(queue.Cancel(deepest));
        queue.Schedule(alarms[N / 2], TimeSpan.MaxValue);
        queue.Validate();

        var previous = (Deadline: TimeSpan.MinValue, Id: -1);
        int popped = 0;
        while (queue.PopMin() is { } alarm)
        {
            var current = (alarm.Deadline, Id: IdOf(alarm));
            Assert.True(current.Deadline >= previous.Deadline, $"{shape}: out of order at pop {popped}");
            if (shape == "equal" && current.Deadline == previous.Deadline)
            {
                Assert.True(current.Id > previous.Id, $"{shape}: tie out of insertion order at pop {popped}");
            }

            previous = current;
            popped++;
        }

        Assert.Equal(N - 1, popped);
        Assert.Equal(N / 2, previous.Id);
    }

    [Fact]
    public void ClearUnschedulesEverything()
    {
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, 1_000).Select(NewAlarm).ToArray();
        var rng = new Random(11);
        foreach (var a in alarms)
        {
            queue.Schedule(a, Ms(rng.Next(100)));
        }

        queue.Clear();
        Assert.Equal(0, queue.Count);
        Assert.False(queue.TryPeekDeadline(out _));
        Assert.All(alarms, a => Assert.False(a.IsScheduled));
        queue.Validate();

        queue.Schedule(alarms[0], Ms(1));
        Assert.Same(alarms[0], queue.PopMin());
    }

    [Fact]
    public void SteadyStateOperationsDoNotAllocate()
    {
        var queue = new AlarmQueue();
        var alarms = Enumerable.Range(0, 256).Select(NewAlarm).ToArray();
        var deadlines = Enumerable.Range(0, 4_096).Select(i => Ms((i * 7919) % 1_000)).ToArray();

        void Run()
        {
            for (int i = 0; i < deadlines.Length; i++)
            {
                var alarm = alarms[i % alarms.Length];
                queue.Schedule(alarm, deadlines[i]);
                if (i % 3 == 0)
                {
                    queue.Cancel(alarms[(i * 31) % alarms.Length]);
                }

                if (i % 5 == 0)
                {
                    queue.PopDue(deadlines[(i * 13) % deadlines.Length]);
                }

                queue.TryPeekDeadline(out _);
            }

            while (queue.PopMin() is not null)
            {
            }
        }

        Run(); // warm up (JIT)
        Assert.Equal(0, Property.FewestAllocated(Run));
    }

    private static string Seq(IEnumerable<int> items) => string.Join(",", items);

    private static int[] PopAll(AlarmQueue queue)
    {
        var ids = new List<int>();
        while (queue.PopMin() is { } alarm)
        {
            ids.Add(IdOf(alarm));
        }

        return ids.ToArray();
    }
}
