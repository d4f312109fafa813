using System.Diagnostics;
using System.Net;
using QuickSilver.Core.Io;
using QuickSilver.Dissemination.Hosting;
using QuickSilver.Dissemination.Protocol;

// FileDistribution: serves DIR and fetches every file in it into four clients on this machine, over a TCP request
// channel and loopback IP multicast, in one command:
//     dotnet run --project samples/FileDistribution -- DIR [OUT]
// Each client writes OUT/client-N/...; the program checks every copy against the original and exits 0 when all match.
if (args.Length is < 1 or > 2)
{
    Console.Error.WriteLine("usage: FileDistribution DIR [OUT]");
    return 2;
}

string dir = args[0];
if (!Directory.Exists(dir))
{
    Console.Error.WriteLine($"DIR: '{dir}' is not a directory.");
    return 2;
}

string output = args.Length > 1 ? args[1] : Path.Combine(Path.GetTempPath(), "qs-file-distribution");
var options = new ServerOptions { DataChannels = 4, ChannelBytesPerSecond = 2_000_000, AnnounceDelay = TimeSpan.FromMilliseconds(20) };
using var timeout = new CancellationTokenSource(TimeSpan.FromMinutes(10));
await using var server = await FileServerHost.StartAsync(dir, options, new IPEndPoint(IPAddress.Loopback, 0), NetAddress.Loopback(0), timeout.Token);
var names = server.Catalog.Files.Select(f => f.Name).ToArray();
Console.WriteLine($"serving {names.Length} files ({server.Catalog.Files.Sum(f => f.Size):N0} bytes) on {server.LocalEndPoint}");

var clock = Stopwatch.StartNew();
var clients = new List<FileClientHost>();
for (int i = 0; i < 4; i++)
{
    clients.Add(await FileClientHost.StartAsync(server.LocalEndPoint, names, Path.Combine(output, $"client-{i}"), new ClientOptions { StallTimeout = TimeSpan.FromSeconds(5) }, NetAddress.Loopback(0), timeout.Token));
}

bool allDone = false;
while (!allDone && !timeout.IsCancellationRequested)
{
    await Task.Delay(500);
    var progress = await Task.WhenAll(clients.Select(c => c.ProgressAsync()));
    allDone = progress.All(p => p.Complete);
    Console.WriteLine(string.Join("  ", progress.Select((p, i) => $"client {i}: {p.Files.Sum(f => f.PagesHeld)}/{p.Files.Sum(f => f.Pages)} pages")));
}

foreach (var c in clients)
{
    await c.DisposeAsync();
}

int bad = 0;
for (int i = 0; i < 4; i++)
{
    foreach (var name in names)
    {
        if (!File.ReadAllBytes(Path.Combine(dir, name)).AsSpan().SequenceEqual(File.ReadAllBytes(Path.Combine(output, $"client-{i}", name))))
        {
            Console.WriteLine($"client {i}: {name} differs");
            bad++;
        }
    }
}

Console.WriteLine(allDone && bad == 0 ? $"all four clients have every file, byte for byte, in {clock.Elapsed.TotalSeconds:N1} s (in {output})" : "FAILED");
return allDone && bad == 0 ? 0 : 1;
