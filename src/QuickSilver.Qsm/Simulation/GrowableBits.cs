namespace QuickSilver.Qsm.Simulation;

/// <summary>A bit per packet sequence number, growing as numbers arrive.</summary>
internal sealed class GrowableBits
{
    private ulong[] _words = new ulong[64];

    public void Set(ulong index)
    {
        ulong word = index >> 6;
        if (word >= (ulong)_words.Length)
        {
            Array.Resize(ref _words, (int)Math.Max(word + 1, (ulong)_words.Length * 2));
        }

        _words[word] |= 1UL << (int)(index & 63);
    }

    public bool Get(ulong index)
    {
        ulong word = index >> 6;
        return word < (ulong)_words.Length && (_words[word] & (1UL << (int)(index & 63))) != 0;
    }
}
