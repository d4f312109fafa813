using QuickSilver.Core.Diagnostics;
using QuickSilver.Core.Io;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// Loss recovery at one region member (QSM §2.3.3), driven by the token: per sender, what this member lacks up to the
/// cutoff among the packets its partition caches; push to and pull from its predecessor on the partition's ring; the
/// partition's intersection NAK to the sender when the ring closes; pulls of other partitions' packets from their leaders
/// once those are stable on their caching replicas; and answers to pulls. Repairs are bounded per request
/// (<see cref="RegionOptions.MaxRepairBurst"/>) and clamped to what this member has seen (a peer's ranges are
/// untrusted). It also folds this member's state into the section's minima (stability, delivery, rate, loss). Core
/// thread only.
/// </summary>
internal sealed class LossRecovery
{
    private readonly RegionMember _member;
    private readonly NakSet _mine;
    private readonly NakSet _scratch;
    private readonly NakSet _lacks;
    private readonly byte[] _message = new byte[64 * 1024];
    private readonly byte[] _datagram;
    private NakSet[] _others = [];
    private NakSet[] _fromOld = [];
    private int _oldRotation;
    private uint _departedRotation;

    public LossRecovery(RegionMember member, int maxDatagramSize)
    {
        _member = member;
        _mine = new NakSet(member.Options.MaxNakRanges);
        _scratch = new NakSet(member.Options.MaxNakRanges);
        _lacks = new NakSet(member.Options.MaxNakRanges + 1);
        _datagram = new byte[maxDatagramSize];
    }

    public long RepairsSent { get; private set; }

    /// <summary>Repairs the endpoint refused (its send queue was full): not sent, and not in <see cref="RepairsSent"/>.</summary>
    public long RepairsRefused { get; private set; }

    public long PullsSent { get; private set; }

    /// <summary>Push or pull answers that stopped at <see cref="RegionOptions.MaxRepairBurst"/> with more held packets
    /// still named (the rest is asked for again next round).</summary>
    public long RepairBudgetsSpent { get; private set; }

    /// <summary>Times this member's own missing set (what it lacks of its class, or what it pulls from another
    /// partition) reached <see cref="RegionOptions.MaxNakRanges"/> and merged its nearest ranges: a superset, so a few
    /// packets are repaired twice (<see cref="NakSet.Coarse"/>).</summary>
    public long MissingSetsCoarsened { get; private set; }

    /// <summary>NAKs and pulls sent with ranges dropped at <see cref="RegionOptions.MaxNakRanges"/> (the lowest kept, the
    /// rest reported in a later round; <see cref="NakSet.Truncated"/>).</summary>
    public long RangeSetsTruncated { get; private set; }

    public long NaksSent { get; private set; }

    /// <summary>Pulls sent to an old layout's partition for packets a view change made this member's share
    /// (<see cref="PartitionShare"/>).</summary>
    public long OldSharePullsSent { get; private set; }

    /// <summary>A new view: one pull set per partition.</summary>
    public void OnViewInstalled()
    {
        _others = new NakSet[_member.Partitions];
        for (int i = 0; i < _others.Length; i++)
        {
            _others[i] = new NakSet(_member.Options.MaxNakRanges);
        }
    }

    /// <summary>A pull request (its control message, kind byte first): repair what it names that this member holds.</summary>
    public void OnPull(NetAddress from, ReadOnlySpan<byte> message)
    {
        if (!RegionWire.TryReadRanges(message, _scratch, out _, out uint sender, out int partition, out int partitions))
        {
            _member.Drops.Increment(DropReason.Malformed);
            return;
        }

        if (!_member.Streams.TryGetValue(sender, out var stream))
        {
            // Well formed, for a sender this member holds no stream of (it joined or registered again after that
            // sender left, or retired its stream): nothing to repair from here; the puller asks another member.
            _member.Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        SendRepairs(stream, from, _scratch, partition, partitions);
    }

    /// <summary>
    /// What this member cannot serve to its partition (its part in the collective NAK, §2.3.3): what it lacks up to the
    /// cutoff, plus, for a member that joined mid-stream, the partition's packets between the purge point and where it
    /// started. Those were never owed to it, so it does not NAK them, but it does not hold them either: without this, a
    /// joiner would hide from the sender a packet that every older replica of its partition lost.
    /// </summary>
    private void CannotServe(SenderStream stream, ulong purgeUpTo)
    {
        _lacks.CopyFrom(_mine);
        if (stream.AnchoredAt > purgeUpTo)
        {
            ulong p = (ulong)_member.Partitions;
            ulong mine = (ulong)_member.Partition;
            ulong first = (purgeUpTo + 1 + (p - 1 - mine)) / p; // the first index k with k·p + partition > purgeUpTo
            ulong last = stream.AnchoredAt < mine ? 0 : (stream.AnchoredAt - mine) / p;
            if (first <= last && (last * p) + mine <= stream.AnchoredAt)
            {
                _lacks.AddRange(first, last);
            }
        }
    }

    internal void Process(TokenSection section, SenderStream stream, int step, int closingStep, List<int> members)
    {
        stream.Purge(section.PurgeUpTo);
        stream.CachedMissing(section.Cutoff, _member.Partitions, _member.Partition, _mine);
        MissingSetsCoarsened += _mine.Coarse ? 1 : 0;
        CannotServe(stream, section.PurgeUpTo);

        // The predecessor is the last member of the ring that processed this section (Holder): members with no started
        // stream of the sender pass it on untouched. A holder that names no earlier step (none yet, or a peer's number
        // out of range) makes this member the first, as the partition leader is at step 0.
        int holder = section.Holder;
        bool first = step == 0 || holder >= step || members[holder % closingStep] == _member.Index;
        if (!first)
        {
            // Compare with the predecessor on the ring: push what it lacks and we have, pull what we lack and it has.
            var predecessor = _member.View!.Members[members[holder % closingStep]].Address;
            _scratch.SetDifference(section.PredecessorNaks, _mine);
            SendRepairs(stream, predecessor, _scratch, _member.Partition, _member.Partitions);
            _scratch.SetDifference(_mine, section.PredecessorNaks);
            if (!_scratch.IsEmpty)
            {
                SendRanges(predecessor, RegionControl.Pull, stream.Sender, _member.Partition, _scratch);
                PullsSent++;
            }

            _scratch.SetIntersection(section.PartitionNaks, _lacks);
            section.PartitionNaks.CopyFrom(_scratch);
        }
        else
        {
            section.PartitionNaks.CopyFrom(_lacks);
        }

        if (step == closingStep)
        {
            // Back at the partition leader: what the whole partition lacks goes to the sender as one collective NAK.
            if (!section.PartitionNaks.IsEmpty && stream.Address != default)
            {
                SendRanges(stream.Address, RegionControl.Nak, stream.Sender, _member.Partition, section.PartitionNaks);
                NaksSent++;
            }

            section.PredecessorNaks.Clear();
            section.PartitionNaks.Clear();
            section.Holder = TokenSection.NoHolder;
        }
        else
        {
            section.PredecessorNaks.CopyFrom(_mine);
            section.Holder = (ushort)step;

            PullFromOldShares(stream);

            // First visit this round: pull packets cached elsewhere, once they are stable on their replicas.
            ulong limit = Math.Min(section.Cutoff, section.StableBefore);
            if (limit > stream.Delivered && _member.Partitions > 1)
            {
                stream.OtherMissing(limit, _member.Partitions, _member.Partition, _others);
                bool departed = _member.Departed(stream.Sender);
                for (int j = 0; j < _member.Partitions; j++)
                {
                    if (j != _member.Partition && !_others[j].IsEmpty)
                    {
                        MissingSetsCoarsened += _others[j].Coarse ? 1 : 0;
                        SendRanges(PullTarget(j, departed), RegionControl.Pull, stream.Sender, j, _others[j]);
                        PullsSent++;
                    }
                }
            }

            // A departed sender answers no NAK, and its packets of this member's class that the whole partition lacks
            // may be held only by other partitions' members (they keep what they received until the cached point
            // passes it): ask them too, a different member each round.
            if (_member.Partitions > 1 && !_mine.IsEmpty && _member.Departed(stream.Sender))
            {
                int other = (_member.Partition + 1 + (int)(_departedRotation % (uint)(_member.Partitions - 1))) % _member.Partitions;
                SendRanges(PullTarget(other, departed: true), RegionControl.Pull, stream.Sender, _member.Partition, _mine);
                PullsSent++;
            }

            section.MaxSeen = Math.Max(section.MaxSeen, stream.MaxSeen);
            section.StableMin = Math.Min(section.StableMin, stream.CachedUpTo(_member.Partitions, _member.Partition, Math.Max(section.Cutoff, section.MaxSeen)));
            section.ReceivedMin = Math.Min(section.ReceivedMin, stream.Delivered);
            section.RateMin = Math.Min(section.RateMin, _member.ReceiveRate); // μ_rec^(i): new packets from all senders
            section.LossMax = Math.Max(section.LossMax, _member.LossFraction);
        }
    }

    /// <summary>Pulls the packets <paramref name="missing"/> names after <paramref name="position"/> straight from a
    /// replica of each one's caching partition (seq mod p), without waiting for the token: gaps that stayed open while
    /// the flow reports went round (<c>ReceiverStatus</c>, with the receivers' windows). One pull per partition; each
    /// attempt goes to the next replica of that partition (the first to its leader), so one that lacks them too is passed
    /// over; never to this member itself. Answered like the token's pulls (<see cref="OnPull"/>): the replica sends what
    /// it holds.</summary>
    public void PullGaps(SenderStream stream, ulong position, in GapMap missing, int attempt)
    {
        if (_member.View is null || _member.Index < 0 || _others.Length != _member.Partitions)
        {
            return;
        }

        ulong p = (ulong)_member.Partitions;
        foreach (var set in _others)
        {
            set.Clear();
        }

        for (int w = 0; w < GapMap.Words; w++)
        {
            for (ulong word = missing.Word(w); word != 0; word &= word - 1)
            {
                ulong seq = position + 1 + (ulong)(w * 64) + (ulong)System.Numerics.BitOperations.TrailingZeroCount(word);
                _others[(int)(seq % p)].AppendCoarsening(seq / p, seq / p);
            }
        }

        var self = _member.View.Members[_member.Index].Address;
        for (int partition = 0; partition < _others.Length; partition++)
        {
            if (_others[partition].IsEmpty)
            {
                continue;
            }

            var members = _member.Layout[partition].Members;
            for (int t = 0; t < members.Count; t++)
            {
                var target = _member.View.Members[members[(attempt + t) % members.Count]].Address;
                if (target != self)
                {
                    SendRanges(target, RegionControl.Pull, stream.Sender, partition, _others[partition]);
                    GapPullsSent++;
                    break;
                }
            }

            _others[partition].Clear();
        }
    }

    /// <summary>Pulls sent by <see cref="PullGaps"/>: a member's gaps still open a while after they were reported.</summary>
    public long GapPullsSent { get; private set; }

    /// <summary>Where a pull for partition <paramref name="partition"/>'s packets goes: its leader, which holds every packet
    /// of its class once stable. For a departed sender, a different member of the partition each round: the leader may
    /// be a member that never heard the sender (a joiner, a node that registered again) and holds nothing of it (soak
    /// seed 8926: two survivors' pulls went to such a leader for 30 s, and they gave the stream up short of the others).</summary>
    private NetAddress PullTarget(int partition, bool departed)
    {
        var members = _member.Layout[partition].Members;
        int pick = departed ? (int)(++_departedRotation % (uint)members.Count) : 0;
        return _member.View!.Members[members[pick]].Address;
    }

    /// <summary>
    /// With the partition share, after a view change that gave this member a new class: the packets of its class it
    /// lacks that the sender numbered before that change may have been released by the sender on the old partitions'
    /// word, so it asks the old layout for them too, not only its ring predecessor and the sender (docs/qsm.md,
    /// "Partition share"). Each lacking seq goes to its old partition (seq mod the old p), to one of that partition's
    /// members still in the view, a different one each round (any replica of the old partition may be the one left).
    /// Bounded by the window: the scan runs over [purge point, highest seen], and each pull by the NAK range bound.
    /// </summary>
    private void PullFromOldShares(SenderStream stream)
    {
        var share = _member.Share;
        if (share.OldShares.Count == 0 || _mine.IsEmpty)
        {
            return;
        }

        ulong p = (ulong)_member.Partitions;
        ulong mine = (ulong)_member.Partition;
        ulong low = stream.PurgedThrough + 1;
        _oldRotation++;
        foreach (var old in share.OldShares)
        {
            ulong high = Math.Min(stream.MaxSeen, stream.NumberedBefore(old.View));
            if (high < low)
            {
                continue;
            }

            if (_fromOld.Length < old.Partitions)
            {
                _fromOld = new NakSet[old.Partitions];
                for (int i = 0; i < _fromOld.Length; i++)
                {
                    _fromOld[i] = new NakSet(_member.Options.MaxNakRanges);
                }
            }

            for (int j = 0; j < old.Partitions; j++)
            {
                _fromOld[j].Clear();
            }

            ulong q = (ulong)old.Partitions;
            if (high < mine)
            {
                continue;
            }

            // Indices k of this member's class (seq = k·p + partition) between low and high, clamped before the loop.
            ulong kHigh = (high - mine) / p;
            ulong kLow = low <= mine ? 0 : (low - mine + p - 1) / p;
            foreach (var range in _mine.Ranges)
            {
                ulong last = Math.Min(range.Last, kHigh);
                for (ulong k = Math.Max(range.First, kLow); k <= last; k++)
                {
                    ulong seq = (k * p) + mine;
                    _fromOld[(int)(seq % q)].AppendCoarsening(seq / q, seq / q);
                }
            }

            for (int j = 0; j < old.Partitions; j++)
            {
                if (_fromOld[j].IsEmpty)
                {
                    continue;
                }

                var replicas = old.Members[j];
                for (int t = 0; t < replicas.Length; t++)
                {
                    var target = replicas[(t + _oldRotation) % replicas.Length];
                    if (_member.IsViewMember(target) && target != _member.View!.Members[_member.Index].Address)
                    {
                        SendRanges(target, RegionControl.Pull, stream.Sender, j, old.Partitions, _fromOld[j]);
                        OldSharePullsSent++;
                        break;
                    }
                }
            }
        }
    }

    private void SendRanges(NetAddress to, RegionControl kind, uint sender, int partition, NakSet ranges)
        => SendRanges(to, kind, sender, partition, _member.Partitions, ranges);

    private void SendRanges(NetAddress to, RegionControl kind, uint sender, int partition, int partitions, NakSet ranges)
    {
        RangeSetsTruncated += ranges.Truncated ? 1 : 0;
        int length = RegionWire.WriteRanges(_message, kind, _member.View!.Region.Value, sender, partition, partitions, ranges);
        _member.Control.Send(to, _message.AsSpan(0, length));
    }

    /// <summary>Pushes or answers a pull: at most <see cref="RegionOptions.MaxRepairBurst"/> packets per request (the rest
    /// are asked for again next round), and only among the packets this member holds: a peer's ranges are untrusted, so
    /// each is clamped to the stream's held span (at most the window wide) before it drives the loop. Clamping only to
    /// what this member had seen let a pull for [1, 2^62], after a forged packet numbered 2^62, spin the core for good.</summary>
    private void SendRepairs(SenderStream stream, NetAddress to, NakSet indices, int partition, int partitions)
    {
        ulong p = (ulong)partitions;
        ulong residue = (ulong)partition;
        if (!stream.HeldSpan(out ulong low, out ulong high) || high < residue)
        {
            return; // nothing held (or nothing of this class): nothing to repair
        }

        // Indices k whose seq k·p + partition may be held; k·p + partition ≤ high, so it cannot wrap.
        ulong lowest = low > residue ? (low - residue) / p : 0;
        ulong highest = (high - residue) / p;
        int budget = _member.Options.MaxRepairBurst;
        foreach (var range in indices.Ranges)
        {
            ulong first = Math.Max(range.First, lowest);
            ulong last = Math.Min(range.Last, highest);
            for (ulong k = first; k <= last; k++)
            {
                ulong seq = (k * p) + (ulong)partition;
                if (stream.TryGet(seq, out var payload))
                {
                    if (budget == 0)
                    {
                        RepairBudgetsSpent++; // a held packet beyond the burst: asked for again next round
                        return;
                    }

                    budget--;
                    int length = RegionWire.WriteData(_datagram, new DataHeader(stream.Sender, _member.View!.Region.Value, RegionWire.RepairView, seq, seq), payload);
                    if (_member.Data.TrySend(to, _datagram.AsSpan(0, length)))
                    {
                        RepairsSent++;
                    }
                    else
                    {
                        RepairsRefused++; // the endpoint's send queue is full (it counts SendQueueFull too)
                    }
                }

                if (k == last)
                {
                    break; // last may be 2^64 - 1, where k++ would wrap
                }
            }
        }
    }
}
