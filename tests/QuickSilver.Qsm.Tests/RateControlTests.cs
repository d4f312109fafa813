using QuickSilver.Core.Alarms;
using QuickSilver.Qsm.RateControl;

namespace QuickSilver.Qsm.Tests;

public sealed class RateControlTests
{
    [Fact]
    public void The_estimator_averages_the_last_k_samples()
    {
        var estimator = new RateEstimator(samples: 3, TimeSpan.FromMilliseconds(500));
        Assert.Equal(0, estimator.Rate);
        foreach (int events in new[] { 10, 20, 30, 40 })
        {
            estimator.Count(events);
            estimator.CloseSample();
        }

        // Samples are per second: 20, 40, 60, 80 -> the last three average to 60.
        Assert.Equal(60, estimator.Rate, precision: 9);
    }

    [Fact]
    public void The_target_follows_formula_two()
    {
        var scheduler = new VirtualScheduler();
        var controller = new RateController(scheduler, new RateControlOptions { MinRate = 500, Growth = 0.2 });
        Assert.Equal(500, controller.TargetRate);
        controller.OnReceiverRate(10_000);
        Assert.Equal(12_000, controller.TargetRate, precision: 6);
        controller.OnReceiverRate(100); // (1.2)(100) < μ_min
        Assert.Equal(500, controller.TargetRate);
        controller.OnReceiverRate(double.NaN);
        controller.OnReceiverRate(-5);
        Assert.Equal(500, controller.TargetRate);
    }

    [Fact]
    public void Above_the_loss_threshold_the_target_stops_growing_and_backs_off()
    {
        var scheduler = new VirtualScheduler();
        var controller = new RateController(scheduler, new RateControlOptions { MinRate = 500, Growth = 0.2, LossThreshold = 0.02 });
        controller.OnReceiverRate(10_000, loss: 0.01); // below the threshold: formula (2)
        Assert.Equal(12_000, controller.TargetRate, precision: 6);
        controller.OnReceiverRate(10_000, loss: 0.1); // above: (1 - loss)·μ_rec
        Assert.Equal(9_000, controller.TargetRate, precision: 6);
        controller.OnReceiverRate(400, loss: 0.5); // never below μ_min
        Assert.Equal(500, controller.TargetRate);
        controller.OnReceiverRate(10_000, loss: 1.5); // malformed: ignored
        Assert.Equal(500, controller.TargetRate);
        Assert.Equal(0.5, controller.ReportedLoss);
    }

    /// <summary>A sender that sends whenever it has credit, resuming on CreditAvailable, as a feed would.</summary>
    private sealed class GreedySender
    {
        private readonly RateController _controller;
        private readonly VirtualScheduler _scheduler;
        private readonly Alarm _resume;

        public GreedySender(VirtualScheduler scheduler, RateController controller, int maxPerTurn = int.MaxValue)
        {
            _scheduler = scheduler;
            _controller = controller;
            MaxPerTurn = maxPerTurn;
            _resume = new Alarm(_ => Turn());
            controller.CreditAvailable += () => _scheduler.Schedule(_resume, _scheduler.Now);
        }

        public int MaxPerTurn { get; }
        public long Sent { get; private set; }
        public long MaxBurst { get; private set; }

        public void Turn()
        {
            long burst = 0;
            while (burst < MaxPerTurn && _controller.TryConsume())
            {
                Sent++;
                burst++;
            }

            MaxBurst = Math.Max(MaxBurst, burst);
            if (burst == MaxPerTurn)
            {
                // Throttled by its own scheduling, not by credit: try again a little later.
                _scheduler.ScheduleAfter(_resume, TimeSpan.FromMilliseconds(10));
            }
        }
    }

    [Theory]
    [InlineData(2_000)]
    [InlineData(9_000)]
    [InlineData(50_000)]
    public void A_greedy_sender_holds_the_target_rate(double receiverRate)
    {
        var scheduler = new VirtualScheduler();
        var options = new RateControlOptions();
        var controller = new RateController(scheduler, options);
        controller.OnReceiverRate(receiverRate);
        var sender = new GreedySender(scheduler, controller);
        sender.Turn();

        scheduler.RunFor(TimeSpan.FromSeconds(20)); // warm-up: α settles
        long before = sender.Sent;
        scheduler.RunFor(TimeSpan.FromSeconds(10));
        double rate = (sender.Sent - before) / 10.0;

        Assert.InRange(rate, controller.TargetRate * 0.95, controller.TargetRate * 1.05);
        Assert.True(sender.MaxBurst <= options.Credits, $"burst {sender.MaxBurst} exceeds the credit pool {options.Credits}");
    }

    [Fact]
    public void Alpha_rises_when_the_sender_falls_short_and_is_bounded()
    {
        var scheduler = new VirtualScheduler();
        var options = new RateControlOptions { MaxAlpha = 3 };
        var controller = new RateController(scheduler, options);
        controller.OnReceiverRate(20_000); // target 22,000/s
        var sender = new GreedySender(scheduler, controller, maxPerTurn: 50); // at most 50 per 10 ms = 5,000/s
        sender.Turn();
        scheduler.RunFor(TimeSpan.FromSeconds(30));

        Assert.True(controller.ActualRate < controller.TargetRate);
        Assert.Equal(3, controller.Alpha);
    }

    [Fact]
    public void Bad_options_name_the_option()
    {
        var scheduler = new VirtualScheduler();
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new RateController(scheduler, new RateControlOptions { CreditsLow = 500 }));
        Assert.Contains("CreditsLow", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentOutOfRangeException>(() => new RateController(scheduler, new RateControlOptions { Samples = 0 }));
        Assert.Contains("Samples", e.Message, StringComparison.Ordinal);
    }
}
