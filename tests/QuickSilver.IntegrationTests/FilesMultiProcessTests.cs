using System.Globalization;
using System.Net;
using System.Net.Sockets;

namespace QuickSilver.IntegrationTests;

/// <summary><c>qs files serve</c> and four <c>qs files get</c> processes over a TCP request channel and loopback IP
/// multicast: every client writes byte-identical files, and bad options are refused naming the option.</summary>
public sealed class FilesMultiProcessTests : IDisposable
{
    private readonly string _root = Path.Combine(Path.GetTempPath(), "qs-files-" + Guid.NewGuid().ToString("N"));

    public FilesMultiProcessTests() => Directory.CreateDirectory(_root);

    [Fact]
    public async Task Four_clients_get_byte_identical_files_over_loopback_multicast()
    {
        string source = Path.Combine(_root, "src");
        Directory.CreateDirectory(Path.Combine(source, "sub"));
        var random = new Random(17);
        var files = new Dictionary<string, byte[]> { ["big.bin"] = new byte[2_500_000], ["sub/mid.bin"] = new byte[333_333], ["tiny.txt"] = new byte[10] };
        foreach (var (name, bytes) in files)
        {
            random.NextBytes(bytes);
            await File.WriteAllBytesAsync(Path.Combine(source, name), bytes);
        }

        string listen = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{FreeTcpPort()}");
        ushort port = Tool.FreeUdpPort();
        string group = string.Create(CultureInfo.InvariantCulture, $"239.255.{random.Next(100, 200)}.1:{port}");
        using var server = Tool.Qs("files", "serve", source, "--listen", listen, "--multicast", group, "--seconds", "120", "--json");
        Assert.True(await server.WaitForLineAsync("{\"event\":\"serving\"", TimeSpan.FromSeconds(30)), "server did not start: " + server.Stderr);

        var clients = Enumerable.Range(0, 4).Select(i => Tool.Qs("files", "get", "big.bin", "sub/mid.bin", "tiny.txt", "--out", Path.Combine(_root, "out" + i), "--server", listen, "--json", "--timeout", "60")).ToList();
        try
        {
            foreach (var (client, i) in clients.Select((c, i) => (c, i)))
            {
                Assert.True(await client.WaitAsync(TimeSpan.FromSeconds(90)), $"client {i} did not finish: {client.Tail(3)}");
                Assert.True(client.ExitCode == 0, $"client {i} exited {client.ExitCode}: {client.Tail(3)} {client.Stderr}");
                Assert.True(client.HasLine("{\"event\":\"summary\",\"complete\":true"), client.Tail(3));
                foreach (var (name, bytes) in files)
                {
                    var got = await File.ReadAllBytesAsync(Path.Combine(_root, "out" + i, name));
                    Assert.True(bytes.AsSpan().SequenceEqual(got), $"client {i}: {name} differs");
                }

                Assert.False(File.Exists(Path.Combine(_root, "out" + i, "big.bin.qsparts")), "the resume marks are removed once the file verifies");
            }
        }
        finally
        {
            foreach (var c in clients)
            {
                c.Dispose();
            }
        }
    }

    [Fact]
    public async Task A_client_killed_mid_transfer_resumes_from_the_pages_on_disk()
    {
        string source = Path.Combine(_root, "src");
        Directory.CreateDirectory(source);
        var bytes = new byte[3_000_000];
        new Random(23).NextBytes(bytes);
        await File.WriteAllBytesAsync(Path.Combine(source, "big.bin"), bytes);
        string listen = string.Create(CultureInfo.InvariantCulture, $"127.0.0.1:{FreeTcpPort()}");
        string group = string.Create(CultureInfo.InvariantCulture, $"239.255.201.1:{Tool.FreeUdpPort()}");
        // 4 channels at 150,000 B/s: the file takes about 5 s, so the client can be killed part way.
        using var server = Tool.Qs("files", "serve", source, "--listen", listen, "--multicast", group, "--rate", "150000", "--packet-payload", "500", "--page-size", "30000", "--seconds", "120", "--json");
        Assert.True(await server.WaitForLineAsync("{\"event\":\"serving\"", TimeSpan.FromSeconds(30)), "server did not start: " + server.Stderr);
        string output = Path.Combine(_root, "out");
        string marks = Path.Combine(output, "big.bin.qsparts");
        int Held() => File.Exists(marks) ? File.ReadAllBytes(marks).Skip(44).Count(b => b != 0) : 0;
        using (var first = Tool.Qs("files", "get", "big.bin", "--out", output, "--server", listen, "--json", "--timeout", "60"))
        {
            var clock = System.Diagnostics.Stopwatch.StartNew();
            while (Held() < 20 && clock.Elapsed < TimeSpan.FromSeconds(30))
            {
                await Task.Delay(50);
            }
        } // killed here

        int held = Held();
        Assert.InRange(held, 20, 99); // part of the file's 100 pages is on disk
        Assert.False(File.Exists(Path.Combine(output, "big.bin")));
        using var second = Tool.Qs("files", "get", "big.bin", "--out", output, "--server", listen, "--json", "--timeout", "60");
        Assert.True(await second.WaitAsync(TimeSpan.FromSeconds(90)), "the restarted client did not finish");
        Assert.True(second.ExitCode == 0, second.Tail(3) + second.Stderr);
        Assert.Equal(bytes, await File.ReadAllBytesAsync(Path.Combine(output, "big.bin")));
        Assert.False(File.Exists(marks));
        var summary = second.Tail(1);
        int received = int.Parse(System.Text.RegularExpressions.Regex.Match(summary, "\"pagesReceived\":(\\d+)").Groups[1].Value, CultureInfo.InvariantCulture);
        Assert.True(received == 100 - held, $"the restarted client received {received} pages; it had {held} of 100 on disk ({summary})");
    }

    [Theory]
    [InlineData(new[] { "files", "serve", "/nonexistent-dir-qs" }, "DIR")]
    [InlineData(new[] { "files", "serve", ".", "--page-size", "30100" }, "--page-size")]
    [InlineData(new[] { "files", "serve", ".", "--packet-payload", "2000" }, "--packet-payload")]
    [InlineData(new[] { "files", "serve", ".", "--packet-payload", "1400", "--page-size", "30000" }, "--page-size")]
    [InlineData(new[] { "files", "serve", ".", "--multicast", "127.0.0.1:5000" }, "--multicast")]
    [InlineData(new[] { "files", "get", "a", "--out", "/tmp/x", "--capacity", "0" }, "--capacity")]
    [InlineData(new[] { "files", "get", "a", "--out", "/tmp/x", "--coalesce-us", "100001" }, "--coalesce-us")]
    [InlineData(new[] { "files", "get", "../escape", "--out", "/tmp/qs-files-x", "--server", "127.0.0.1:1" }, "outside")]
    public async Task A_bad_option_exits_with_code_2_and_names_it(string[] args, string option)
    {
        using var tool = Tool.Qs(args);
        Assert.True(await tool.WaitAsync(TimeSpan.FromSeconds(60)), "did not exit");
        Assert.Equal(2, tool.ExitCode);
        Assert.Contains(option, tool.Stderr, StringComparison.Ordinal);
    }

    private static int FreeTcpPort()
    {
        var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        int port = ((IPEndPoint)listener.LocalEndpoint).Port;
        listener.Stop();
        return port;
    }

    public void Dispose()
    {
        try
        {
            Directory.Delete(_root, recursive: true);
        }
        catch (IOException)
        {
        }
    }
}
