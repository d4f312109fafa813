using System.Diagnostics;
using System.Globalization;

namespace QuickSilver.Tools;

/// <summary>
/// Per-message one-way delays at a receiver and their summary, for the AER/NORM comparison (docs/aer.md, "NORM
/// comparison"). The same definitions as the NORM harness's <c>benchmarks/norm/src/delay_stats.c</c>, so both peers
/// are measured one way:
/// delay(i) = receive time − the send stamp the source wrote into message i (both the machine's monotonic clock:
/// .NET's <see cref="Stopwatch"/> is CLOCK_MONOTONIC on Linux); floor(i) = the smallest delay among messages sent
/// within <c>floorWindow</c> of message i, either side (the path plus any queueing at the source, no repair);
/// extra(i) = delay(i) − floor(i); a message is late (its delivery waited for a repair: it was lost, or came after a
/// lost one in delivery order) when extra(i) &gt; <c>margin</c>. Bounded: at most <c>capacity</c> messages are kept.
/// </summary>
internal sealed class DelayStats(int capacity)
{
    private readonly long[] _sendUs = new long[capacity];
    private readonly long[] _delayUs = new long[capacity];

    public int Count { get; private set; }

    public long FirstSendUs { get; private set; }

    public long LastReceiveUs { get; private set; }

    /// <summary>Now on the monotonic clock, in microseconds.</summary>
    public static long NowUs() => NowNs() / 1000;

    /// <summary>Now on the monotonic clock, in nanoseconds: the stamp a source writes into a message.</summary>
    public static long NowNs() => Stopwatch.Frequency == 1_000_000_000 ? Stopwatch.GetTimestamp() : (long)(Stopwatch.GetTimestamp() * (1_000_000_000.0 / Stopwatch.Frequency));

    public void Add(long sendUs, long receiveUs)
    {
        if (Count == 0)
        {
            FirstSendUs = sendUs;
        }

        LastReceiveUs = receiveUs;
        if (Count < _sendUs.Length)
        {
            _sendUs[Count] = sendUs;
            _delayUs[Count] = receiveUs - sendUs;
            Count++;
        }
    }

    /// <summary>The summary as JSON members (no braces): delay_p50_ms, delay_p95_ms, delay_max_ms, late, extra_mean_ms,
    /// extra_p50_ms, extra_p95_ms, extra_max_ms.</summary>
    public string JsonMembers(double floorWindowMs, double marginMs)
    {
        int n = Count;
        long window = (long)(floorWindowMs * 1000), margin = (long)(marginMs * 1000);
        var sorted = new long[n];
        var extra = new List<long>();
        var deque = new int[Math.Max(n, 1)];
        int head = 0, tail = 0, next = 0;
        double extraSum = 0;
        for (int i = 0; i < n; i++)
        {
            // Sliding minimum over send time [t − window, t + window]; send stamps never decrease.
            while (next < n && _sendUs[next] <= _sendUs[i] + window)
            {
                while (tail > head && _delayUs[deque[tail - 1]] >= _delayUs[next])
                {
                    tail--;
                }

                deque[tail++] = next++;
            }

            while (_sendUs[deque[head]] < _sendUs[i] - window)
            {
                head++;
            }

            long e = _delayUs[i] - _delayUs[deque[head]];
            if (e > margin)
            {
                extra.Add(e);
                extraSum += e;
            }

            sorted[i] = _delayUs[i];
        }

        Array.Sort(sorted);
        extra.Sort();
        var late = extra.ToArray();
        return string.Create(CultureInfo.InvariantCulture,
            $"\"delay_p50_ms\":{Quantile(sorted, 0.5):0.00},\"delay_p95_ms\":{Quantile(sorted, 0.95):0.00},\"delay_max_ms\":{Quantile(sorted, 1):0.00},\"late\":{late.Length},"
            + $"\"extra_mean_ms\":{(late.Length == 0 ? 0 : extraSum / late.Length / 1000):0.00},\"extra_p50_ms\":{Quantile(late, 0.5):0.00},\"extra_p95_ms\":{Quantile(late, 0.95):0.00},\"extra_max_ms\":{Quantile(late, 1):0.00}");
    }

    /// <summary>The q-quantile of a sorted array by nearest rank, in ms; 0 when empty.</summary>
    private static double Quantile(long[] sorted, double q)
    {
        if (sorted.Length == 0)
        {
            return 0;
        }

        long rank = Math.Clamp((long)((q * sorted.Length) + 0.999999) - 1, 0, sorted.Length - 1);
        return sorted[rank] / 1000.0;
    }
}
