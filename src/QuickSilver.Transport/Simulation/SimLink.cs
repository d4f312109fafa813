namespace QuickSilver.Transport.Simulation;

/// <summary>
/// One direction of a node's access link: a FIFO serializer (the time it is busy until), the Gilbert–Elliott state,
/// and its options. Slots are reserved in the order datagrams are sent, which is exact for one sender per link and an
/// approximation (documented) when several senders converge on one downlink.
/// </summary>
internal sealed class SimLink
{
    private readonly Queue<TimeSpan> _queued = new(); // when each accepted datagram finishes serializing
    private bool _bad;

    public SimLink(LinkOptions options) => Options = options;

    public LinkOptions Options { get; set; }

    /// <summary>The virtual time the link finishes serializing what it has accepted so far.</summary>
    public TimeSpan BusyUntil { get; set; }

    public TimeSpan SerializationTime(int bytes) => TimeSpan.FromTicks(Math.Max(1, (long)bytes * 8 * TimeSpan.TicksPerSecond / Options.BandwidthBitsPerSecond));

    /// <summary>
    /// Reserves the link for a datagram that reaches it at <paramref name="arrival"/> (arrivals come in time order).
    /// Returns the time it has been fully serialized, or null when <see cref="LinkOptions.QueueLimitPackets"/>
    /// datagrams are already waiting or being sent: the queue counts datagrams, whatever their sizes, as an interface
    /// queue does.
    /// </summary>
    public TimeSpan? Reserve(TimeSpan arrival, int bytes)
    {
        while (_queued.Count > 0 && _queued.Peek() <= arrival)
        {
            _queued.Dequeue();
        }

        if (_queued.Count >= Options.QueueLimitPackets)
        {
            return null;
        }

        var start = BusyUntil > arrival ? BusyUntil : arrival;
        BusyUntil = start + SerializationTime(bytes);
        _queued.Enqueue(BusyUntil);
        return BusyUntil;
    }

    /// <summary>Draws whether this link loses the next datagram (independent loss, then the burst model).</summary>
    public bool Loses(Random random)
    {
        bool lost = Options.LossRate > 0 && random.NextDouble() < Options.LossRate;
        if (Options.Burst is { } burst)
        {
            _bad = _bad ? random.NextDouble() >= burst.BadToGood : random.NextDouble() < burst.GoodToBad;
            lost |= _bad && random.NextDouble() < burst.LossInBad;
        }

        return lost;
    }
}
