namespace QuickSilver.Compare;

/// <summary>Finds, compiles or builds the JGroups harness (benchmarks/jgroups). Only <see cref="BuildWithScriptAsync"/>
/// installs anything (Debian packages, through build.sh); the rest only looks.</summary>
internal static class JavaHarness
{
    public const string JarPath = "/usr/share/java/jgroups.jar";

    /// <summary>The repository root: the nearest folder above this assembly with QuickSilver.sln.</summary>
    public static string? RepoRoot()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "QuickSilver.sln")))
            {
                return dir.FullName;
            }
        }

        return null;
    }

    public static string? HarnessDirectory() => RepoRoot() is { } root ? Path.Combine(root, "benchmarks", "jgroups") : null;

    /// <summary>Why the harness cannot be compiled and run here without installing anything, or null when it can.</summary>
    public static string? MissingReason()
    {
        if (!OnPath("java") || !OnPath("javac"))
        {
            return "java/javac are not installed (benchmarks/jgroups/build.sh installs a JDK)";
        }

        if (!File.Exists(JarPath))
        {
            return $"the JGroups jar {JarPath} is missing (benchmarks/jgroups/build.sh installs Debian's libjgroups-java)";
        }

        return HarnessDirectory() is { } dir && Directory.Exists(Path.Combine(dir, "src")) ? null : "the harness source benchmarks/jgroups/src was not found";
    }

    /// <summary>Compiles the harness into <paramref name="outputDirectory"/>; returns its class path, or null.</summary>
    public static async Task<string?> CompileAsync(string outputDirectory)
    {
        var sources = Directory.GetFiles(Path.Combine(HarnessDirectory()!, "src"), "*.java");
        var (code, _) = await ChildProcess.RunToEndAsync("javac", ["-nowarn", "-cp", JarPath, "-d", outputDirectory, .. sources], TimeSpan.FromMinutes(2));
        return code == 0 ? $"{outputDirectory}:{JarPath}" : null;
    }

    /// <summary>Runs build.sh (installs the JDK and libjgroups-java when missing, compiles); returns the class path, or null.</summary>
    public static async Task<string?> BuildWithScriptAsync()
    {
        if (HarnessDirectory() is not { } dir)
        {
            return null;
        }

        var (code, lines) = await ChildProcess.RunToEndAsync("bash", [Path.Combine(dir, "build.sh")], TimeSpan.FromMinutes(10));
        return code == 0 && lines.Count > 0 ? lines[^1] : null;
    }

    public static string[] JvmArgs(string classPath) => ["-Djava.net.preferIPv4Stack=true", "-Djgroups.bind_addr=127.0.0.1", "-cp", classPath, "QsPerf"];

    private static bool OnPath(string command)
        => (Environment.GetEnvironmentVariable("PATH") ?? "").Split(Path.PathSeparator).Any(d => d.Length > 0 && File.Exists(Path.Combine(d, command)));
}
