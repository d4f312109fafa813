using System.Collections.Concurrent;
using System.Diagnostics;
using QuickSilver.Core.Downcalls;
using QuickSilver.Core.Feeds;
using Xunit.Abstractions;

namespace QuickSilver.Core.Tests;

public sealed class BufferedFeedTests(ITestOutputHelper output)
{
    // Only a hang guard: nothing here asserts on speed.
    private static readonly TimeSpan HangGuard = TimeSpan.FromMinutes(3);

    /// <summary>A stand-in for the core's downcall queue: posted work waits until the test's "core" thread runs it.</summary>
    private sealed class FakeCore : ICoreDispatcher
    {
        private readonly ConcurrentQueue<(Action<object?> Action, object? State)> _posted = new();
        private int _failuresLeft;
        private int _attempts;
        private int _accepted;

        /// <summary>The managed thread id that counts as the core thread (none by default).</summary>
        public int CoreThreadId { get; set; } = -1;

        public bool IsCoreThread => Environment.CurrentManagedThreadId == CoreThreadId;

        public int Attempts => Volatile.Read(ref _attempts);

        public int Accepted => Volatile.Read(ref _accepted);

        public int Pending => _posted.Count;

        /// <summary>Makes the next <paramref name="count"/> posts fail, as a full downcall queue would.</summary>
        public void FailNext(int count) => Volatile.Write(ref _failuresLeft, count);

        public bool TryPost(Action<object?> action, object? state)
        {
            Interlocked.Increment(ref _attempts);
            if (Volatile.Read(ref _failuresLeft) > 0 && Interlocked.Decrement(ref _failuresLeft) >= 0)
            {
                return false;
            }

            _posted.Enqueue((action, state));
            Interlocked.Increment(ref _accepted);
            return true;
        }

        public int RunPosted()
        {
            int ran = 0;
            while (_posted.TryDequeue(out var work))
            {
                work.Action(work.State);
                ran++;
            }

            return ran;
        }
    }

    private sealed class Rig
    {
        public Rig(int capacity)
        {
            Feed = new BufferedFeed<int>(capacity, Core);
            Channel = Set.Register(Feed);
            Feed.Attach(Channel);
        }

        public FakeCore Core { get; } = new();

        public FeedSet<IFeed<int>> Set { get; } = new();

        public BufferedFeed<int> Feed { get; }

        public IFeedChannel Channel { get; }

        /// <summary>One pass of a core loop: run downcalls, then pull from active feeds until none is active.</summary>
        public List<int> Pump()
        {
            var pulled = new List<int>();
            Core.RunPosted();
            while (Set.TryNext(out var channel, out var feed))
            {
                if (feed.TryPull(out int item))
                {
                    pulled.Add(item);
                }
                else
                {
                    Set.Deactivate(channel);
                }
            }

            return pulled;
        }
    }

    private static string Seq(IEnumerable<int> items) => string.Join(",", items);

    private static bool CompletedAtOnce(ValueTask sent) => sent.IsCompletedSuccessfully;

    [Fact]
    public void ItemsArePulledInOrder()
    {
        var rig = new Rig(16);
        for (int i = 0; i < 10; i++)
        {
            Assert.True(rig.Feed.TrySend(i));
        }

        Assert.Equal(10, rig.Feed.Count);
        Assert.Equal("0,1,2,3,4,5,6,7,8,9", Seq(rig.Pump()));
        Assert.Equal(0, rig.Feed.Count);
        Assert.False(rig.Channel.IsActive);
        Assert.Equal(0, rig.Core.Attempts); // the feed never went idle while it had data: no downcalls
    }

    [Fact]
    public void AnIdleFeedIsWokenByExactlyOneDowncall()
    {
        var rig = new Rig(16);
        Assert.Empty(rig.Pump());
        Assert.False(rig.Channel.IsActive);

        Assert.True(rig.Feed.TrySend(1));
        Assert.True(rig.Feed.TrySend(2));
        Assert.True(rig.Feed.TrySend(3));
        Assert.Equal(1, rig.Core.Accepted);
        Assert.False(rig.Channel.IsActive); // not until the core runs the downcall

        Assert.Equal("1,2,3", Seq(rig.Pump()));
        Assert.Equal(1, rig.Core.Accepted);

        // The next idle period costs one more.
        Assert.True(rig.Feed.TrySend(4));
        Assert.Equal(2, rig.Core.Accepted);
        Assert.Equal("4", Seq(rig.Pump()));
    }

    [Fact]
    public void FullBufferMakesTrySendReturnFalse()
    {
        var rig = new Rig(4);
        Assert.Equal(4, rig.Feed.Capacity);
        for (int i = 0; i < 4; i++)
        {
            Assert.True(rig.Feed.TrySend(i));
        }

        Assert.False(rig.Feed.TrySend(4));
        Assert.Equal(4, rig.Feed.Count);

        Assert.True(rig.Feed.TryPull(out int first));
        Assert.Equal(0, first);
        Assert.True(rig.Feed.TrySend(4));
        Assert.False(rig.Feed.TrySend(5));
        Assert.Equal("1,2,3,4", Seq(rig.Pump()));
    }

    [Fact]
    public async Task SendAsyncWaitsForSpaceThenCompletesAfterAPull()
    {
        var rig = new Rig(4);
        for (int i = 0; i < 4; i++)
        {
            Assert.True(rig.Feed.TrySend(i));
        }

        var pending = rig.Feed.SendAsync(99);
        Assert.False(pending.IsCompleted); // buffer full and nobody pulls: it cannot complete

        // Record whether the sender's continuation runs inline inside the core's pull.
        int pullingThread = -1;
        bool ranInsidePull = false;
        var task = pending.AsTask();
        var observed = task.ContinueWith(
            _ => ranInsidePull = Environment.CurrentManagedThreadId == Volatile.Read(ref pullingThread),
            CancellationToken.None,
            TaskContinuationOptions.ExecuteSynchronously,
            TaskScheduler.Default);

        Volatile.Write(ref pullingThread, Environment.CurrentManagedThreadId);
        rig.Core.CoreThreadId = Environment.CurrentManagedThreadId;
        Assert.True(rig.Feed.TryPull(out int first));
        Volatile.Write(ref pullingThread, -1);
        Assert.Equal(0, first);

        await task.WaitAsync(HangGuard);
        await observed.WaitAsync(HangGuard);
        Assert.False(ranInsidePull, "the sender's continuation ran inline on the core thread");

        Assert.Equal("1,2,3,99", Seq(rig.Pump()));
    }

    [Fact]
    public async Task SendAsyncCompletesSynchronouslyWhenThereIsRoom()
    {
        var rig = new Rig(4);
        var sent = rig.Feed.SendAsync(5);
        Assert.True(sent.IsCompletedSuccessfully);
        await sent;
        Assert.Equal("5", Seq(rig.Pump()));
    }

    [Fact]
    public async Task SendAsyncCanBeCancelledWhileWaiting()
    {
        var rig = new Rig(2);
        Assert.True(rig.Feed.TrySend(1));
        Assert.True(rig.Feed.TrySend(2));

        using var cts = new CancellationTokenSource();
        var pending = rig.Feed.SendAsync(3, cts.Token).AsTask();
        Assert.False(pending.IsCompleted);
        await cts.CancelAsync();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => pending.WaitAsync(HangGuard));

        // The cancelled item never entered the buffer.
        Assert.Equal("1,2", Seq(rig.Pump()));

        var already = rig.Feed.SendAsync(4, cts.Token);
        Assert.True(already.IsCanceled);
        Assert.Empty(rig.Pump());
    }

    [Fact]
    public async Task SendAfterCompleteThrows()
    {
        var rig = new Rig(4);
        Assert.True(rig.Feed.TrySend(1));
        rig.Feed.Complete();
        rig.Feed.Complete(); // idempotent
        Assert.True(rig.Feed.IsCompleted);

        var e = Assert.Throws<InvalidOperationException>(() => rig.Feed.TrySend(2));
        Assert.Contains("Complete", e.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<InvalidOperationException>(async () => await rig.Feed.SendAsync(3));

        // What was buffered before Complete is still delivered.
        Assert.Equal("1", Seq(rig.Pump()));
    }

    [Fact]
    public async Task CompleteFailsSendersWaitingForSpace()
    {
        var rig = new Rig(2);
        Assert.True(rig.Feed.TrySend(1));
        Assert.True(rig.Feed.TrySend(2));
        var pending = rig.Feed.SendAsync(3).AsTask();
        Assert.False(pending.IsCompleted);

        rig.Feed.Complete();
        await Assert.ThrowsAsync<InvalidOperationException>(() => pending.WaitAsync(HangGuard));
        Assert.Equal("1,2", Seq(rig.Pump()));
    }

    [Fact]
    public void WakeUpRetriesWhenTheDowncallQueueIsFull()
    {
        var rig = new Rig(8);
        Assert.Empty(rig.Pump());

        rig.Core.FailNext(5);
        Assert.True(rig.Feed.TrySend(7));
        Assert.Equal(6, rig.Core.Attempts);
        Assert.Equal(1, rig.Core.Accepted);
        Assert.Equal("7", Seq(rig.Pump()));
    }

    [Fact]
    public void SendOnTheCoreThreadSignalsDirectly()
    {
        var rig = new Rig(8);
        Assert.Empty(rig.Pump());
        rig.Core.CoreThreadId = Environment.CurrentManagedThreadId;

        Assert.True(rig.Feed.TrySend(7));
        Assert.True(rig.Channel.IsActive);
        Assert.Equal(0, rig.Core.Attempts);
        Assert.Equal("7", Seq(rig.Pump()));
    }

    [Fact]
    public void WakeUpThatArrivesBeforeAttachIsReplayedByAttach()
    {
        var core = new FakeCore();
        var set = new FeedSet<IFeed<int>>();
        var feed = new BufferedFeed<int>(8, core);
        var channel = set.Register(feed);

        // The layer pulls before the registrant got round to Attach, finds nothing, deactivates.
        Assert.False(feed.TryPull(out _));
        set.Deactivate(channel);

        Assert.True(feed.TrySend(1));
        Assert.Equal(1, core.RunPosted()); // the signal finds no channel yet
        Assert.False(channel.IsActive);

        feed.Attach(channel);
        Assert.True(channel.IsActive);
        Assert.True(feed.TryPull(out int item));
        Assert.Equal(1, item);

        Assert.Throws<InvalidOperationException>(() => feed.Attach(channel));
    }

    [Fact]
    public void SteadyStateSendAndPullDoNotAllocate()
    {
        var rig = new Rig(64);

        // Senders on the core thread signal directly, so the fake dispatcher (which allocates) stays out of the count;
        // the cross-thread path posts a cached static delegate with the feed as state (see AnIdleFeedIsWokenByExactlyOneDowncall).
        rig.Core.CoreThreadId = Environment.CurrentManagedThreadId;

        void Run()
        {
            for (int round = 0; round < 1_000; round++)
            {
                for (int i = 0; i < 32; i++)
                {
                    rig.Feed.TrySend(i);
                    Assert.True(CompletedAtOnce(rig.Feed.SendAsync(i)));
                }

                while (rig.Set.TryNext(out var channel, out var feed))
                {
                    if (!feed.TryPull(out _))
                    {
                        rig.Set.Deactivate(channel);
                    }
                }
            }
        }

        Run();
        long before = GC.GetAllocatedBytesForCurrentThread();
        Run();
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        Assert.Equal(0, allocated);
        Assert.Equal(0, rig.Core.Attempts);
    }

    [Fact]
    public async Task NoLostWakeUpWithFourProducers()
    {
        const int Producers = 4;
        const int PerProducer = 50_000;
        const int Total = Producers * PerProducer;

        // Small buffer: producers hit back-pressure constantly, and the feed goes idle and wakes up again and again.
        var rig = new Rig(64);
        var received = new int[Producers];
        int duplicatesOrGaps = 0;
        string? firstProblem = null;
        int idlePeriods = 0;
        int continuationsOnCore = 0;
        var coreDone = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var stop = new CancellationTokenSource();

        var core = new Thread(() =>
        {
            try
            {
                rig.Core.CoreThreadId = Environment.CurrentManagedThreadId;
                var guard = Stopwatch.StartNew();
                int total = 0;
                var spin = default(SpinWait);
                while (total < Total)
                {
                    bool worked = rig.Core.RunPosted() > 0;
                    while (rig.Set.TryNext(out var channel, out var feed))
                    {
                        if (!feed.TryPull(out int item))
                        {
                            rig.Set.Deactivate(channel);
                            idlePeriods++;
                            continue;
                        }

                        worked = true;
                        int producer = item >> 24;
                        int sequence = item & 0xFFFFFF;
                        if (sequence != received[producer])
                        {
                            duplicatesOrGaps++;
                            firstProblem ??= $"producer {producer}: expected {received[producer]}, got {sequence}";
                            received[producer] = sequence;
                        }

                        received[producer]++;
                        total++;
                    }

                    if (worked)
                    {
                        spin.Reset();
                    }
                    else
                    {
                        spin.SpinOnce();
                        if ((spin.Count & 255) == 0 && guard.Elapsed > HangGuard)
                        {
                            throw new TimeoutException(
                                $"hang guard: {total} of {Total} received; channel active {rig.Channel.IsActive}, " +
                                $"buffered {rig.Feed.Count}, pending downcalls {rig.Core.Pending}");
                        }
                    }
                }

                coreDone.SetResult();
            }
            catch (Exception e)
            {
                coreDone.SetException(e);
            }
        })
        {
            IsBackground = true,
            Name = "fake core",
        };
        core.Start();

        // Two producers push with TrySend and spin; two await SendAsync.
        var producers = new Task[Producers];
        for (int p = 0; p < Producers; p++)
        {
            int producer = p;
            if (p % 2 == 0)
            {
                producers[p] = Task.Factory.StartNew(
                    () =>
                    {
                        var spin = default(SpinWait);
                        for (int i = 0; i < PerProducer; i++)
                        {
                            while (!rig.Feed.TrySend((producer << 24) | i))
                            {
                                stop.Token.ThrowIfCancellationRequested();
                                spin.SpinOnce();
                            }

                            spin.Reset();
                        }
                    },
                    stop.Token,
                    TaskCreationOptions.LongRunning,
                    TaskScheduler.Default);
            }
            else
            {
                producers[p] = Task.Run(async () =>
                {
                    for (int i = 0; i < PerProducer; i++)
                    {
                        await rig.Feed.SendAsync((producer << 24) | i, stop.Token).ConfigureAwait(false);
                        if (rig.Core.IsCoreThread)
                        {
                            Interlocked.Increment(ref continuationsOnCore);
                        }
                    }
                });
            }
        }

        try
        {
            await coreDone.Task.WaitAsync(HangGuard);
            await Task.WhenAll(producers).WaitAsync(HangGuard);
        }
        finally
        {
            await stop.CancelAsync();
        }

        Assert.True(duplicatesOrGaps == 0, $"{duplicatesOrGaps} out-of-order items; first: {firstProblem}");
        Assert.All(received, r => Assert.Equal(PerProducer, r));
        Assert.Equal(0, continuationsOnCore);
        Assert.Equal(0, rig.Feed.Count);
        Assert.False(rig.Feed.TryPull(out _));
        output.WriteLine($"{Total} items; {rig.Core.Accepted} wake-up downcalls; {idlePeriods} idle pulls");
    }
}
