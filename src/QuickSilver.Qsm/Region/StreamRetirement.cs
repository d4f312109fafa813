namespace QuickSilver.Qsm.Region;

/// <summary>
/// Retires the streams of departed senders at one member (docs/security.md, "Bounds"; docs/qsm.md, "Departed senders"):
/// a member starts a <see cref="SenderStream"/> for every sender it hears, and without this kept each one for its
/// lifetime, including every earlier id of a node that registered again. A stream is retired when its sender is neither
/// in the member's view nor admitted to send into the region, the stream is complete (anchored, everything seen
/// delivered, nothing held: the region purged it all) and not cut loose, and neither a packet of it nor a token section
/// for it has reached the member for <see cref="RegionOptions.RetireDepartedStreamsAfter"/>.
/// <para>A token section can still come for a retired sender (a member that lags, or a new leader's first rounds).
/// Answering it as a member that never heard the sender (received minimum 0) would hold the region's purge of that
/// sender back for good, so the member remembers the retired stream's delivered point and answers with that: at most
/// <see cref="MaxRemembered"/> senders, the oldest forgotten first. A sender that comes back (in a view again) starts a
/// new stream as any sender heard mid-stream does, and its remembered point is forgotten.</para>
/// Core thread only.
/// </summary>
internal sealed class StreamRetirement
{
    /// <summary>Retired senders whose delivered point is remembered for late token sections.</summary>
    public const int MaxRemembered = 4096;

    private readonly OldestFirstTable<ulong> _delivered = new(MaxRemembered);

    /// <summary>Streams retired so far.</summary>
    public long Retired { get; private set; }

    /// <summary>Remembered delivered points forgotten at the bound.</summary>
    public long Forgotten => _delivered.Forgotten;

    /// <summary>Whether <paramref name="stream"/> may be retired now.</summary>
    public static bool Due(SenderStream stream, bool departed, TimeSpan now, TimeSpan after)
        => departed && stream.Anchored && stream.HeldCount == 0 && stream.Delivered >= stream.MaxSeen && !stream.Lossy
           && now - stream.LastHeard >= after;

    /// <summary>Whether the stream of a departed sender should be given up although it is not complete: the sender has
    /// been departed, and the stream has neither delivered nor purged anything, for <paramref name="after"/>. A sender
    /// that crashed (or left) before the region had every packet it sent leaves a gap no member can fill; every member
    /// stops delivering at the same point (the first packet none of them has: the others are recovered from whoever
    /// has them, round after round, until then), and without this each kept the stream, its held packets and a token
    /// section for it for good.</summary>
    public static bool Stuck(SenderStream stream, TimeSpan now, TimeSpan after)
        => stream.DepartedSince is { } since && now - since >= after && now - stream.LastProgress >= after;

    /// <summary>Streams given up (<see cref="Stuck"/>) and the packets they held.</summary>
    public long GivenUp { get; private set; }

    /// <inheritdoc cref="GivenUp"/>
    public long PacketsGivenUp { get; private set; }

    /// <summary>Records a stream given up (<see cref="Stuck"/>) that held <paramref name="held"/> packets (now released).</summary>
    public void GiveUp(SenderStream stream, int held)
    {
        GivenUp++;
        PacketsGivenUp += held;
        Retire(stream);
    }

    /// <summary>Records a retired stream's delivered point.</summary>
    public void Retire(SenderStream stream)
    {
        Retired++;
        _delivered.Set(stream.Sender, stream.Delivered);
    }

    /// <summary>The delivered point of a retired sender, if remembered.</summary>
    public bool TryDelivered(uint sender, out ulong delivered) => _delivered.TryGetValue(sender, out delivered);

    /// <summary>A stream for <paramref name="sender"/> starts again: its retired point no longer applies.</summary>
    public void Restart(uint sender) => _delivered.Remove(sender, out _);

    /// <summary>Senders remembered.</summary>
    public int Remembered => _delivered.Count;
}
