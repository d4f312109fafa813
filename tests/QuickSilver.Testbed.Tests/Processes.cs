using System.Diagnostics;

namespace QuickSilver.Testbed.Tests;

/// <summary>Running the repository's scripts and tools as processes, for the testbed's tests.</summary>
internal static class Processes
{
    /// <summary>The repository's root (the directory holding QuickSilver.sln).</summary>
    public static readonly string Root = FindRoot();

    public static (int Code, string Output) Run(string script, string[] args, Dictionary<string, string> env, TimeSpan timeout)
    {
        using var process = Start(Path.Combine(Root, script), args, env);
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        if (!process.WaitForExit(timeout))
        {
            process.Kill(entireProcessTree: true);
            return (-1, $"{script} {string.Join(' ', args)} timed out");
        }

        return (process.ExitCode, stdout.Result + stderr.Result);
    }

    public static Process Start(string file, string[] args, Dictionary<string, string> env)
    {
        var info = new ProcessStartInfo(file) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in args)
        {
            info.ArgumentList.Add(a);
        }

        foreach (var (k, v) in env)
        {
            info.Environment[k] = v;
        }

        return Process.Start(info)!;
    }

    private static string FindRoot()
    {
        var dir = new DirectoryInfo(AppContext.BaseDirectory);
        while (dir is not null && !File.Exists(Path.Combine(dir.FullName, "QuickSilver.sln")))
        {
            dir = dir.Parent;
        }

        return dir?.FullName ?? throw new InvalidOperationException("QuickSilver.sln not found above the test assembly");
    }
}
