using BenchmarkDotNet.Attributes;
using QuickSilver.Core;
using QuickSilver.Core.Alarms;

namespace QuickSilver.Benchmarks;

/// <summary>
/// The core's event dispatch rate (alarms fired per second on the core thread) and downcall throughput
/// (downcalls posted from another thread and run on the core). One operation = one alarm or one downcall.
/// </summary>
[MemoryDiagnoser]
[Config(typeof(ThroughputConfig))]
public class CoreDispatchBenchmarks
{
    private const int Events = 100_000;

    private QuickSilverCore? _core;
    private Alarm? _alarm;
    private readonly ManualResetEventSlim _done = new();
    private int _remaining;
    private Action<object?>? _countDown;
    private Action<object?>? _startChain;

    [GlobalSetup]
    public void Setup()
    {
        _core = QuickSilverCore.Start(new CoreOptions { Name = "bench-dispatch" });
        _alarm = new Alarm(OnAlarm);
        _countDown = _ =>
        {
            if (--_remaining == 0)
            {
                _done.Set();
            }
        };
        _startChain = _ => _core.Schedule(_alarm, _core.Now);
    }

    /// <summary>An alarm that reschedules itself, due at once, <see cref="Events"/> times.</summary>
    [Benchmark(OperationsPerInvoke = Events)]
    public void AlarmDispatch()
    {
        _remaining = Events;
        _done.Reset();
        _core!.TryPost(_startChain!, null);
        _done.Wait();
    }

    /// <summary><see cref="Events"/> downcalls posted by this thread (spinning when the queue is full), run by the core.</summary>
    [Benchmark(OperationsPerInvoke = Events)]
    public void DowncallThroughput()
    {
        _remaining = Events;
        _done.Reset();
        for (int i = 0; i < Events; i++)
        {
            while (!_core!.TryPost(_countDown!, null))
            {
                Thread.Yield();
            }
        }

        _done.Wait();
    }

    [GlobalCleanup]
    public void Cleanup() => _core?.Dispose();

    private void OnAlarm(Alarm alarm)
    {
        if (--_remaining == 0)
        {
            _done.Set();
            return;
        }

        _core!.Schedule(alarm, _core.Now);
    }
}
