using QuickSilver.Dissemination.Pages;
using QuickSilver.Dissemination.Protocol;
using QuickSilver.Dissemination.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Dissemination.Tests.Protocol;

/// <summary>Builds simulated dissemination runs with seeded random files.</summary>
internal static class SimFixtures
{
    public static ServerOptions FastServer(int channels = 4) => new()
    {
        DataChannels = channels,
        ChannelBytesPerSecond = 400_000,
        AnnounceDelay = TimeSpan.FromMilliseconds(20),
        AnnounceSpacing = TimeSpan.FromMilliseconds(5),
        HeartbeatInterval = TimeSpan.FromMilliseconds(500),
    };

    public static ClientOptions FastClient(int capacity = 255) => new()
    {
        Capacity = capacity,
        NakDelayMax = TimeSpan.FromMilliseconds(30),
        EndGrace = TimeSpan.FromMilliseconds(10),
        StallTimeout = TimeSpan.FromSeconds(5),
    };

    /// <summary>Files of the given sizes with random content from <paramref name="seed"/>, named f0, f1, ...</summary>
    public static MemoryPageSource Files(ServerOptions options, int seed, params int[] sizes)
    {
        var random = new Random(seed);
        var source = new MemoryPageSource(new FileCatalog(options.Pages));
        for (int i = 0; i < sizes.Length; i++)
        {
            var bytes = new byte[sizes[i]];
            random.NextBytes(bytes);
            source.Add($"f{i}", bytes);
        }

        return source;
    }

    public static LinkOptions Lossy(double loss) => new() { LossRate = loss, BandwidthBitsPerSecond = 100_000_000 };

    public static string[] Names(MemoryPageSource files) => files.Catalog.Files.Select(f => f.Name).ToArray();

    /// <summary>Asserts the client's store holds every requested file byte for byte.</summary>
    public static void AssertIdentical(DisseminationSim sim, SimClient client, IEnumerable<string> names)
    {
        foreach (var name in names)
        {
            Assert.True(sim.Files.Catalog.TryFind(name, out int file));
            var expected = new byte[sim.Files.Catalog.Files[file].Size];
            sim.Files.Read(file, 0, expected);
            var got = ((MemoryPageStore)client.Store).Contents(name);
            Assert.NotNull(got);
            Assert.True(expected.AsSpan().SequenceEqual(got), $"client on node {client.Node.Index}: {name} differs");
        }
    }
}
