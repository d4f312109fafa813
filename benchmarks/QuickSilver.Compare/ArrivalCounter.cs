namespace QuickSilver.Compare;

/// <summary>
/// What a receiver of any system counts: every message (warm-up and measured, for the delivery check), the measured
/// ones, the arrival time of the first measured message and of the last message (microseconds since the epoch).
/// Safe to call from several receive threads; the first-measured time is the earliest one recorded.
/// </summary>
internal sealed class ArrivalCounter
{
    private long _received;
    private long _measured;
    private long _firstMeasured;
    private long _last;

    public long Received => Interlocked.Read(ref _received);

    public long Measured => Interlocked.Read(ref _measured);

    public long FirstMeasuredMicros => Interlocked.Read(ref _firstMeasured);

    public long LastMicros => Interlocked.Read(ref _last);

    /// <summary>Counts one arrival now; returns the number received so far, this one included.</summary>
    public long Arrived(bool measured) => Arrived(measured, global::QuickSilver.Compare.ResultLine.NowMicros());

    public long Arrived(bool measured, long nowMicros)
    {
        if (measured)
        {
            long first = Interlocked.Read(ref _firstMeasured);
            while ((first == 0 || nowMicros < first) && Interlocked.CompareExchange(ref _firstMeasured, nowMicros, first) != first)
            {
                first = Interlocked.Read(ref _firstMeasured);
            }

            Interlocked.Increment(ref _measured);
        }

        long last = Interlocked.Read(ref _last);
        while (nowMicros > last && Interlocked.CompareExchange(ref _last, nowMicros, last) != last)
        {
            last = Interlocked.Read(ref _last);
        }

        return Interlocked.Increment(ref _received);
    }

    /// <summary>The receiver's RESULT line; <paramref name="expected"/> is warm-up plus measured.</summary>
    public string ResultLine(long expected, params (string Key, object Value)[] extra)
        => global::QuickSilver.Compare.ResultLine.Format("receiver",
            [("received", Received), ("expected", expected), ("measured", Measured), ("first_measured_us", FirstMeasuredMicros), ("last_us", LastMicros), .. extra]);
}
