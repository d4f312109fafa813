using BenchmarkDotNet.Running;
using QuickSilver.Benchmarks;

// Run all:   dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- --filter '*'
// Run some:  dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- --filter '*AlarmQueue*'
// End to end per message over loopback (not BenchmarkDotNet):
//            dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- pathcost --size 100 --messages 6000000
// Before and after Stack v2, back to back: benchmarks/pathcost-before-after.sh (docs/benchmarks.md, issue 10)
// The replicated GMS (docs/membership.md, "Replicated GMS"): failover time and view-change latency, 1 vs 3 replicas:
//            dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- gmsfailover --kills 20 [--raft-tls]
//            dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- gmsviewchange --joins 20 --groups 10000 --repeats 3
if (args.Length > 0 && args[0] is "gmsfailover" or "gmsviewchange")
{
    return await ReplicatedGmsBench.RunAsync(args);
}

// The group send path (GroupSendBenchmarks) for a fixed number of messages, outside BenchmarkDotNet: one process and a
// fixed amount of work, to alternate with another build run by run or to profile (`perf record`):
//            dotnet benchmarks/QuickSilver.Benchmarks/bin/Release/net10.0/QuickSilver.Benchmarks.dll groupsend --groups 1024 --messages 20000000
if (args.Length > 0 && args[0] == "groupsend")
{
    return GroupSendBenchmarks.RunFixed(args[1..]);
}

if (args.Length > 0 && args[0] == "pathcost")
{
    return await PathCost.RunAsync(args[1..]);
}

BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(args);
return 0;

internal sealed partial class Program;
