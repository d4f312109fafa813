using System.Diagnostics;
using System.IO.Compression;
using System.Xml.Linq;

namespace QuickSilver.Hosting.Tests;

/// <summary>
/// The libraries pack, and an application that knows them only as packages restores from a local folder feed and runs.
/// Offline: the restore's sources are the folder the packages were packed into and this machine's global packages
/// folder (which holds every dependency once the solution has restored), and it restores into a packages folder of
/// its own, so a stale QuickSilver of the same version in the global cache can never be used. Packs the outputs of the
/// build this test runs in (<c>--no-build</c>, same configuration). Hang guards only.
/// </summary>
[Collection(nameof(PackageTests))]
public sealed class PackageTests
{
    private static readonly string[] Libraries = ["QuickSilver.Core", "QuickSilver.Transport", "QuickSilver.Membership", "QuickSilver.Qsm", "QuickSilver.Aer", "QuickSilver.Dissemination", "QuickSilver.Federation", "QuickSilver", "QuickSilver.Hosting"];

    [Fact]
    public async Task Every_library_packs_with_its_metadata_and_a_sample_restores_from_the_local_feed_and_runs()
    {
        var output = new DirectoryInfo(AppContext.BaseDirectory.TrimEnd(Path.DirectorySeparatorChar));
        string configuration = output.Parent!.Name;
        var root = output;
        while (root is not null && !File.Exists(Path.Combine(root.FullName, "QuickSilver.sln")))
        {
            root = root.Parent;
        }

        Assert.NotNull(root);
        var work = Directory.CreateTempSubdirectory("qs-pack-");
        try
        {
            string feed = Path.Combine(work.FullName, "feed");
            var pack = await RunAsync(root.FullName, TimeSpan.FromSeconds(180), "pack", Path.Combine(root.FullName, "QuickSilver.sln"),
                "-c", configuration, "--no-build", "-o", feed, "-p:CI=false");
            Assert.True(pack.ExitCode == 0, pack.Output);

            string version = "";
            foreach (var library in Libraries)
            {
                string package = Directory.GetFiles(feed, $"{library}.*.nupkg").Single(p => Path.GetFileName(p)[(library.Length + 1)..][0] is >= '0' and <= '9');
                version = Path.GetFileNameWithoutExtension(package)[(library.Length + 1)..];
                using var zip = ZipFile.OpenRead(package);
                var entries = zip.Entries.Select(e => e.FullName).ToHashSet();
                Assert.Contains($"lib/net10.0/{library}.dll", entries);
                Assert.Contains($"lib/net10.0/{library}.xml", entries);     // XML documentation
                Assert.Contains("README.md", entries);
                Assert.Contains("LICENSE", entries);
                using var nuspecStream = zip.GetEntry($"{library}.nuspec")!.Open();
                var metadata = XDocument.Load(nuspecStream).Root!.Elements().Single(e => e.Name.LocalName == "metadata");
                string Field(string name) => metadata.Elements().SingleOrDefault(e => e.Name.LocalName == name)?.Value ?? "";
                Assert.Equal(library, Field("id"));
                Assert.Equal("MIT", Field("license"));
                Assert.Equal("README.md", Field("readme"));
                Assert.False(string.IsNullOrWhiteSpace(Field("description")), library);
                if (Directory.Exists(Path.Combine(root.FullName, ".git")) || File.Exists(Path.Combine(root.FullName, ".git")))
                {
                    Assert.NotNull(metadata.Elements().SingleOrDefault(e => e.Name.LocalName == "repository")); // SourceLink's commit
                }
                Assert.True(File.Exists(Path.ChangeExtension(package, ".snupkg")), $"{library} has no symbol package");
            }

            string consumer = Path.Combine(work.FullName, "consumer");
            Directory.CreateDirectory(consumer);
            foreach (var file in Directory.GetFiles(Path.Combine(AppContext.BaseDirectory, "PackageConsumer")))
            {
                File.Copy(file, Path.Combine(consumer, Path.GetFileName(file)));
            }

            string globalPackages = Environment.GetEnvironmentVariable("NUGET_PACKAGES") is { Length: > 0 } custom
                ? custom
                : Path.Combine(Environment.GetFolderPath(Environment.SpecialFolder.UserProfile), ".nuget", "packages");
            await File.WriteAllTextAsync(Path.Combine(consumer, "NuGet.Config"), $"""
                <?xml version="1.0" encoding="utf-8"?>
                <configuration>
                  <packageSources>
                    <clear />
                    <add key="local" value="{feed}" />
                    <add key="cache" value="{globalPackages}" />
                  </packageSources>
                  <config>
                    <add key="globalPackagesFolder" value="{Path.Combine(work.FullName, "packages")}" />
                  </config>
                </configuration>
                """);
            // The package version this solution restored (the informational version, "10.0.14+sha"): the assembly version
            // is 10.0.0 for every 10.0.x package, and a feed that no longer serves 10.0.0 made the consumer's restore
            // fail with NU1603 (warnings are errors).
            string hostingVersion = typeof(Microsoft.Extensions.Hosting.IHost).Assembly
                .GetCustomAttributes(typeof(System.Reflection.AssemblyInformationalVersionAttribute), false)
                .OfType<System.Reflection.AssemblyInformationalVersionAttribute>().FirstOrDefault()?.InformationalVersion.Split('+')[0] ?? "10.0.14";
            var run = await RunAsync(consumer, TimeSpan.FromSeconds(240), "run", "-c", "Release",
                $"-p:QuickSilverVersion={version}", $"-p:HostingVersion={hostingVersion}", "--",
                Random.Shared.Next(30000, 60000).ToString(System.Globalization.CultureInfo.InvariantCulture),
                $"239.252.{Random.Shared.Next(1, 200)}.0:{Random.Shared.Next(20000, 60000)}");
            Assert.True(run.ExitCode == 0, run.Output);
            Assert.Contains("consumer ok 1000", run.Output, StringComparison.Ordinal);
            Assert.True(Directory.Exists(Path.Combine(work.FullName, "packages", "quicksilver", version)), "QuickSilver did not come from the feed");
        }
        finally
        {
            work.Delete(recursive: true);
        }
    }

    internal static async Task<(int ExitCode, string Output)> RunAsync(string directory, TimeSpan guard, params string[] args)
    {
        var start = new ProcessStartInfo(Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host ? host : "dotnet")
        {
            WorkingDirectory = directory,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        foreach (var arg in args)
        {
            start.ArgumentList.Add(arg);
        }

        start.Environment["DOTNET_CLI_TELEMETRY_OPTOUT"] = "1";
        start.Environment["DOTNET_NOLOGO"] = "1";
        start.Environment["MSBUILDDISABLENODEREUSE"] = "1";        // no build nodes outlive the test
        start.Environment["DOTNET_CLI_DO_NOT_USE_MSBUILD_SERVER"] = "1";
        using var process = Process.Start(start)!;
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        try
        {
            await process.WaitForExitAsync().WaitAsync(guard);
        }
        catch (TimeoutException)
        {
            process.Kill(entireProcessTree: true);
            throw new TimeoutException($"dotnet {string.Join(' ', args)} did not finish within {guard}: {await stdout}");
        }

        return (process.ExitCode, $"dotnet {string.Join(' ', args)}\n{await stdout}\n{await stderr}");
    }
}

[CollectionDefinition(nameof(PackageTests), DisableParallelization = true)]
public sealed class PackageCollection;
