using QuickSilver.Core.Io;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// What a region member keeps of a sender's packets after delivering them, with
/// <see cref="RegionOptions.PartitionShare"/> (QSM §2.3: packet i is cached by partition i mod p): its own partition's
/// class, and, while a view change that redrew the partitions settles, the class it had before. Everything else is
/// released at delivery (<see cref="SenderStream"/>). Core thread only.
/// <para>
/// Why old classes are kept (docs/qsm.md, "Partition share"): a sender releases packet i once a token round found it
/// stable on its caching partition, the partition of the round's view. After a view change redraws the partitions, the
/// new caching partition of i may be members that released i at delivery; the old one still holds it. So a member whose
/// class changed keeps its old class for every packet the sender numbered before the new view (only those can have been
/// released on an older view's word: a sender takes a round's acknowledgement only for packets numbered in that view or
/// earlier) until the region has purged them all, that is, every member has delivered them; and the member now
/// responsible for them scans its class from the purge point, not from its delivered point, so it neither vouches for a
/// packet it does not hold nor fails to ask for it back: from its ring predecessor as always, and from the old
/// partition's members (<see cref="OldShares"/>; <see cref="LossRecovery"/> sends those pulls).
/// </para>
/// </summary>
internal sealed class PartitionShare
{
    /// <summary>Old classes kept at once; a further view change before the oldest settles forgets it (counted).</summary>
    public const int MaxOldShares = 8;

    private readonly List<OldShare> _old = new();

    public PartitionShare(bool enabled)
    {
        Enabled = enabled;
    }

    /// <summary>Whether the share is on (<see cref="RegionOptions.PartitionShare"/>); off, every packet is kept.</summary>
    public bool Enabled { get; }

    /// <summary>p of the current view.</summary>
    public int Partitions { get; private set; } = 1;

    /// <summary>This member's partition in the current view (−1: not in the view; it then keeps everything).</summary>
    public int Partition { get; private set; } = -1;

    /// <summary>The classes this member kept before view changes that have not settled yet, oldest first.</summary>
    public IReadOnlyList<OldShare> OldShares => _old;

    /// <summary>Old classes dropped because the region purged every packet numbered before their view change.</summary>
    public long OldSharesSettled { get; private set; }

    /// <summary>Old classes forgotten before they settled (more than <see cref="MaxOldShares"/> view changes within one
    /// purge lag): a packet only they held may then have to come from the sender.</summary>
    public long OldSharesForgotten { get; private set; }

    /// <summary>A view is installed: <paramref name="partitions"/> partitions, this member in
    /// <paramref name="partition"/> (−1 when not a member). If its class changed, the old one is kept with
    /// <paramref name="oldLayout"/>, the old view's members per partition (where pulls for it go).</summary>
    public void OnViewInstalled(uint view, int partitions, int partition, NetAddress[][]? oldLayout)
    {
        if (Enabled && Partition >= 0 && oldLayout is not null && (partitions != Partitions || partition != Partition))
        {
            if (_old.Count == MaxOldShares)
            {
                _old.RemoveAt(0);
                OldSharesForgotten++;
            }

            _old.Add(new OldShare(view, Partitions, Partition, oldLayout));
        }

        Partitions = partitions;
        Partition = partition;
        _old.RemoveAll(old => old.Partitions == partitions && old.Partition == partition); // its class again: kept anyway
    }

    /// <summary>Whether this member keeps <paramref name="seq"/> of <paramref name="stream"/> once delivered.</summary>
    public bool Keeps(SenderStream stream, ulong seq)
    {
        if (!Enabled || Partition < 0 || (int)(seq % (ulong)Partitions) == Partition)
        {
            return true;
        }

        foreach (var old in _old)
        {
            if ((int)(seq % (ulong)old.Partitions) == old.Partition && seq <= stream.NumberedBefore(old.View))
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>Drops the old classes that have settled: for every anchored stream, the region has purged every packet
    /// the sender numbered before the view change, or everything this member has seen of it is delivered and purged
    /// (an idle sender whose next view is not known yet: it holds nothing and has nothing to take back). Called after
    /// each token visit.</summary>
    public void Settle(IEnumerable<SenderStream> streams)
    {
        for (int i = _old.Count - 1; i >= 0; i--)
        {
            var old = _old[i];
            bool settled = true;
            foreach (var stream in streams)
            {
                if (stream.Anchored && stream.PurgedThrough < stream.NumberedBefore(old.View)
                    && (stream.HeldCount > 0 || stream.Delivered < stream.MaxSeen || stream.PurgedThrough < stream.Delivered))
                {
                    settled = false;
                    break;
                }
            }

            if (settled)
            {
                _old.RemoveAt(i);
                OldSharesSettled++;
            }
        }
    }

    /// <summary>A class this member had before region view <see cref="View"/> redrew the partitions, and the members of
    /// that old layout per partition (where the packets this member must take back are asked for).</summary>
    public sealed record OldShare(uint View, int Partitions, int Partition, NetAddress[][] Members);
}
