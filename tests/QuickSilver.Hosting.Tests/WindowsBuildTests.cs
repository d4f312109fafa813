namespace QuickSilver.Hosting.Tests;

/// <summary>
/// The code at least compiles for Windows (issue 14 item 5, the part that can be checked on Linux): a copy of the
/// libraries and the worker sample (an executable with the win-x64 app host) builds for <c>win-x64</c>, and so does
/// QuickSilver.Dissemination, which the worker does not reference (so it was left out before). A copy, so the RID-specific restore never rewrites the obj folders of the build the other
/// tests run from. Nothing here runs on Windows; docs/ecosystem.md says what is and is not tested there.
/// </summary>
[Collection(nameof(PackageTests))]
public sealed class WindowsBuildTests
{
    [Fact]
    public async Task The_libraries_dissemination_and_the_worker_sample_build_for_win_x64()
    {
        var root = new DirectoryInfo(AppContext.BaseDirectory);
        while (root is not null && !File.Exists(Path.Combine(root.FullName, "QuickSilver.sln")))
        {
            root = root.Parent;
        }

        Assert.NotNull(root);
        var work = Directory.CreateTempSubdirectory("qs-win-");
        try
        {
            foreach (var file in new[] { "Directory.Build.props", "Directory.Packages.props", "global.json", "LICENSE" })
            {
                File.Copy(Path.Combine(root.FullName, file), Path.Combine(work.FullName, file));
            }

            Copy(Path.Combine(root.FullName, "src"), Path.Combine(work.FullName, "src"));
            Copy(Path.Combine(root.FullName, "samples", "WorkerService"), Path.Combine(work.FullName, "samples", "WorkerService"));

            var build = await PackageTests.RunAsync(work.FullName, TimeSpan.FromSeconds(240), "build",
                Path.Combine(work.FullName, "samples", "WorkerService", "WorkerService.csproj"),
                "-c", "Release", "-r", "win-x64", "--no-self-contained", "-p:RunAnalyzers=false", "-p:GenerateDocumentationFile=false", "-p:DebugType=none");
            Assert.True(build.ExitCode == 0, build.Output);
            var output = Path.Combine(work.FullName, "samples", "WorkerService", "bin", "Release", "net10.0", "win-x64");
            Assert.True(File.Exists(Path.Combine(output, "WorkerService.exe")), build.Output);
            Assert.True(File.Exists(Path.Combine(output, "QuickSilver.Hosting.dll")), build.Output);

            var dissemination = Path.Combine(work.FullName, "src", "QuickSilver.Dissemination");
            var library = await PackageTests.RunAsync(work.FullName, TimeSpan.FromSeconds(240), "build",
                Path.Combine(dissemination, "QuickSilver.Dissemination.csproj"),
                "-c", "Release", "-r", "win-x64", "--no-self-contained", "-p:RunAnalyzers=false", "-p:GenerateDocumentationFile=false", "-p:DebugType=none");
            Assert.True(library.ExitCode == 0, library.Output);
            Assert.True(File.Exists(Path.Combine(dissemination, "bin", "Release", "net10.0", "win-x64", "QuickSilver.Dissemination.dll")), library.Output);
        }
        finally
        {
            work.Delete(recursive: true);
        }
    }

    /// <summary>Copies a source tree without its bin and obj folders.</summary>
    private static void Copy(string from, string to)
    {
        Directory.CreateDirectory(to);
        foreach (var file in Directory.GetFiles(from))
        {
            File.Copy(file, Path.Combine(to, Path.GetFileName(file)));
        }

        foreach (var directory in Directory.GetDirectories(from))
        {
            string name = Path.GetFileName(directory);
            if (name is not ("bin" or "obj"))
            {
                Copy(directory, Path.Combine(to, name));
            }
        }
    }
}
