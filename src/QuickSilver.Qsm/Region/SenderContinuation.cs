namespace QuickSilver.Qsm.Region;

/// <summary>
/// Where this node's numbering goes on in a region it stopped sending into (docs/security.md, "Bounds"; docs/qsm.md,
/// "Departed senders"). The region layer stops a sender once none of the node's groups maps to its region any more and
/// its stream is acknowledged (<see cref="RegionLayer.Release"/>); the region may come back into a group's view (the node
/// joins a group mapped to it again) while its members still hold the old stream (they retire it only after
/// <see cref="RegionOptions.RetireDepartedStreamsAfter"/>). A new sender numbering from 1 again would have them drop
/// its packets as duplicates, so the new one continues from the last number the old one used, remembered here per
/// region id. A member that retired the old stream meanwhile starts the new one where its first view starts, as for any
/// sender heard mid-stream, so continuing is right for both.
/// <para>Bounded: at most <see cref="MaxRegions"/> regions (16 bytes each), the oldest forgotten first
/// (<see cref="Forgotten"/>). Region ids are never reused, so forgetting a region that ended costs nothing; a node that
/// comes back into a region it left more than <see cref="MaxRegions"/> released regions ago, while its members still
/// hold its old stream, would number from 1 again there. The table is per node id: a node that registers again under a
/// new id is a new sender everywhere (<see cref="RegionLayer.SetNode"/> clears it).</para>
/// Core thread only.
/// </summary>
internal sealed class SenderContinuation
{
    /// <summary>Regions whose last sequence number is remembered.</summary>
    public const int MaxRegions = 4096;

    private readonly OldestFirstTable<ulong> _last = new(MaxRegions);

    /// <summary>Regions remembered now.</summary>
    public int Count => _last.Count;

    /// <summary>Remembered regions forgotten at the bound.</summary>
    public long Forgotten => _last.Forgotten;

    /// <summary>Records that this node's sender into <paramref name="region"/> stopped after numbering <paramref name="last"/>.</summary>
    public void Remember(uint region, ulong last)
    {
        if (last == 0)
        {
            return; // it sent nothing: a new sender numbering from 1 is the same stream
        }

        _last.Set(region, _last.TryGetValue(region, out ulong known) ? Math.Max(known, last) : last);
    }

    /// <summary>The number a new sender into <paramref name="region"/> continues after (0: none remembered), forgotten
    /// here once taken: the new sender carries it on.</summary>
    public ulong Take(uint region) => _last.Remove(region, out ulong last) ? last : 0;

    /// <summary>Forgets every region (the node has a new id).</summary>
    public void Clear() => _last.Clear();
}
