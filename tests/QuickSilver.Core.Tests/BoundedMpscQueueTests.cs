using System.Diagnostics;
using QuickSilver.Core.Downcalls;
using QuickSilver.Testing.Fuzz;

namespace QuickSilver.Core.Tests;

public sealed class BoundedMpscQueueTests
{
    // Only a hang guard: the tests never assert anything about speed.
    private static readonly TimeSpan HangGuard = TimeSpan.FromMinutes(3);

    [Theory]
    [InlineData(1, 2)]
    [InlineData(2, 2)]
    [InlineData(3, 4)]
    [InlineData(1_000, 1_024)]
    [InlineData(1_024, 1_024)]
    [InlineData(1_025, 2_048)]
    public void CapacityIsRoundedUpToAPowerOfTwo(int requested, int expected)
    {
        var queue = new BoundedMpscQueue<int>(requested);
        Assert.Equal(expected, queue.Capacity);
        for (int i = 0; i < expected; i++)
        {
            Assert.True(queue.TryEnqueue(i), $"enqueue {i} of {expected}");
        }

        Assert.False(queue.TryEnqueue(-1));
    }

    [Theory]
    [InlineData(0)]
    [InlineData(-1)]
    [InlineData(BoundedMpscQueue<int>.MaxCapacity + 1)]
    public void InvalidCapacityThrows(int capacity)
        => Assert.Throws<ArgumentOutOfRangeException>(() => new BoundedMpscQueue<int>(capacity));

    [Fact]
    public void EmptyQueueReturnsFalse()
    {
        var queue = new BoundedMpscQueue<string>(4);
        Assert.False(queue.TryDequeue(out var item));
        Assert.Null(item);
        Assert.Equal(0, queue.Count);

        Assert.True(queue.TryEnqueue("a"));
        Assert.True(queue.TryDequeue(out item));
        Assert.Equal("a", item);
        Assert.False(queue.TryDequeue(out _));
        Assert.Equal(0, queue.Count);
    }

    [Fact]
    public void FullQueueReturnsFalseUntilTheConsumerMakesRoom()
    {
        var queue = new BoundedMpscQueue<int>(4);
        for (int i = 0; i < 4; i++)
        {
            Assert.True(queue.TryEnqueue(i));
            Assert.Equal(i + 1, queue.Count);
        }

        Assert.False(queue.TryEnqueue(4));
        Assert.False(queue.TryEnqueue(4));
        Assert.Equal(4, queue.Count);

        Assert.True(queue.TryDequeue(out int first));
        Assert.Equal(0, first);
        Assert.True(queue.TryEnqueue(4));
        Assert.False(queue.TryEnqueue(5));

        for (int expected = 1; expected <= 4; expected++)
        {
            Assert.True(queue.TryDequeue(out int item));
            Assert.Equal(expected, item);
        }

        Assert.False(queue.TryDequeue(out _));
    }

    [Fact]
    public void WrapsAroundManyTimesInFifoOrder()
    {
        var queue = new BoundedMpscQueue<long>(8);
        var rng = new Random(7);
        long next = 0;
        long expected = 0;
        for (int round = 0; round < 200_000; round++)
        {
            int burst = rng.Next(0, 9);
            for (int i = 0; i < burst; i++)
            {
                bool room = queue.Count < queue.Capacity;
                Assert.Equal(room, queue.TryEnqueue(next));
                if (room)
                {
                    next++;
                }
            }

            int take = rng.Next(0, 9);
            for (int i = 0; i < take; i++)
            {
                bool any = queue.Count > 0;
                Assert.Equal(any, queue.TryDequeue(out long item));
                if (any)
                {
                    Assert.Equal(expected++, item);
                }
            }

            Assert.Equal(next - expected, queue.Count);
        }

        long laps = next / queue.Capacity;
        Assert.True(laps > 10_000, $"only {laps} laps of the ring");
    }

    [Fact]
    public void SingleThreadedUseDoesNotAllocate()
    {
        var queue = new BoundedMpscQueue<object>(64);
        var payload = new object();

        void Run()
        {
            for (int i = 0; i < 10_000; i++)
            {
                queue.TryEnqueue(payload);
                queue.TryEnqueue(payload);
                queue.TryDequeue(out _);
                queue.TryDequeue(out _);
            }
        }

        Run();
        Assert.Equal(0, Property.FewestAllocated(Run));
    }

    [Fact]
    public void EightProducersOneConsumerLoseNothingAndKeepPerProducerOrder()
    {
        const int Producers = 8;
        const int PerProducer = 125_000;
        const long Total = (long)Producers * PerProducer;

        var queue = new BoundedMpscQueue<long>(1_024);
        using var start = new ManualResetEventSlim(false);
        var failures = new List<Exception>();
        var threads = new Thread[Producers];
        for (int p = 0; p < Producers; p++)
        {
            int producer = p;
            threads[p] = new Thread(() =>
            {
                try
                {
                    start.Wait();
                    var spin = default(SpinWait);
                    for (int i = 0; i < PerProducer; i++)
                    {
                        long item = ((long)producer << 32) | (uint)i;
                        while (!queue.TryEnqueue(item))
                        {
                            spin.SpinOnce();
                        }

                        spin.Reset();
                    }
                }
                catch (Exception e)
                {
                    lock (failures)
                    {
                        failures.Add(e);
                    }
                }
            })
            {
                IsBackground = true,
                Name = $"producer {p}",
            };
            threads[p].Start();
        }

        var next = new int[Producers];
        long received = 0;
        var guard = Stopwatch.StartNew();
        start.Set();
        var idle = default(SpinWait);
        while (received < Total)
        {
            if (!queue.TryDequeue(out long item))
            {
                idle.SpinOnce();
                if ((idle.Count & 1023) == 0 && guard.Elapsed > HangGuard)
                {
                    Assert.Fail($"hang guard: received {received} of {Total} after {guard.Elapsed}");
                }

                continue;
            }

            idle.Reset();
            int producer = (int)(item >> 32);
            int sequence = (int)(uint)item;
            Assert.InRange(producer, 0, Producers - 1);
            if (sequence != next[producer])
            {
                Assert.Fail($"producer {producer}: expected item {next[producer]}, got {sequence} " +
                    (sequence < next[producer] ? "(duplicate or reordered)" : "(lost or reordered)"));
            }

            next[producer]++;
            received++;
        }

        foreach (var thread in threads)
        {
            Assert.True(thread.Join(HangGuard), $"{thread.Name} did not finish");
        }

        Assert.Empty(failures);
        Assert.All(next, n => Assert.Equal(PerProducer, n));
        Assert.False(queue.TryDequeue(out _), "an extra item appeared after all were received");
        Assert.Equal(0, queue.Count);
    }
}
