using BenchmarkDotNet.Running;

// Run all:   dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- --filter '*'
// Run some:  dotnet run -c Release --project benchmarks/QuickSilver.Benchmarks -- --filter '*AlarmQueue*'
BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(args);

internal sealed partial class Program;
