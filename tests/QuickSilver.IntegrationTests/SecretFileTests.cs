using System.Globalization;
using System.Security.Cryptography;
using Xunit.Abstractions;

namespace QuickSilver.IntegrationTests;

/// <summary>The built <c>qs</c> tool with datagram authentication: a GMS and nodes given one secret file deliver
/// everything; a node given another secret never registers; a bad secret file is a bad option (exit code 2) naming
/// the flag. The timeouts are hang guards.</summary>
public sealed class SecretFileTests(ITestOutputHelper output) : IDisposable
{
    private const int Messages = 20_000;
    private readonly string _directory = Directory.CreateTempSubdirectory("qs-secret-").FullName;

    private string SecretFile(string name, byte[] secret)
    {
        string path = Path.Combine(_directory, name);
        File.WriteAllText(path, Convert.ToBase64String(secret) + "\n");
        return path;
    }

    [Fact]
    public async Task Processes_sharing_a_secret_file_deliver_everything_and_a_node_with_another_secret_cannot_register()
    {
        string cluster = SecretFile("cluster", RandomNumberGenerator.GetBytes(32));
        string other = SecretFile("other", RandomNumberGenerator.GetBytes(32));
        string gms = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{Tool.FreeUdpPort()}");
        string pool = string.Create(CultureInfo.InvariantCulture, $"239.254.{Random.Shared.Next(1, 250)}.0:{Random.Shared.Next(20_000, 60_000)}");
        string count = Messages.ToString(CultureInfo.InvariantCulture);
        using var server = Tool.Qs("gms", "--listen", gms, "--multicast", pool, "--seconds", "120", "--secret-file", cluster);
        using var publisher = Tool.Qs("node", "--gms", gms, "--join", "load", "--publish", count, "--wait-regions", "2",
            "--seconds", "120", "--linger", "120", "--secret-file", cluster);
        Assert.True(await publisher.WaitForLineAsync("ready", TimeSpan.FromSeconds(60)), $"publisher not ready: {publisher.Stderr}");
        using var receiver = Tool.Qs("node", "--gms", gms, "--join", "load", "--join", "solo", "--expect", count, "--seconds", "120", "--secret-file", cluster);
        using var intruder = Tool.Qs("node", "--gms", gms, "--join", "load", "--seconds", "8", "--secret-file", other);

        Assert.True(await receiver.WaitAsync(TimeSpan.FromSeconds(150)), $"receiver did not finish: {receiver.Stdout}");
        Assert.True(receiver.ExitCode == 0, $"receiver exited with {receiver.ExitCode}: {receiver.Stdout}\n{receiver.Stderr}");
        Assert.Contains($"final load delivered={Messages} anomalies=0", receiver.Stdout, StringComparison.Ordinal);

        Assert.True(await intruder.WaitAsync(TimeSpan.FromSeconds(30)), "the intruder did not stop");
        Assert.Equal(1, intruder.ExitCode);
        Assert.False(intruder.HasLine("ready"), intruder.Stdout);
        Assert.Contains("No GMS answered", intruder.Stderr, StringComparison.Ordinal);
        Assert.Contains("datagram security Authenticate", server.Stdout, StringComparison.Ordinal);
        output.WriteLine(receiver.Stdout.Split('\n')[^1]);
    }

    [Fact]
    public async Task A_secret_file_that_is_not_base64_or_too_short_is_a_bad_option_naming_the_flag()
    {
        string garbage = Path.Combine(_directory, "garbage");
        await File.WriteAllTextAsync(garbage, "not base64 at all!");
        using var bad = Tool.Qs("node", "--gms", "127.0.0.1:1", "--join", "x", "--secret-file", garbage);
        Assert.True(await bad.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(2, bad.ExitCode);
        Assert.Contains("--secret-file", bad.Stderr, StringComparison.Ordinal);

        using var missing = Tool.Qs("gms", "--security", "encrypt");
        Assert.True(await missing.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(2, missing.ExitCode);
        Assert.Contains("--secret-file", missing.Stderr, StringComparison.Ordinal);

        string shortSecret = SecretFile("short", new byte[16]);
        using var tooShort = Tool.Qs("node", "--gms", "127.0.0.1:1", "--join", "x", "--secret-file", shortSecret, "--seconds", "5");
        Assert.True(await tooShort.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(2, tooShort.ExitCode);
        Assert.Contains("--secret-file: the cluster secret must be at least 32 bytes", tooShort.Stderr, StringComparison.Ordinal);

        string good = SecretFile("good", RandomNumberGenerator.GetBytes(32));
        using var badCipher = Tool.Qs("node", "--gms", "127.0.0.1:1", "--join", "x", "--secret-file", good, "--cipher", "rot13", "--seconds", "5");
        Assert.True(await badCipher.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(2, badCipher.ExitCode);
        Assert.Contains("--cipher must be aegis128l or aesgcm", badCipher.Stderr, StringComparison.Ordinal);
    }

    public void Dispose() => Directory.Delete(_directory, recursive: true);
}
