using System.Diagnostics;

namespace QuickSilver.Compare;

/// <summary>This process's CPU time so far (user + system, all threads), in µs.</summary>
internal static class ProcessCpu
{
    public static long Micros()
    {
        using var self = Process.GetCurrentProcess();
        return self.TotalProcessorTime.Ticks / 10;
    }
}
