using System.Runtime.CompilerServices;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// The gaps a flow status names (<see cref="FlowStatus.Missing"/>): bit i says packet position + 1 + i has not arrived
/// (at some member, for an aggregate) though a later one has, for i below <see cref="Bits"/> (1,024 packets, a receive
/// window of the paper's cost model: 1,000 datagrams). Word 0 is the 64-bit map a status always carried; words 1–15 go
/// on the wire only up to the last one with a gap (docs/wire-format.md, "Flow status").
/// <para>A member's own report names the 64 packets after its position (its oldest gap holds its position anyway),
/// or up to <see cref="RegionOptions.GapReportPackets"/> when it lets the sender count its window from its highest
/// packet (<see cref="FlowStatus.RoomAboveHighest"/>: the sender may then be that far above the position). A
/// partition's or a block's aggregate names the union of its members' gaps relative to its slowest member's position,
/// and the other members' positions are spread over the window: cut at 64 packets, their gaps did not reach the sender
/// until the slowest member's gap had been repaired, so a window's gaps were repaired one 64-packet stretch at a time.
/// In a simulated 250-member region under ~1 % loss the slowest 1 % of repairs took 2.4 s, the sender first hearing of
/// them 1.8 s after the packet's first send though the members had found them within 14 ms (docs/benchmarks.md, "Where
/// 1 % loss takes the receivers' windows' rate"). Aggregates carry up to <see cref="RegionOptions.GapReportPackets"/>
/// packets.</para>
/// </summary>
internal struct GapMap : IEquatable<GapMap>
{
    /// <summary>64-bit words in the map.</summary>
    public const int Words = 16;

    /// <summary>Packets the map covers after the position.</summary>
    public const int Bits = Words * 64;

    private WordArray _words;

    /// <summary>A map whose first word is <paramref name="first"/> (packets position + 1 … + 64) and the rest empty.</summary>
    public static implicit operator GapMap(ulong first)
    {
        var map = default(GapMap);
        map._words[0] = first;
        return map;
    }

    /// <summary>Word <paramref name="index"/> (packets position + 1 + 64 × index …).</summary>
    public readonly ulong Word(int index) => _words[index];

    /// <summary>Sets word <paramref name="index"/> (the wire reader).</summary>
    public void SetWord(int index, ulong value) => _words[index] = value;

    public readonly bool IsEmpty => UsedWords == 0;

    /// <summary>The words up to the last one with a gap (0 when there is none): what goes on the wire.</summary>
    public readonly int UsedWords
    {
        get
        {
            for (int i = Words - 1; i >= 0; i--)
            {
                if (_words[i] != 0)
                {
                    return i + 1;
                }
            }

            return 0;
        }
    }

    /// <summary>Adds <paramref name="other"/>'s gaps, whose position is <paramref name="shift"/> packets above this
    /// map's (those that fall past <paramref name="packets"/>, a multiple of 64, are left out).</summary>
    public void OrShifted(in GapMap other, ulong shift, int packets)
    {
        if (shift >= (ulong)packets)
        {
            return;
        }

        int limit = packets / 64, words = (int)(shift >> 6), bits = (int)(shift & 63);
        for (int i = 0; i + words < limit; i++)
        {
            ulong word = other._words[i];
            if (word == 0)
            {
                continue;
            }

            _words[i + words] |= word << bits;
            if (bits != 0 && i + words + 1 < limit)
            {
                _words[i + words + 1] |= word >> (64 - bits);
            }
        }
    }

    /// <summary>Whether this map names a packet missing that <paramref name="before"/>, a map of the same stream whose
    /// position was <paramref name="shift"/> packets below this one's, did not (a new gap, not one that closed or a
    /// position that moved past it); always true when the position went back (<paramref name="shift"/> negative).
    /// Packets above what <paramref name="before"/> covers count as not named in it.</summary>
    public readonly bool AddsTo(in GapMap before, long shift)
    {
        if (shift < 0)
        {
            return true;
        }

        for (int i = 0; i < Words; i++)
        {
            ulong word = _words[i];
            if (word == 0)
            {
                continue;
            }

            // before's 64 bits from bit i * 64 + shift: the same packets as this word's
            ulong bit = ((ulong)i * 64) + (ulong)shift;
            ulong aligned = 0;
            if (bit < Bits)
            {
                int w = (int)(bit >> 6), r = (int)(bit & 63);
                aligned = before._words[w] >> r;
                if (r != 0 && w + 1 < Words)
                {
                    aligned |= before._words[w + 1] << (64 - r);
                }
            }

            if ((word & ~aligned) != 0)
            {
                return true;
            }
        }

        return false;
    }

    public readonly bool Equals(GapMap other) => ((ReadOnlySpan<ulong>)_words).SequenceEqual(other._words);

    public override readonly bool Equals(object? obj) => obj is GapMap other && Equals(other);

    public override readonly int GetHashCode()
    {
        var hash = new HashCode();
        foreach (ulong word in (ReadOnlySpan<ulong>)_words)
        {
            hash.Add(word);
        }

        return hash.ToHashCode();
    }

    public static bool operator ==(GapMap left, GapMap right) => left.Equals(right);

    public static bool operator !=(GapMap left, GapMap right) => !left.Equals(right);

    [InlineArray(Words)]
    private struct WordArray
    {
        private ulong _word;
    }
}

