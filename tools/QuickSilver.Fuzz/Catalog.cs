namespace QuickSilver.Fuzz;

/// <summary>One decoder family to fuzz: its name on the command line, the function afl-fuzz drives (it throws
/// <see cref="FuzzFailure"/> when a property breaks, so afl-fuzz records the input as a crash), and seed inputs.</summary>
internal sealed record FuzzTarget(string Name, string About, FuzzAction Run, Func<IEnumerable<byte[]>> Seeds);

internal delegate void FuzzAction(ReadOnlySpan<byte> input);

internal static class Catalog
{
    public static readonly IReadOnlyList<FuzzTarget> All =
    [
        new("header", "common header, dispatcher, class-id frames (span codec and MessagePack wrapper)", CoreTargets.Header, CoreTargets.HeaderSeeds),
        new("region-wire", "region data packets, NAK/pull ranges, collective ACKs", QsmTargets.RunRegionWire, QsmTargets.RegionWireSeeds),
        new("token", "region tokens (sections, NAK sets)", QsmTargets.RunToken, QsmTargets.TokenSeeds),
        new("nak-set", "NAK sets and the set operations applied to peers' sets", QsmTargets.RunNakSet, QsmTargets.NakSetSeeds),
        new("group-wire", "group records packed in a region packet", QsmTargets.RunGroupWire, QsmTargets.GroupWireSeeds),
        new("region-layer", "a region stack (reliable unicast + region layer) fed a sequence of hostile datagrams", LayerTargets.RegionLayer, LayerTargets.RegionLayerSeeds),
        new("reliable", "reliable unicast segments and ACKs, and an endpoint fed a sequence of them", TransportTargets.Reliable, TransportTargets.ReliableSeeds),
        new("probe", "multicast probe packets, receiver and sender", TransportTargets.Probe, TransportTargets.ProbeSeeds),
        new("gms", "GMS messages (MessagePack) and the update conversion", MembershipTargets.Gms, MembershipTargets.GmsSeeds),
    ];

    public static FuzzTarget? Find(string name) => All.FirstOrDefault(t => t.Name == name);
}

/// <summary>A broken property: the decoder threw, allocated beyond its bound, or accepted what it must not.</summary>
internal sealed class FuzzFailure(string message, Exception? inner = null) : Exception(message, inner);

internal static class Expect
{
    private static bool _warmingUp;

    /// <summary>Runs the target's static set-up and its seeds with the checks off.</summary>
    public static void WarmUp(FuzzTarget target)
    {
        System.Runtime.CompilerServices.RuntimeHelpers.RunClassConstructor(target.Run.Method.DeclaringType!.TypeHandle);
        _warmingUp = true;
        try
        {
            foreach (var seed in target.Seeds())
            {
                target.Run(seed);
            }
        }
        finally
        {
            _warmingUp = false;
        }
    }

    /// <summary>Runs <paramref name="target"/> on <paramref name="input"/>; a property broken the first time is checked
    /// once more on the same input, and only a second failure counts. The first time a path runs in a process can cost
    /// allocations that are not the input's (the first exception of a kind loads its message resources, a generic
    /// instantiation is built): seen as a false "allocation bound" crash after 89 executions of the header target.</summary>
    public static void Run(FuzzTarget target, ReadOnlySpan<byte> input)
    {
        try
        {
            target.Run(input);
        }
        catch (FuzzFailure)
        {
            target.Run(input);
        }
    }

    public static void That(bool condition, string message)
    {
        if (!condition && !_warmingUp)
        {
            throw new FuzzFailure(message);
        }
    }

    /// <summary>Bytes allocated on this thread so far (pair with <see cref="AllocatedAtMost"/>).</summary>
    public static long Mark() => GC.GetAllocatedBytesForCurrentThread();

    public static void AllocatedAtMost(long mark, long bound, string what)
    {
        long allocated = GC.GetAllocatedBytesForCurrentThread() - mark;
        That(allocated <= bound, $"{what} allocated {allocated} bytes, above its bound of {bound}");
    }

    /// <summary>Fails unless the two encodings are equal (allocating nothing unless they differ).</summary>
    public static void SameBytes(ReadOnlySpan<byte> expected, ReadOnlySpan<byte> actual, string what)
    {
        if (!expected.SequenceEqual(actual) && !_warmingUp)
        {
            throw new FuzzFailure($"{what} does not round-trip: {Convert.ToHexString(expected[..Math.Min(64, expected.Length)])} vs {Convert.ToHexString(actual[..Math.Min(64, actual.Length)])}");
        }
    }
}
