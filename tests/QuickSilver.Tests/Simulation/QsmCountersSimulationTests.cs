using System.Diagnostics.Metrics;
using QuickSilver.Simulation;
using QuickSilver.Transport.Simulation;

namespace QuickSilver.Tests.Simulation;

/// <summary>
/// The per-sender series of <see cref="QsmCounters"/> stay one per region the node sends into (issue 12, bounded
/// memory; docs/security.md, "Bounds"): a publisher is cut off from everyone three times for longer than the GMS's failure
/// timeout, so the GMS drops it and it registers again under a new id each time, and its region layer retires its
/// senders and makes new ones. The counters then report the new sender of each region only. Before, they kept every
/// sender they were told of: four series with the same tags after three registrations, three of them frozen.
/// </summary>
public sealed class QsmCountersSimulationTests
{
    [Fact]
    public void A_node_that_registers_again_reports_one_series_per_region_not_one_per_id()
    {
        var cluster = new NodeCluster(1301, new LinkOptions());
        var nodes = cluster.AddNodes(3);
        cluster.Join(nodes, "prices");
        cluster.SettleViews("prices", nodes);
        var publisher = nodes[0];
        string tag = "qsm-counters-sim-" + Guid.NewGuid().ToString("N");
        using var counters = new QsmCounters(tag);
        publisher.Sim.TryPost(_ => counters.Attach(publisher.Region!), null);
        publisher.PublishNumbered("prices", 100_000, perSecond: 500);
        cluster.Network.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(1, counters.Senders);

        for (int cut = 0; cut < 3; cut++)
        {
            int ids = publisher.Ids.Count;
            cluster.Network.Partition([publisher.Sim], cluster.Network.Nodes.Where(n => n != publisher.Sim));
            cluster.Network.RunFor(cluster.GmsOptions.FailureTimeout * 3);
            cluster.Network.Heal();
            cluster.Require(() => publisher.Ids.Count > ids && publisher.Registered && publisher.Region!.Senders.Count == 1,
                TimeSpan.FromSeconds(30), $"registration {cut + 2} and its new sender");
        }

        Assert.Equal(4, publisher.Ids.Count);
        Assert.Equal(1, counters.Senders);
        Assert.Equal(1, Series(tag, "qs.qsm.target_rate"));
    }

    /// <summary>How many series of <paramref name="instrument"/> carry node tag <paramref name="node"/> now.</summary>
    private static int Series(string node, string instrument)
    {
        int count = 0;
        using var listener = new MeterListener();
        listener.InstrumentPublished = (published, l) =>
        {
            if (published.Meter.Name == QsmCounters.MeterName && published.Name == instrument)
            {
                l.EnableMeasurementEvents(published);
            }
        };
        listener.SetMeasurementEventCallback<double>((_, _, tags, _) =>
        {
            foreach (var t in tags)
            {
                if (t.Key == "node" && Equals(t.Value, node))
                {
                    count++;
                }
            }
        });
        listener.Start();
        listener.RecordObservableInstruments();
        return count;
    }
}
