using QuickSilver.Compare.Passes;

namespace QuickSilver.Compare.Tests;

/// <summary>The JGroups harness with a tiny count: one sender and one receiver process, two groups. JGroups is reliable,
/// so every message must arrive. Skipped (not failed) where java/javac or Debian's JGroups jar is not installed; the
/// test never installs anything (benchmarks/jgroups/build.sh does).</summary>
public sealed class JGroupsSmokeTests
{
    [SkippableFact]
    public async Task The_java_harness_delivers_every_message()
    {
        string? missing = JavaHarness.MissingReason();
        Skip.If(missing is not null, $"JGroups smoke test skipped: {missing}");

        var build = Directory.CreateTempSubdirectory("qsperf-");
        try
        {
            string? classPath = await JavaHarness.CompileAsync(build.FullName);
            Assert.NotNull(classPath);
            var point = new ExperimentPoint(Receivers: 1, Groups: 2, Size: 100, Loss: 0, Messages: 500, Warmup: 100);
            var result = await JGroupsPass.RunAsync(new PassContext(point, TimeSpan.FromSeconds(90)), classPath);

            Assert.True(result.AllArrived, $"{result.MinReceived}/{point.Total} arrived: {result.Note}");
            Assert.Equal(point.Messages, result.MinMeasured);
        }
        finally
        {
            build.Delete(recursive: true);
        }
    }
}
