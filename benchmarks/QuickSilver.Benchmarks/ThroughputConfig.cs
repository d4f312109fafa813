using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Engines;
using BenchmarkDotNet.Jobs;

namespace QuickSilver.Benchmarks;

/// <summary>For benchmarks whose one invocation moves thousands of datagrams between threads: few, long iterations.</summary>
public sealed class ThroughputConfig : ManualConfig
{
    public ThroughputConfig()
    {
        AddJob(Job.Default
            .WithStrategy(RunStrategy.Monitoring)
            .WithLaunchCount(1)
            .WithWarmupCount(2)
            .WithIterationCount(8)
            .WithInvocationCount(4)
            .WithUnrollFactor(1));
    }
}
