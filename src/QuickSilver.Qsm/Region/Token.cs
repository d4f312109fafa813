using System.Buffers.Binary;
using QuickSilver.Qsm.Recovery;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// The region's one token (QSM §2.3.2): where it is on the torus (partition, step) and one section per sender that is
/// multicasting into the region. Step 0 is the partition leader receiving it from the previous partition; steps
/// 1..k are the other members in view order; step k+1 is the leader again, closing the partition's ring.
/// </summary>
internal sealed class Token
{
    public uint Region;
    public uint View;
    public ulong Round;
    public int Partition;
    public int Step;
    public readonly List<TokenSection> Sections = new();

    public TokenSection? Find(uint sender)
    {
        foreach (var s in Sections)
        {
            if (s.Sender == sender)
            {
                return s;
            }
        }

        return null;
    }

    /// <summary>Bit 15 of the section count: every section carries its <see cref="TokenSection.Holder"/> (u16, after
    /// its loss maximum). Without it each section's holder is the one its step implies (<see cref="ImpliedHolder"/>).</summary>
    public const ushort HoldersFlag = 0x8000;

    /// <summary>The holder a section has when every member before this step processed it: the previous step's member,
    /// or none at a partition leader's step 0.</summary>
    public static ushort ImpliedHolder(int step) => step > 0 ? (ushort)(step - 1) : TokenSection.NoHolder;

    public int Write(Span<byte> message)
    {
        message[0] = (byte)RegionControl.Token;
        BinaryPrimitives.WriteUInt32LittleEndian(message[1..], Region);
        BinaryPrimitives.WriteUInt32LittleEndian(message[5..], View);
        BinaryPrimitives.WriteUInt64LittleEndian(message[9..], Round);
        BinaryPrimitives.WriteUInt16LittleEndian(message[17..], (ushort)Partition);
        BinaryPrimitives.WriteUInt16LittleEndian(message[19..], (ushort)Step);

        // Holders go on the wire only when a member passed a section on untouched (it has no stream of the sender):
        // otherwise each is implied by the step, and the token is as long as it always was.
        ushort implied = ImpliedHolder(Step);
        bool holders = false;
        foreach (var s in Sections)
        {
            holders |= s.Holder != implied;
        }

        BinaryPrimitives.WriteUInt16LittleEndian(message[21..], (ushort)(Sections.Count | (holders ? HoldersFlag : 0)));
        int offset = 23;
        foreach (var s in Sections)
        {
            offset += s.Write(message[offset..], holders);
        }

        return offset;
    }

    public static Token? TryRead(ReadOnlySpan<byte> message, int maxRanges, int maxSenders)
    {
        if (message.Length < 23 || message[0] != (byte)RegionControl.Token)
        {
            return null;
        }

        var token = new Token
        {
            Region = BinaryPrimitives.ReadUInt32LittleEndian(message[1..]),
            View = BinaryPrimitives.ReadUInt32LittleEndian(message[5..]),
            Round = BinaryPrimitives.ReadUInt64LittleEndian(message[9..]),
            Partition = BinaryPrimitives.ReadUInt16LittleEndian(message[17..]),
            Step = BinaryPrimitives.ReadUInt16LittleEndian(message[19..]),
        };
        int count = BinaryPrimitives.ReadUInt16LittleEndian(message[21..]);
        bool holders = (count & HoldersFlag) != 0;
        count &= ~HoldersFlag;
        if (count > maxSenders)
        {
            return null;
        }

        int offset = 23;
        for (int i = 0; i < count; i++)
        {
            var section = new TokenSection(0, maxRanges) { Holder = ImpliedHolder(token.Step) };
            int used = section.TryRead(message[offset..], holders);
            if (used < 0)
            {
                return null;
            }

            token.Sections.Add(section);
            offset += used;
        }

        if (holders && token.Sections.TrueForAll(section => section.Holder == ImpliedHolder(token.Step)))
        {
            return null; // holders sent when none differs from the implied one: not how a member writes a token
        }

        return offset == message.Length ? token : null;
    }
}

/// <summary>
/// One sender's part of the token (QSM §2.3.3). Set by the region leader at the start of a round from the last one:
/// <see cref="Cutoff"/> (the highest seq seen anywhere last round), <see cref="PurgeUpTo"/> (received by every node)
/// and <see cref="StableBefore"/> (cached on every caching replica). Accumulated along the round: the highest seq
/// seen, the lowest "cached up to" and "received up to", the lowest receive rate; and, within a partition, the
/// predecessor's NAK set and the intersection of the partition's NAK sets (indices in the partition's cache).
/// </summary>
internal sealed class TokenSection
{
    public TokenSection(uint sender, int maxRanges)
    {
        Sender = sender;
        PredecessorNaks = new NakSet(maxRanges);
        PartitionNaks = new NakSet(maxRanges);
        ResetAccumulators();
    }

    public uint Sender;
    public ulong Cutoff;
    public ulong PurgeUpTo;
    public ulong StableBefore;
    public ulong MaxSeen;
    public ulong StableMin;
    public ulong ReceivedMin;
    public double RateMin;

    /// <summary>The largest loss fraction a member saw in its last rate samples (an extension: docs/qsm.md).</summary>
    public double LossMax;

    /// <summary><see cref="Holder"/> when no member of the partition has processed the section yet this round.</summary>
    public const ushort NoHolder = ushort.MaxValue;

    /// <summary>The step (in this partition's ring) of the last member that processed the section, whose NAK set
    /// <see cref="PredecessorNaks"/> is; <see cref="NoHolder"/> before the first. A member that has no started stream of
    /// the sender passes the section on untouched, so the predecessor to push to and pull from is this member, not
    /// always the ring neighbour (docs/qsm.md, "Departed senders": the survivors of a crashed sender recover from each
    /// other past members that never heard it). On the wire only when it is not the one the step implies
    /// (<see cref="Token.HoldersFlag"/>).</summary>
    public ushort Holder = NoHolder;
    public readonly NakSet PredecessorNaks;
    public readonly NakSet PartitionNaks;

    public void ResetAccumulators()
    {
        MaxSeen = 0;
        StableMin = ulong.MaxValue;
        ReceivedMin = ulong.MaxValue;
        RateMin = double.MaxValue;
        LossMax = 0;
        PredecessorNaks.Clear();
        PartitionNaks.Clear();
    }

    public int Write(Span<byte> destination, bool holder = false)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(destination, Sender);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[4..], Cutoff);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[12..], PurgeUpTo);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[20..], StableBefore);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[28..], MaxSeen);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[36..], StableMin);
        BinaryPrimitives.WriteUInt64LittleEndian(destination[44..], ReceivedMin);
        BinaryPrimitives.WriteDoubleLittleEndian(destination[52..], RateMin);
        BinaryPrimitives.WriteDoubleLittleEndian(destination[60..], LossMax);
        int offset = 68;
        if (holder)
        {
            BinaryPrimitives.WriteUInt16LittleEndian(destination[offset..], Holder);
            offset += 2;
        }

        offset += PredecessorNaks.Write(destination[offset..]);
        offset += PartitionNaks.Write(destination[offset..]);
        return offset;
    }

    public int TryRead(ReadOnlySpan<byte> source, bool holder = false)
    {
        if (source.Length < (holder ? 74 : 72))
        {
            return -1;
        }

        Sender = BinaryPrimitives.ReadUInt32LittleEndian(source);
        Cutoff = BinaryPrimitives.ReadUInt64LittleEndian(source[4..]);
        PurgeUpTo = BinaryPrimitives.ReadUInt64LittleEndian(source[12..]);
        StableBefore = BinaryPrimitives.ReadUInt64LittleEndian(source[20..]);
        MaxSeen = BinaryPrimitives.ReadUInt64LittleEndian(source[28..]);
        StableMin = BinaryPrimitives.ReadUInt64LittleEndian(source[36..]);
        ReceivedMin = BinaryPrimitives.ReadUInt64LittleEndian(source[44..]);
        RateMin = BinaryPrimitives.ReadDoubleLittleEndian(source[52..]);
        LossMax = BinaryPrimitives.ReadDoubleLittleEndian(source[60..]);
        if (double.IsNaN(RateMin) || RateMin < 0 || !(LossMax >= 0 && LossMax <= 1))
        {
            return -1;
        }

        int offset = 68;
        if (holder)
        {
            Holder = BinaryPrimitives.ReadUInt16LittleEndian(source[offset..]);
            offset += 2;
        }

        int used = PredecessorNaks.TryRead(source[offset..]);
        if (used < 0)
        {
            return -1;
        }

        offset += used;
        used = PartitionNaks.TryRead(source[offset..]);
        return used < 0 ? -1 : offset + used;
    }
}
