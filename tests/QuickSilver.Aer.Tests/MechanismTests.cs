using QuickSilver.Core.Alarms;
using QuickSilver.Core.Io;

namespace QuickSilver.Aer.Tests;

/// <summary>The small mechanisms on their own: the repair cache's byte bound, the loss-rate window, the NAK scheduler's
/// timers and suppression, nominee selection by g, option validation.</summary>
public sealed class MechanismTests
{
    [Fact]
    public void Repair_cache_stays_within_its_byte_bound_and_evicts_oldest_first()
    {
        var cache = new RepairCache(10_000);
        var packet = new byte[1000];
        for (long seq = 1; seq <= 50; seq++)
        {
            Assert.True(cache.Add(seq, packet.AsSpan(0, 900 + (int)(seq % 100))));
            Assert.True(cache.Bytes <= 10_000);
        }

        Assert.True(cache.Evictions > 30);
        Assert.False(cache.Contains(1));
        Assert.True(cache.Contains(50));
        Assert.Equal(cache.Lowest, Enumerable.Range(1, 50).First(s => cache.Contains(s)));
        Assert.False(cache.Add(51, new byte[20_000])); // larger than the whole cache
        cache.Clear();
        Assert.Equal(0, cache.Bytes);
    }

    [Fact]
    public void Loss_rate_window_counts_gaps_over_the_last_n_packets()
    {
        var window = new LossRateWindow(100);
        for (long s = 1; s <= 100; s++)
        {
            if (s % 10 != 0)
            {
                window.OnArrival(s);
            }
        }

        Assert.InRange(window.LossRate, 0.09, 0.11);
        for (long s = 101; s <= 300; s++)
        {
            window.OnArrival(s);
        }

        Assert.Equal(0, window.LossRate); // the losses slid out of the window
    }

    [Fact]
    public void Nak_scheduler_waits_a_random_delay_then_retries_on_timeout_and_is_suppressed_by_upstream()
    {
        var scheduler = new VirtualScheduler();
        var sent = new List<(long Seq, TimeSpan At)>();
        var naks = new NakScheduler(scheduler, new Random(1), 100, seq => sent.Add((seq, scheduler.Now)))
        {
            DelayMax = TimeSpan.FromMilliseconds(20),
            RetryTimeout = TimeSpan.FromMilliseconds(50),
        };

        naks.Missing(5);
        naks.Missing(6);
        naks.Suppress(6); // a NAK for 6 came down from upstream before ours went
        scheduler.RunFor(TimeSpan.FromMilliseconds(21));
        Assert.Equal([5L], sent.Select(s => s.Seq));
        Assert.True(sent[0].At <= TimeSpan.FromMilliseconds(20));

        // No repair within the retry timeout: a new loss, a new random wait, a new NAK (for both).
        scheduler.RunFor(TimeSpan.FromMilliseconds(50 + 21));
        Assert.Equal(3, sent.Count);
        Assert.Equal(2, naks.Timeouts);
        naks.Received(5, repair: true);
        naks.Received(6, repair: true);
        Assert.Equal(0, naks.Count);
        scheduler.RunFor(TimeSpan.FromSeconds(1));
        Assert.Equal(3, sent.Count);
        Assert.Equal(1, naks.Suppressed);
    }

    [Fact]
    public void Nak_scheduler_is_bounded()
    {
        var scheduler = new VirtualScheduler();
        var naks = new NakScheduler(scheduler, new Random(1), 16, _ => { });
        for (long s = 1; s <= 100; s++)
        {
            naks.Missing(s);
            naks.Suppress(1000 + s);
        }

        Assert.Equal(16, naks.Count);
    }

    [Fact]
    public void Nominee_selection_picks_the_highest_g_and_forgets_the_silent_and_the_leaving()
    {
        var sel = new NomineeSelection(10, TimeSpan.FromSeconds(2));
        var a = new NetAddress(0x7F000001, 1);
        var b = new NetAddress(0x7F000002, 1);
        var c = new NetAddress(0x7F000003, 1);
        sel.OnCsm(a, new CongestionStateMessage(1, a, 0.01, 100_000, false), TimeSpan.Zero); // g = 0.1·0.1 = 0.01
        sel.OnCsm(b, new CongestionStateMessage(1, b, 0.09, 50_000, false), TimeSpan.Zero); // g = 0.05·0.3 = 0.015
        sel.OnCsm(c, new CongestionStateMessage(1, c, 0.0, 900_000, false), TimeSpan.Zero); // g = 0
        Assert.Equal(b, sel.Worst(TimeSpan.Zero)!.Value.Receiver);
        sel.OnCsm(b, new CongestionStateMessage(1, b, 0, 0, Leaving: true), TimeSpan.FromSeconds(1));
        Assert.Equal(a, sel.Worst(TimeSpan.FromSeconds(1))!.Value.Receiver);
        sel.OnCsm(c, new CongestionStateMessage(1, c, 0.0, 900_000, false), TimeSpan.FromSeconds(2));
        Assert.Equal(c, sel.Worst(TimeSpan.FromSeconds(2.5))!.Value.Receiver); // a's CSM expired
        sel.Exclude(c, TimeSpan.FromSeconds(10));
        Assert.Null(sel.Worst(TimeSpan.FromSeconds(3)));
    }

    [Theory]
    [InlineData("SpmInterval")]
    [InlineData("SpmTimeout")]
    [InlineData("RepairCacheBytes")]
    [InlineData("MaxWindow")]
    [InlineData("CsmTimeout")]
    [InlineData("UnnominatedRate")]
    [InlineData("RtoMax")]
    public void Bad_options_fail_at_start_naming_the_option(string option)
    {
        var bad = option switch
        {
            "SpmInterval" => new AerOptions { SpmInterval = TimeSpan.Zero },
            "SpmTimeout" => new AerOptions { SpmTimeout = TimeSpan.FromMilliseconds(50) },
            "RepairCacheBytes" => new AerOptions { RepairCacheBytes = 10 },
            "MaxWindow" => new AerOptions { MaxWindow = 1 },
            "CsmTimeout" => new AerOptions { CsmTimeout = TimeSpan.FromMilliseconds(100) },
            "UnnominatedRate" => new AerOptions { UnnominatedRate = 0 },
            _ => new AerOptions { RtoMax = TimeSpan.FromMilliseconds(1) },
        };
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new AerLayer(bad));
        Assert.Contains("AerOptions." + option, e.Message, StringComparison.Ordinal);
    }
}
