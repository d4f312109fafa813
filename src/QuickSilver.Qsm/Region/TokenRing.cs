using QuickSilver.Core.Alarms;
using QuickSilver.Core.Diagnostics;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// The token ring torus of one region member (QSM §2.3.1–§2.3.3): the region leader starts a round every
/// <see cref="RegionOptions.TokenInterval"/> with a section per sender (cutoff, purge point and stability point from the
/// last round); each partition's ring passes the token from its leader through every member and back (a partition of
/// one closes at once), then on to the next partition's leader; back at the region leader the round ends with the
/// collective ACK to each sender (the stable point, and the slowest member's rate divided by the active senders, formula
/// (1)). Each holder lets <see cref="LossRecovery"/> act on every section it carries. A token too large for one control
/// message is coarsened, then loses its predecessor NAK sets; a round that does not come back within
/// <see cref="RegionOptions.TokenTimeoutIntervals"/> intervals is presumed lost and a new one starts. Core thread only.
/// </summary>
internal sealed class TokenRing
{
    private readonly RegionMember _member;
    private readonly Dictionary<uint, (ulong Cutoff, ulong Purge, ulong Stable)> _lastRound = new();
    private readonly Alarm _tokenAlarm;
    private readonly byte[] _message = new byte[64 * 1024];
    private Token? _early;
    private readonly List<uint> _candidates = new();
    private ulong _round;
    private ulong _lastFinished;
    private int _rotation;
    private TimeSpan _roundStarted;
    private bool _roundOpen;
    private bool _stopped;

    public TokenRing(RegionMember member)
    {
        _member = member;
        _tokenAlarm = new Alarm(_ => OnTokenTimer());
    }

    /// <summary>Token rounds this node completed as region leader.</summary>
    public long RoundsCompleted { get; private set; }

    /// <summary>Tokens whose NAK sets this node coarsened so the token fit one control message.</summary>
    public long TokensCoarsened { get; private set; }

    /// <summary>Senders the leader tracks from round to round (each gets a section until it retires).</summary>
    public int TrackedSenders => _lastRound.Count;

    /// <summary>Sections this leader retired: senders found idle, acknowledged and purged everywhere.</summary>
    public long SectionsRetired { get; private set; }

    /// <summary>Whether this member has something of <paramref name="stream"/>'s sender the region still has to settle:
    /// packets it lacks, or packets it holds that the region has not purged. A sender that is idle and settled here
    /// needs no section from this member.</summary>
    private static bool NeedsSection(SenderStream stream) => stream.Anchored && (stream.Delivered < stream.MaxSeen || stream.HeldCount > 0);

    /// <summary>A new view: a leader starts rounds (at once if the view changed: a round in flight follows the old view's
    /// ring and will be dropped); a token held back because it named this view is taken now. Nothing once stopped.</summary>
    public void OnViewInstalled(bool changed)
    {
        if (_stopped)
        {
            return;
        }

        var scheduler = _member.Scheduler;
        if (_member.IsRegionLeader && changed)
        {
            _roundOpen = false;
            scheduler.ScheduleAfter(_tokenAlarm, TimeSpan.Zero);
        }
        else if (_member.IsRegionLeader && !_tokenAlarm.IsScheduled)
        {
            scheduler.ScheduleAfter(_tokenAlarm, _member.Options.TokenInterval);
        }

        if (_early is { } early)
        {
            if (early.View == _member.View!.ViewNumber)
            {
                _early = null;
                OnToken(early);
            }
            else if (early.View < _member.View.ViewNumber)
            {
                _early = null;
            }
        }
    }

    public void Stop()
    {
        _stopped = true;
        _member.Scheduler.Cancel(_tokenAlarm);
    }

    /// <summary>A token from the previous holder (its control message, kind byte first).</summary>
    public void OnTokenMessage(ReadOnlySpan<byte> message)
    {
        var view = _member.View!;
        var token = Token.TryRead(message, _member.Options.MaxNakRanges, _member.Options.MaxSenders);
        if (token is null || token.Region != view.Region.Value)
        {
            _member.Drops.Increment(DropReason.Malformed);
            return;
        }

        if (token.View < view.ViewNumber)
        {
            // A round started under an older view: its ring positions are not this view's. The leader abandons it
            // when it installs the newer view and starts a new round at once.
            _member.Drops.Increment(DropReason.NotForThisNode);
            return;
        }

        if (token.View > view.ViewNumber)
        {
            _early = token; // the GMS's update has not reached this node yet: hold it until it does
            return;
        }

        OnToken(token);
    }

    private void OnTokenTimer()
    {
        if (!_member.IsRegionLeader)
        {
            return;
        }

        // A round that has not come back within the timeout is presumed lost (a holder crashed): start another.
        if (_roundOpen && _member.Scheduler.Now - _roundStarted < _member.Options.TokenInterval * _member.Options.TokenTimeoutIntervals)
        {
            _member.Scheduler.ScheduleAfter(_tokenAlarm, _member.Options.TokenInterval);
            return;
        }

        var token = new Token { Region = _member.View!.Region.Value, View = _member.View.ViewNumber, Round = ++_round, Partition = 0, Step = 0 };

        // The senders that need a section: every one the region reported on last round and has not retired (the leader
        // may have no stream for it itself), and every one this leader holds unfinished packets of. When more are
        // active than a token carries, each round starts further along the list, so every sender gets a section
        // within ceil(n / MaxSenders) rounds (a 65th sender used never to be acknowledged).
        _candidates.Clear();
        _candidates.AddRange(_lastRound.Keys);
        foreach (var stream in _member.Streams.Values)
        {
            if (NeedsSection(stream) && !_lastRound.ContainsKey(stream.Sender))
            {
                _candidates.Add(stream.Sender);
            }
        }

        _candidates.Sort();
        int count = _candidates.Count;
        int take = Math.Min(count, _member.Options.MaxSenders);
        int first = count > take ? _rotation % count : 0;
        for (int i = 0; i < take; i++)
        {
            uint sender = _candidates[(first + i) % count];
            var section = new TokenSection(sender, _member.Options.MaxNakRanges);
            if (_lastRound.TryGetValue(sender, out var last))
            {
                (section.Cutoff, section.PurgeUpTo, section.StableBefore) = last;
            }

            token.Sections.Add(section);
        }

        _rotation = count > take ? first + take : 0;
        _roundOpen = true;
        _roundStarted = _member.Scheduler.Now;
        _member.Scheduler.ScheduleAfter(_tokenAlarm, _member.Options.TokenInterval);
        OnToken(token);
    }

    private void OnToken(Token token)
    {
        if (token.Partition >= _member.Partitions)
        {
            // The newest round back so far finishes, even if the leader started another since: over a lossy network a
            // round can take longer than the timeout (each hop's reliable retransmissions back off), and a leader that
            // took only the round it started last then finished none (soak seed 840: 18 % loss, 7 members, no round in
            // 11 s). An older round's minimums are still true later (they only grow), so it is safe; one older than the
            // last finished would move the points back, so it is not.
            if (_member.IsRegionLeader && token.Round > _lastFinished && token.Round <= _round && token.View == _member.View!.ViewNumber)
            {
                FinishRound(token);
            }

            return;
        }

        var members = _member.Layout[token.Partition].Members;
        int closingStep = members.Count;
        if (_member.Index < 0 || token.Step > closingStep || members[token.Step % closingStep] != _member.Index)
        {
            _member.Drops.Increment(DropReason.Malformed); // not ours to hold under this view
            return;
        }

        // Senders this node knows that the token does not carry yet get a section. The holders before this one never
        // saw it, so it cannot vouch for them: its minimums start at 0 (no purge, no stability this round); from the
        // next round the leader starts it with the others.
        foreach (var stream in _member.Streams.Values)
        {
            if (NeedsSection(stream) && token.Find(stream.Sender) is null && token.Sections.Count < _member.Options.MaxSenders)
            {
                token.Sections.Add(new TokenSection(stream.Sender, _member.Options.MaxNakRanges) { ReceivedMin = 0, StableMin = 0 });
            }
        }

        ProcessAll(token, closingStep, members);

        // A partition of one closes at once.
        if (token.Step == 0 && closingStep == 1)
        {
            token.Step = 1;
            ProcessAll(token, closingStep, members);
        }

        _member.Share.Settle(_member.Streams.Values); // old partition classes the region has purged past (PartitionShare)

        Forward(token, members, closingStep);
    }

    /// <summary>Processes every section of the token for a sender whose stream this node has started; a section for a
    /// sender this node has not heard from yet passes through untouched.</summary>
    private void ProcessAll(Token token, int closingStep, List<int> members)
    {
        foreach (var section in token.Sections)
        {
            _member.Streams.TryGetValue(section.Sender, out var stream);
            if (stream is not null)
            {
                stream.LastHeard = _member.Scheduler.Now; // a section still circulates: not yet time to retire it
            }

            if (stream is { Anchored: false, Candidate: { } candidate })
            {
                stream.Anchor(Math.Max(candidate, section.PurgeUpTo));
            }

            if (stream is { Anchored: true })
            {
                _member.Recovery.Process(section, stream, token.Step, closingStep, members);
            }
            else if (stream is null && !_member.Knows(section.Sender))
            {
                // A departed sender (out of the view and not admitted) this member has no stream of: it can never be
                // owed a packet of it (its packets are dropped before they start a stream), so it holds nothing back.
                // Counting it as "received 0" kept the region from purging, and every member from retiring, the
                // stream of a sender that crashed before this member joined.
                continue;
            }
            else if (token.Step < closingStep)
            {
                // Not started on this sender yet (nothing heard, or its start not known): it has received nothing the
                // region may purge on its behalf beyond where its stream would start. Without this, a member of the
                // view that had not heard the sender yet was left out of the purge point, the region purged packets
                // it was owed, and no peer could repair them.
                // A sender whose stream this member retired (StreamRetirement) had delivered everything it was owed.
                // It holds the sender's stability (the region's ACK) there too: a member of the view that lost every
                // packet a sender has sent (a stream of one or two packets, or a burst on the sender's uplink) gets no
                // stream-start hint (the sender sends those only to members new in its view, once it has sent) and
                // has nothing to NAK with, so the ACK, computed by the members that had the packets, told the sender
                // everyone had them: nothing was resent, and the member waited for good (soak seeds 5138, 5676, 5825).
                // Held, the ACK stays below the packets and the sender resends them on its timeout; a resend from
                // the sender starts the member's stream like an original.
                ulong start = stream?.Candidate ?? (stream is null && _member.Retirement.TryDelivered(section.Sender, out ulong retired) ? retired : 0);
                section.ReceivedMin = Math.Min(section.ReceivedMin, start);
                section.StableMin = Math.Min(section.StableMin, start);
            }
        }
    }

    private void Forward(Token token, List<int> members, int closingStep)
    {
        if (token.Step < closingStep)
        {
            token.Step++;
            var next = members[token.Step % closingStep];
            SendToken(token, next);
            return;
        }

        // The partition's ring is closed: on to the next partition's leader, or back to the region leader. What steered
        // recovery inside the partition stays there (a closing leader with no stream of a sender never cleared it).
        token.Partition++;
        token.Step = 0;
        foreach (var section in token.Sections)
        {
            section.Holder = TokenSection.NoHolder;
            section.PredecessorNaks.Clear();
            section.PartitionNaks.Clear();
        }

        int target = token.Partition < _member.Partitions ? _member.Layout[token.Partition].Members[0] : _member.Layout[0].Members[0];
        SendToken(token, target);
    }

    private void SendToken(Token token, int memberIndex)
    {
        if (memberIndex == _member.Index)
        {
            OnToken(token); // the next hop is this node (e.g. a one-partition region's leader closing the round)
            return;
        }

        // A token must fit one control message: with many senders and full NAK sets it may not, so its NAK sets are
        // coarsened (supersets: a few duplicate repairs) until it does; one that still does not fit is dropped.
        int length = token.Write(_message);
        if (length > _member.Control.MaxMessageBytes)
        {
            TokensCoarsened++;
        }

        for (int ranges = _member.Options.MaxNakRanges / 2; length > _member.Control.MaxMessageBytes && ranges >= 1; ranges /= 2)
        {
            foreach (var section in token.Sections)
            {
                section.PredecessorNaks.CoarsenTo(ranges);
                section.PartitionNaks.CoarsenTo(ranges);
            }

            length = token.Write(_message);
        }

        if (length > _member.Control.MaxMessageBytes)
        {
            // Still too large: drop the predecessor NAK sets. They only steer push and pull between ring neighbours: a
            // successor that sees none pulls what it lacks and the predecessor answers with what it has, so recovery
            // costs a few requests more; the partition NAK sets (what goes to the sender) are kept.
            foreach (var section in token.Sections)
            {
                section.PredecessorNaks.Clear();
            }

            length = token.Write(_message);
        }

        if (length > _member.Control.MaxMessageBytes)
        {
            _member.Drops.Increment(DropReason.Oversized); // too many senders for one message; the leader retries after the timeout
            return;
        }

        if (!_member.Control.Send(_member.View!.Members[memberIndex].Address, _message.AsSpan(0, length)))
        {
            _member.Drops.Increment(DropReason.SendQueueFull); // the round is lost; the leader starts another after the timeout
        }
    }

    private void FinishRound(Token token)
    {
        _lastFinished = token.Round;
        _roundOpen = token.Round != _round && _roundOpen; // a newer round may still be out
        RoundsCompleted++;
        // m of formula (1): the senders currently multicasting, i.e. with data the region has not all made stable, or
        // new data since the last round; an idle sender keeps its section but takes no share.
        int senders = Math.Max(1, token.Sections.Count(s => s.StableMin == ulong.MaxValue || s.StableMin < s.MaxSeen
            || !_lastRound.TryGetValue(s.Sender, out var last) || s.MaxSeen > last.Cutoff));
        foreach (var section in token.Sections)
        {
            ulong stable = section.StableMin == ulong.MaxValue ? 0 : section.StableMin;
            ulong received = section.ReceivedMin == ulong.MaxValue ? 0 : section.ReceivedMin;
            if (stable >= section.MaxSeen && received >= section.MaxSeen && section.PurgeUpTo >= section.MaxSeen)
            {
                // Idle and settled: every packet is stable and delivered everywhere, and the purge point this round carried
                // (last round's delivered point) already covers them, so every member has dropped them. The section
                // retires; the sender's next packet makes members holding it start a section again.
                _lastRound.Remove(section.Sender);
                SectionsRetired++;
            }
            else
            {
                _lastRound[section.Sender] = (section.MaxSeen, received, stable);
            }

            if (_member.Streams.TryGetValue(section.Sender, out var joined) && !joined.Anchored && joined.Candidate is { } candidate)
            {
                joined.Anchor(Math.Max(candidate, received)); // a new leader that joined mid-stream
            }

            if (_member.Streams.TryGetValue(section.Sender, out var stream) && stream.Address != default)
            {
                double rate = section.RateMin == double.MaxValue ? 0 : section.RateMin / senders; // formula (1)
                int length = RegionWire.WriteAck(_message, new RegionAck(_member.View!.Region.Value, section.Sender, token.View, stable, Math.Max(stable, section.MaxSeen), rate, section.LossMax));
                _member.Control.Send(stream.Address, _message.AsSpan(0, length));
            }
        }
    }
}
