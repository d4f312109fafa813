using QuickSilver.Compare;
using QuickSilver.Compare.Output;

namespace QuickSilver.Compare.Tests;

/// <summary>The ramp analysis (issue 11's ramp target): windows placed on the sender's clock, the steady rate from the
/// middle half, the first window at 90 % of it; and the timeline's file format.</summary>
public sealed class RampOutTests
{
    [Fact]
    public void The_time_to_90_percent_counts_from_the_first_send_and_the_steady_rate_ignores_the_ramp_and_the_tail()
    {
        // 1,000 ms of arrivals, the first 5 ms after the first send: 10 a ms rising to 100 a ms over the first 50 ms, then
        // 100 a ms, and a slow tail in the last 100 ms.
        var perMs = new int[1000];
        for (int i = 0; i < perMs.Length; i++)
        {
            perMs[i] = i < 50 ? 10 + (90 * i / 50) : i >= 900 ? 5 : 100;
        }

        var s = RampOut.Analyze(0, firstSendMicros: 1_000_000, firstArrivalMicros: 1_005_000, perMs);
        Assert.Equal(100_000, s.SteadyRate);
        Assert.Equal(100, s.Milliseconds.Length);
        Assert.Equal(15, s.Milliseconds[0], 6); // the first window ends 5 + 10 ms after the first send
        Assert.NotNull(s.MillisecondsTo90);
        // Window 40–50 ms of the receiver's run averages 89.7 a ms (just short of 90 % of 100); 50–60 ms is the first at 90 %
        // or more, and it ends 5 + 60 ms after the first send.
        Assert.Equal(65, s.MillisecondsTo90!.Value, 6);
    }

    [Fact]
    public void A_receiver_that_never_reaches_90_percent_says_so()
    {
        var s = RampOut.Analyze(1, 0, 0, []);
        Assert.Null(s.MillisecondsTo90);
        Assert.Equal(0, s.SteadyRate);
    }

    [Fact]
    public void A_timeline_round_trips_through_its_text()
    {
        var timeline = new ArrivalTimeline();
        timeline.Arrived(5_000_000);
        timeline.Arrived(5_000_400);
        timeline.Arrived(5_002_100);
        var (first, perMs) = ArrivalTimeline.Parse(timeline.Format());
        Assert.Equal(5_000_000, first);
        Assert.Equal([2, 0, 1], perMs);
    }
}
