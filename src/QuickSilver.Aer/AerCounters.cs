using QuickSilver.Core.Diagnostics;

namespace QuickSilver.Aer;

/// <summary>What one node's AER layer did, for tests, diagnostics and the figures (core thread writes, anyone reads).</summary>
public sealed class AerCounters
{
    public long DataSent;
    public long SpmsSent;
    public long NaksSent;
    public long NaksSuppressed;
    public long NakTimeouts;
    public long NaksReceived;
    public long NakSubcasts;
    public long RepairsSent;
    public long RepairsForwarded;
    public long RepairsReceived;
    public long Duplicates;
    public long Delivered;
    public long Unrecoverable;
    public long CacheEvictions;
    public long CsmsSent;
    public long AcksSent;
    public long AcksReceived;
    public long NomineeChanges;
    public long UpstreamFailovers;
    public long WindowOverflow;
    public long RepairQueueFull;

    /// <summary>Datagrams dropped: malformed, for another session, from a node that may not send them here.</summary>
    public DropCounters Drops { get; } = new();

    public override string ToString() =>
        $"data {DataSent}, spm {SpmsSent}, nak sent {NaksSent}/suppressed {NaksSuppressed}/timeouts {NakTimeouts}/received {NaksReceived}/subcast {NakSubcasts}, " +
        $"repairs sent {RepairsSent}/forwarded {RepairsForwarded}/received {RepairsReceived}, dup {Duplicates}, delivered {Delivered}, " +
        $"unrecoverable {Unrecoverable}, evictions {CacheEvictions}, csm {CsmsSent}, acks {AcksSent}/{AcksReceived}, nominee changes {NomineeChanges}, " +
        $"failovers {UpstreamFailovers}, drops {Drops.Total}";
}
