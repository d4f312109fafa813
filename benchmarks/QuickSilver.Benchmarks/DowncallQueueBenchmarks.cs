using System.Collections.Concurrent;
using BenchmarkDotNet.Attributes;
using BenchmarkDotNet.Configs;
using QuickSilver.Core.Downcalls;

namespace QuickSilver.Benchmarks;

/// <summary>
/// The downcall queue (<see cref="BoundedMpscQueue{T}"/> of <see cref="Downcall"/>) against
/// <see cref="ConcurrentQueue{T}"/>: one thread enqueuing and dequeuing in batches, and two producer threads feeding one
/// consumer. Times are per item. The bounded queue makes producers spin when it is full; ConcurrentQueue never refuses,
/// so it grows (and allocates segments) instead.
/// </summary>
[MemoryDiagnoser]
[GroupBenchmarksBy(BenchmarkLogicalGroupRule.ByCategory)]
[CategoriesColumn]
public class DowncallQueueBenchmarks
{
    private const int Capacity = 1_024;
    private const int Batch = 256;
    private const int Rounds = 64;
    private const int SingleThreadItems = Batch * Rounds;
    private const int PerProducer = 100_000;
    private const int Producers = 2;
    private const int ProducedItems = PerProducer * Producers;

    private static readonly Action<object?> NoOp = static _ => { };

    private readonly Downcall _item = new(NoOp, null);
    private BoundedMpscQueue<Downcall> _bounded = null!;
    private ConcurrentQueue<Downcall> _concurrent = null!;
    private ProducerThreads? _boundedProducers;
    private ProducerThreads? _concurrentProducers;

    [GlobalSetup]
    public void Setup()
    {
        _bounded = new BoundedMpscQueue<Downcall>(Capacity);
        _concurrent = new ConcurrentQueue<Downcall>();
        _boundedProducers = new ProducerThreads(Producers, () =>
        {
            var spin = default(SpinWait);
            for (int i = 0; i < PerProducer; i++)
            {
                while (!_bounded.TryEnqueue(_item))
                {
                    spin.SpinOnce(sleep1Threshold: -1);
                }
            }
        });
        _concurrentProducers = new ProducerThreads(Producers, () =>
        {
            for (int i = 0; i < PerProducer; i++)
            {
                _concurrent.Enqueue(_item);
            }
        });
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _boundedProducers?.Dispose();
        _concurrentProducers?.Dispose();
    }

    [BenchmarkCategory("SingleThread"), Benchmark(OperationsPerInvoke = SingleThreadItems)]
    public int BoundedMpscSingleThread()
    {
        int taken = 0;
        for (int round = 0; round < Rounds; round++)
        {
            for (int i = 0; i < Batch; i++)
            {
                _bounded.TryEnqueue(_item);
            }

            while (_bounded.TryDequeue(out _))
            {
                taken++;
            }
        }

        return taken;
    }

    [BenchmarkCategory("SingleThread"), Benchmark(Baseline = true, OperationsPerInvoke = SingleThreadItems)]
    public int ConcurrentQueueSingleThread()
    {
        int taken = 0;
        for (int round = 0; round < Rounds; round++)
        {
            for (int i = 0; i < Batch; i++)
            {
                _concurrent.Enqueue(_item);
            }

            while (_concurrent.TryDequeue(out _))
            {
                taken++;
            }
        }

        return taken;
    }

    [BenchmarkCategory("TwoProducersOneConsumer"), Benchmark(OperationsPerInvoke = ProducedItems)]
    public int BoundedMpscTwoProducers()
    {
        _boundedProducers!.Start();
        int taken = 0;
        var spin = default(SpinWait);
        while (taken < ProducedItems)
        {
            if (_bounded.TryDequeue(out _))
            {
                taken++;
                spin.Reset();
            }
            else
            {
                spin.SpinOnce(sleep1Threshold: -1);
            }
        }

        return taken;
    }

    [BenchmarkCategory("TwoProducersOneConsumer"), Benchmark(Baseline = true, OperationsPerInvoke = ProducedItems)]
    public int ConcurrentQueueTwoProducers()
    {
        _concurrentProducers!.Start();
        int taken = 0;
        var spin = default(SpinWait);
        while (taken < ProducedItems)
        {
            if (_concurrent.TryDequeue(out _))
            {
                taken++;
                spin.Reset();
            }
            else
            {
                spin.SpinOnce(sleep1Threshold: -1);
            }
        }

        return taken;
    }

    /// <summary>Long-lived producer threads that run <c>work</c> once per <see cref="Start"/>, so thread start-up is not measured.</summary>
    private sealed class ProducerThreads : IDisposable
    {
        private readonly Thread[] _threads;
        private readonly SemaphoreSlim _go = new(0);
        private volatile bool _stopping;

        public ProducerThreads(int count, Action work)
        {
            _threads = new Thread[count];
            for (int i = 0; i < count; i++)
            {
                _threads[i] = new Thread(() =>
                {
                    while (true)
                    {
                        _go.Wait();
                        if (_stopping)
                        {
                            return;
                        }

                        work();
                    }
                })
                {
                    IsBackground = true,
                    Name = $"bench producer {i}",
                };
                _threads[i].Start();
            }
        }

        /// <summary>Lets each producer run its work once. The consumer knows they are done when it has every item.</summary>
        public void Start() => _go.Release(_threads.Length);

        public void Dispose()
        {
            _stopping = true;
            _go.Release(_threads.Length);
            foreach (var thread in _threads)
            {
                thread.Join();
            }

            _go.Dispose();
        }
    }
}
