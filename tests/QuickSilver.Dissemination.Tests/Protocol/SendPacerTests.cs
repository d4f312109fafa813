using QuickSilver.Dissemination.Protocol;

namespace QuickSilver.Dissemination.Tests.Protocol;

public class SendPacerTests
{
    private static readonly TimeSpan Nominal = TimeSpan.FromTicks(100); // 10 µs
    private static readonly TimeSpan MaxLag = TimeSpan.FromMilliseconds(20);

    /// <summary>Sends due every <see cref="Nominal"/> that the core gets out every <paramref name="actual"/>, until
    /// the pacer forgives a debt; returns the debt and leaves <paramref name="now"/> at that send.</summary>
    private static TimeSpan SendUntilSlip(SendPacer pacer, ref TimeSpan now, TimeSpan actual, int limit = 100_000)
    {
        var due = now;
        for (int i = 0; i < limit; i++)
        {
            var forgiven = pacer.OnSent(due, now);
            if (forgiven > TimeSpan.Zero)
            {
                return forgiven;
            }

            due += pacer.Interval;
            now += actual;
        }

        return TimeSpan.Zero;
    }

    [Fact]
    public void ACoreSlowerThanTheCapSlipsAndTheIntervalBecomesItsShare()
    {
        var pacer = new SendPacer(Nominal, MaxLag, () => 2);
        var now = TimeSpan.Zero;
        pacer.Resume(now);
        var forgiven = SendUntilSlip(pacer, ref now, TimeSpan.FromTicks(500)); // the core sends every 50 µs
        Assert.True(forgiven > MaxLag, $"forgave {forgiven}");
        Assert.Equal(1, pacer.Slips);

        // 50 µs a datagram for the whole core, two busy channels: each gets 100 µs, plus 5 %.
        Assert.InRange(pacer.Interval.Ticks, 1040, 1060);
    }

    [Fact]
    public void OnScheduleTheIntervalShrinksBackToTheCapAndNoFurther()
    {
        var pacer = new SendPacer(Nominal, MaxLag, () => 1);
        var now = TimeSpan.Zero;
        pacer.Resume(now);
        SendUntilSlip(pacer, ref now, TimeSpan.FromTicks(400));
        var slowed = pacer.Interval;
        Assert.True(slowed > Nominal * 3);

        // The core frees up: every send on time, for two seconds.
        var end = now + TimeSpan.FromSeconds(2);
        var previous = slowed;
        bool shrank = false;
        while (now < end)
        {
            Assert.Equal(TimeSpan.Zero, pacer.OnSent(now, now));
            Assert.True(pacer.Interval <= previous);
            shrank |= pacer.Interval < previous;
            previous = pacer.Interval;
            now += pacer.Interval;
        }

        Assert.True(shrank);
        Assert.Equal(Nominal, pacer.Interval); // halved per 100 ms: back at the cap within 2 s, never below it
    }

    [Fact]
    public void OnePauseOfTheCoreForgivesTheDebtAndKeepsTheRate()
    {
        var pacer = new SendPacer(Nominal, MaxLag, () => 1);
        pacer.Resume(TimeSpan.Zero);
        var now = TimeSpan.Zero;
        for (int i = 0; i < 5; i++)
        {
            pacer.OnSent(now, now);
            now += Nominal;
        }

        // Descheduled for 30 ms: too few datagrams since the window began to measure a rate.
        var forgiven = pacer.OnSent(now, now + TimeSpan.FromMilliseconds(30));
        Assert.Equal(TimeSpan.FromMilliseconds(30), forgiven);
        Assert.Equal(Nominal, pacer.Interval);
    }

    /// <summary>A core that keeps up with its share is stalled for 60 ms (a loaded machine descheduled the process):
    /// the debt is forgiven and the rate kept within the 5 % margin, since the stall says nothing about how fast the
    /// core sends. Measured with the stall inside the window, the interval went to about four times its share.</summary>
    [Fact]
    public void AStallOfTheCoreIsForgivenWithoutCuttingTheRate()
    {
        var pacer = new SendPacer(Nominal, MaxLag, () => 2);
        var now = TimeSpan.Zero;
        pacer.Resume(now);
        while (pacer.Slips < 10 && SendUntilSlip(pacer, ref now, TimeSpan.FromTicks(500)) > TimeSpan.Zero && pacer.Interval.Ticks < 1040)
        {
        }

        var share = pacer.Interval;
        Assert.InRange(share.Ticks, 1040, 1060);

        // 40 ms on schedule at the share (both channels send once per interval), then a 60 ms stall.
        var due = now;
        for (int i = 0; i < 400; i++)
        {
            Assert.Equal(TimeSpan.Zero, pacer.OnSent(due, now));
            Assert.Equal(TimeSpan.Zero, pacer.OnSent(due, now));
            due += pacer.Interval;
            now = due;
        }

        long slips = pacer.Slips;
        var kept = pacer.Interval;
        var forgiven = pacer.OnSent(due, due + TimeSpan.FromMilliseconds(60));
        Assert.Equal(TimeSpan.FromMilliseconds(60), forgiven);
        Assert.Equal(slips + 1, pacer.Slips);
        Assert.True(pacer.Interval.Ticks <= kept.Ticks * 1.06, $"the interval went from {kept.Ticks} to {pacer.Interval.Ticks} ticks");
    }

    [Fact]
    public void LatenessWithinTheLimitIsCaughtUpNotForgiven()
    {
        var pacer = new SendPacer(Nominal, MaxLag, () => 1);
        pacer.Resume(TimeSpan.Zero);
        Assert.Equal(TimeSpan.Zero, pacer.OnSent(TimeSpan.Zero, MaxLag));
        Assert.Equal(0, pacer.Slips);
    }
}
