using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;

namespace QuickSilver.Federation.Tests.Forwarding;

public class DuplicateFilterTests
{
    [Fact]
    public void AgreesWithASetWithinTheWindowAcrossWrapAround()
    {
        var random = new Random(77);
        var filter = new DuplicateFilter();
        var seen = new HashSet<(uint, uint)>();
        var highest = new Dictionary<uint, uint>();
        for (int i = 0; i < 50_000; i++)
        {
            uint origin = (uint)random.Next(1, 4);
            uint top = highest.GetValueOrDefault(origin, uint.MaxValue - 100);
            // Mostly new or slightly old sequences (reordering), sometimes exact repeats; starts near the wrap.
            uint seq = unchecked(top + (uint)random.Next(-200, 50));
            bool expected = seen.Add((origin, seq));
            if (unchecked((int)(seq - top)) > 0)
            {
                highest[origin] = seq;
            }

            Assert.Equal(expected, filter.FirstTime(new GatewayId(origin), seq));
        }
    }

    [Fact]
    public void OlderThanTheWindowCountsAsSeenAndOriginsAreBounded()
    {
        var filter = new DuplicateFilter(maxOrigins: 2);
        Assert.True(filter.FirstTime(new GatewayId(1), 10_000));
        Assert.False(filter.FirstTime(new GatewayId(1), 10_000 - DuplicateFilter.Window));
        Assert.True(filter.FirstTime(new GatewayId(2), 1));
        Assert.True(filter.FirstTime(new GatewayId(3), 1));
        Assert.Equal(2, filter.Origins);
        Assert.Equal(1, filter.Evictions);
    }
}
