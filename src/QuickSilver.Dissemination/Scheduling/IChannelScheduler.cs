namespace QuickSilver.Dissemination.Scheduling;

/// <summary>Chooses what one data channel sends next from its own static subset of items (seed 001 §2.2–2.3).</summary>
public interface IChannelScheduler
{
    /// <summary>The item to send next, or −1 when no item of this channel is requested. Does not change the book.</summary>
    int Next();

    /// <summary>Work done by all decisions so far: items and (client, item) pairs read.</summary>
    long Work { get; }
}

/// <summary>Which scheduler each data channel runs.</summary>
public enum SchedulerKind
{
    /// <summary>The seed's R/Q heuristic (Figure 3, with Q starting at +∞).</summary>
    RQ,

    /// <summary>The seed's "null" circular broadcast.</summary>
    Circular,
}
