using QuickSilver.Core.Io;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// A partition leader's first repair of its members' gaps (<see cref="RegionOptions.LeaderRepair"/>, docs/qsm.md "Leader
/// repair"). A member's flow report names the packets it lacks though a later one arrived; its partition leader, which
/// received the same multicast, usually holds them. The leader sends each such packet it holds to that member alone
/// (a repair datagram, as the token ring's pushes are) and leaves it out of the aggregate it sends on, so the sender
/// resends only what no leader could: a packet every member lost, one the leader lacks too, or one the leader has let go.
/// Without it every gap anywhere in the region went up to the sender, and the sender's resend was multicast to every
/// member: in a simulated 250-member region under ~1 % loss resends were 73 % of new packets, each taken by all 250.
/// <para>The leader keeps each packet it repaired per member, with a copy of the repair datagram (<see cref="RepairLog"/>),
/// until the member's reports show it arrived. While the member names it again within the hold-off (the smoothed time
/// from a repair to the first report without it, per member and not from a repair sent twice, plus one mean deviation;
/// at least <see cref="RegionOptions.GapReportInterval"/>, four of those before any is measured, at most four
/// <see cref="RegionOptions.StatusInterval"/>s, half the wait before the member pulls a gap from its caching partition;
/// a ceiling of eight, tried in stop 36, took ten senders in the paper's cost model from 5,672 to 5,408 messages a second) it
/// is still on its way and left out; named after the hold-off, the repair was lost and the leader sends the copy again
/// (<see cref="Resent"/>), once; still named after twice the hold-off, it is the sender's (<see cref="GivenUp"/>,
/// <see cref="RepairLog.Sends"/>: sent every hold-off into overflowing receive queues, 95 % of the repairs went again and
/// a simulated region with five senders ran at a third of its rate without leader repair). A needless second copy costs one member one datagram; a lost repair waiting out a long
/// hold-off holds every sender's window at that member: with four deviations (TCP's timeout) a lost repair waited
/// 2.6–6.3 ms on simulated 10 Gbit/s links and a 25-member region at 1 % loss ran at 0.77 of its rate without leader
/// repair; with one, 0.95 (docs/qsm.md, "Leader repair"). It hands a packet it repaired back to the sender only after
/// two copies: a first version that did after one hold-off stalled a simulated 25-member region under 1 % loss for a
/// token round, because the sender had released the packet on a token's ACK and only the token's pull was left; since
/// then the token's ACK stops below a packet a flow report names, and a member pulls a gap left open 160 ms from its
/// caching partition (docs/qsm.md, "Leader repair").</para>
/// <para>While its partition is congested (its own receive queue or a member's overflowed within the last eight status
/// intervals: <c>ReceiverStatus.PartitionCongested</c>) a leader sends no repair and leaves its members' gaps to the
/// sender. Overflow hits every receiver's queue at about the same time, so a packet one member lost to it is nearly
/// always lost by a member of another partition too, and the sender multicasts it anyway: with five senders into a
/// simulated 25-member region whose queues overflowed, as many repairs arrived at members that already had the packet
/// as the leaders sent (80,805 against 79,629), and the sender's resends were no fewer. The sender's resends are paced by
/// its congestion window; the leader's were not (docs/qsm.md, "Leader repair and congestion").</para>
/// I/O through the member's data transport; core thread only.
/// </summary>
internal sealed class LeaderRepair
{
    private readonly RegionMember _member;
    private readonly int _maxDatagramSize;

    public LeaderRepair(RegionMember member, int maxDatagramSize)
    {
        _member = member;
        _maxDatagramSize = maxDatagramSize;
    }

    /// <summary>Packets this leader sent to a member that named them missing.</summary>
    public long Sent { get; private set; }

    /// <summary>Repairs the endpoint refused (its send queue was full): left to the sender that time.</summary>
    public long Refused { get; private set; }

    /// <summary>Of <see cref="Sent"/>, repairs sent again because the member named the packet after the hold-off (the
    /// last one was lost).</summary>
    public long Resent { get; private set; }

    /// <summary>Repairs sent twice and still named after the second copy's wait: handed to the sender (left in the
    /// aggregate), each time the member names them from then on.</summary>
    public long GivenUp { get; private set; }

    /// <summary>Member reports with gaps that came while the partition was congested (this leader's receive queue, or
    /// the reporting member's, overflowed lately): this leader sent no repair and no second copy for them, and left those
    /// gaps to the sender.</summary>
    public long LeftOnOverflow { get; private set; }

    /// <summary>Member reports this leader refused to repair from (a forged or broken report): a position so high that
    /// the packets its map names would wrap, or a highest packet below the position.</summary>
    public long Implausible { get; private set; }

    /// <summary>How long <paramref name="log"/>'s member may name a packet repaired to it before it is sent again.</summary>
    public TimeSpan HoldOff(RepairLog log)
    {
        var options = _member.Options;
        if (log.Delay == TimeSpan.Zero)
        {
            return 4 * options.GapReportInterval;
        }

        var holdOff = log.Delay + log.Deviation; // the mean and one mean deviation (TCP's timeout takes four: see the class comment)
        var ceiling = 4 * options.StatusInterval;
        return holdOff < options.GapReportInterval ? options.GapReportInterval : holdOff > ceiling ? ceiling : holdOff;
    }

    /// <summary>
    /// A member's report of <paramref name="stream"/>: its position, its highest packet, and the gaps after the position
    /// (<paramref name="missing"/>, which names <paramref name="mapPackets"/> packets after it). Forgets what the member
    /// has now (every report, with gaps or without), repairs what this leader holds and has not repaired to it yet, and
    /// takes out of <paramref name="missing"/> every packet on its way to the member within the hold-off. While the
    /// partition is <paramref name="congested"/> it sends nothing, first copy or second, and leaves to the sender every
    /// gap not on its way (<see cref="LeftOnOverflow"/>).
    /// </summary>
    public void OnReport(SenderStream stream, RepairLog log, NetAddress to, ulong position, ulong highest, int mapPackets, ref GapMap missing, bool congested)
    {
        if (position > ulong.MaxValue - GapMap.Bits - 1 || highest < position)
        {
            Implausible++; // seq = position + 1 + offset would wrap
            return;
        }

        var now = _member.Scheduler.Now;
        Forget(log, position, highest, mapPackets, missing, now);
        if (missing.IsEmpty)
        {
            return;
        }

        if (congested)
        {
            LeftOnOverflow++; // no new repair and no second copy: see the class comment
        }

        var holdOff = HoldOff(log);
        for (int w = 0; w < GapMap.Words; w++)
        {
            ulong word = missing.Word(w);
            ulong kept = word;
            while (word != 0)
            {
                int bit = System.Numerics.BitOperations.TrailingZeroCount(word);
                word &= word - 1;
                ulong seq = position + 1 + (ulong)((w * 64) + bit);
                int entry = log.IndexOf(seq);
                if (entry >= 0)
                {
                    // Still on its way within the hold-off; after it, lost: again, from the log's copy (the stream may
                    // have let a packet of another partition's class go meanwhile), after twice the wait the second
                    // time. Refused by a full send queue, it is the sender's this time; named after the last copy's
                    // wait, for good: the sender keeps a packet a report names (the token's ACK stops below it), and
                    // the member pulls it from its caching partition if the sender had let it go.
                    int sends = log.Sends(entry);
                    if (now - log.At[entry] >= holdOff * sends)
                    {
                        if (congested)
                        {
                            continue; // no second copy into a congested partition: the sender's
                        }

                        if (sends >= RepairLog.MaxSends)
                        {
                            GivenUp++;
                            continue;
                        }

                        if (!Send(to, log.Datagram(entry)))
                        {
                            continue;
                        }

                        Resent++;
                        log.SentAgain(entry, now);
                    }

                    kept &= ~(1UL << bit);
                    continue;
                }

                if (congested || !log.HasRoom || !stream.TryGet(seq, out var payload))
                {
                    continue; // not held here (lost by this leader too, or let go): the sender's
                }

                var copy = System.Buffers.ArrayPool<byte>.Shared.Rent(_maxDatagramSize);
                int length = RegionWire.WriteData(copy, new DataHeader(stream.Sender, _member.View!.Region.Value, RegionWire.RepairView, seq, seq), payload);
                if (!Send(to, copy.AsSpan(0, length)))
                {
                    System.Buffers.ArrayPool<byte>.Shared.Return(copy);
                    continue;
                }

                log.Add(seq, now, copy, length);
                kept &= ~(1UL << bit);
            }

            missing.SetWord(w, kept);
        }
    }

    /// <summary>Sends a repair datagram to <paramref name="to"/>; false if the endpoint refused it (its send queue is full).</summary>
    private bool Send(NetAddress to, ReadOnlySpan<byte> datagram)
    {
        if (!_member.Data.TrySend(to, datagram))
        {
            Refused++;
            return false;
        }

        Sent++;
        return true;
    }

    /// <summary>Drops the entries the member has now: at or below its position, or not named in its map though the map
    /// speaks for them (after the position, up to its highest packet and the map's <paramref name="mapPackets"/>: a packet
    /// above the highest is not known to be missing yet, nor is one beyond the map). Measures the delay on the ones it
    /// got, except those sent twice (which copy arrived is not known: Karn's rule).</summary>
    private static void Forget(RepairLog log, ulong position, ulong highest, int mapPackets, in GapMap missing, TimeSpan now)
    {
        ulong known = Math.Min((ulong)Math.Min(mapPackets, GapMap.Bits), highest - position);
        for (int i = log.Count - 1; i >= 0; i--)
        {
            ulong seq = log.Seqs[i];
            bool arrived = seq <= position;
            if (!arrived && seq - position - 1 < known)
            {
                int offset = (int)(seq - position - 1);
                arrived = (missing.Word(offset >> 6) & (1UL << (offset & 63))) == 0;
            }

            if (arrived)
            {
                log.Arrived(i, now);
            }
        }
    }
}

/// <summary>The packets a partition leader repaired to one member of its partition and that member has not yet shown it
/// has (<see cref="LeaderRepair"/>): at most <see cref="Capacity"/> (a gap beyond them is left to the sender), each with
/// a copy of its repair datagram, so a lost repair can go again after the leader's stream has let the packet go (a
/// delivered packet of another partition's class is released once its caching partition holds it: the member that lacks
/// it is not in that partition), and the member's measured repair delay. The copies are rented from the shared array
/// pool and returned as entries go.</summary>
internal sealed class RepairLog
{
    public const int Capacity = 64;

    /// <summary>The most copies of one repair a leader sends (<see cref="Sends"/>).</summary>
    public const int MaxSends = 2;

    public readonly ulong[] Seqs = new ulong[Capacity];
    public readonly TimeSpan[] At = new TimeSpan[Capacity];
    private readonly byte[] _sends = new byte[Capacity];
    private readonly byte[]?[] _copies = new byte[]?[Capacity];
    private readonly int[] _lengths = new int[Capacity];

    public int Count { get; private set; }

    public bool HasRoom => Count < Capacity;

    /// <summary>The smoothed time from a repair to the first report without it (0: none measured yet).</summary>
    public TimeSpan Delay { get; private set; }

    /// <summary>Its smoothed mean deviation.</summary>
    public TimeSpan Deviation { get; private set; }

    public int IndexOf(ulong seq) => Array.IndexOf(Seqs, seq, 0, Count);

    /// <summary>The repair datagram of entry <paramref name="index"/>.</summary>
    public ReadOnlySpan<byte> Datagram(int index) => _copies[index].AsSpan(0, _lengths[index]);

    /// <summary>A repair sent: <paramref name="copy"/> (rented from the shared pool, now the log's) holds its datagram.</summary>
    public void Add(ulong seq, TimeSpan at, byte[] copy, int length)
    {
        Seqs[Count] = seq;
        At[Count] = at;
        _sends[Count] = 1;
        _copies[Count] = copy;
        _lengths[Count] = length;
        Count++;
    }

    /// <summary>How many times entry <paramref name="index"/> went (at most <see cref="MaxSends"/>): the next copy, or
    /// after the last one the hand-over to the sender, waits that many hold-offs. Sent again every hold-off for as long as
    /// the member named the packet, 95 % of the repairs went again into receive queues that held 100 ms of datagrams;
    /// sent twice and then kept from the sender, a repair lost twice on fast links waited for the member's gap pull (then 80 ms)
    /// (0.594 s against 0.488 s without leader repair in <c>LeaderRepairSimulationTests</c>); sent three times, with
    /// doubling waits, five senders in the paper's cost model ran at 0.92 of their rate without leader repair.</summary>
    public int Sends(int index) => _sends[index];

    /// <summary>Entry <paramref name="index"/> went again at <paramref name="at"/>.</summary>
    public void SentAgain(int index, TimeSpan at)
    {
        At[index] = at;
        _sends[index]++; // at most MaxSends: OnReport stops there
    }

    /// <summary>Entry <paramref name="index"/>'s member has it: measures the delay (unless it was sent twice) and drops it.</summary>
    public void Arrived(int index, TimeSpan now)
    {
        if (_sends[index] == 1)
        {
            var sample = now - At[index];
            if (Delay == TimeSpan.Zero)
            {
                Delay = sample;
                Deviation = sample / 2;
            }
            else
            {
                Deviation += ((sample - Delay).Duration() - Deviation) / 4;
                Delay += (sample - Delay) / 8;
            }
        }

        RemoveAt(index);
    }

    private void RemoveAt(int index)
    {
        System.Buffers.ArrayPool<byte>.Shared.Return(_copies[index]!);
        Count--;
        Seqs[index] = Seqs[Count];
        At[index] = At[Count];
        _sends[index] = _sends[Count];
        _copies[index] = _copies[Count];
        _lengths[index] = _lengths[Count];
        _copies[Count] = null;
    }

    /// <summary>Forgets every entry (a new view redraws the partitions), returning the copies.</summary>
    public void Clear()
    {
        while (Count > 0)
        {
            RemoveAt(Count - 1);
        }
    }
}
