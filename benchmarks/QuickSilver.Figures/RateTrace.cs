using QuickSilver.Core.Diagnostics;
using QuickSilver.Qsm.Simulation;

namespace QuickSilver.Figures;

/// <summary>One step of a run (Fig. 17): what every member delivered, the first sender's rate controller, and the
/// receive-queue drops, per second of virtual time over the step.</summary>
internal sealed record RateSample(double Second, double DeliveredPerSecond, double TargetRate, double ReceiverRate,
    double ActualRate, double ReceiveDropsPerSecond);

/// <summary>Samples a cluster after each step of a run.</summary>
internal sealed class RateTrace(RegionCluster cluster)
{
    private readonly List<RateSample> _samples = new();
    private TimeSpan _last;
    private long _delivered;
    private long _drops;

    public IReadOnlyList<RateSample> Samples => _samples;

    public void Sample()
    {
        double dt = (cluster.Network.Now - _last).TotalSeconds;
        if (dt <= 0)
        {
            return;
        }

        long delivered = cluster.DeliveredToAll();
        long drops = cluster.Network.Drops[DropReason.ReceiveBufferFull];
        var rate = cluster.Senders[0].Sender!.RateController;
        _samples.Add(new RateSample(cluster.Network.Now.TotalSeconds, (delivered - _delivered) / dt, rate.TargetRate,
            rate.ReceiverRate, rate.ActualRate, (drops - _drops) / dt));
        (_last, _delivered, _drops) = (cluster.Network.Now, delivered, drops);
    }
}
