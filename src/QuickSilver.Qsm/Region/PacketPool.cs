using System.Numerics;

namespace QuickSilver.Qsm.Region;

/// <summary>
/// The buffers a member holds received packets in: one free list per power-of-two size class, from 256 bytes to 64 KiB
/// (the largest UDP payload), so a lone 100-byte message does not pin a 16 KiB buffer and a full packet fits one.
/// A buffer is rented when a packet is stored and given back when the region purges it; once a member's traffic is
/// steady, every packet reuses a buffer some purged packet gave back, and nothing is allocated. Each free list keeps at
/// most <c>retainPerClass</c> buffers: what a burst rented beyond that is left to the GC when it comes back.
/// Per member, core thread only (no locks). Not <see cref="System.Buffers.ArrayPool{T}.Shared"/>: a member holds
/// thousands of packets at once (two token rounds of traffic), far more than the shared pool caches per size, so the
/// shared pool would allocate again for most of them every round.
/// </summary>
internal sealed class PacketPool
{
    private const int MinShift = 8;   // 256 B
    private const int MaxShift = 16;  // 64 KiB ≥ 65,507, the largest UDP payload
    private readonly Stack<byte[]>[] _free = new Stack<byte[]>[MaxShift - MinShift + 1];
    private readonly int _retain;

    public PacketPool(int retainPerClass)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(retainPerClass);
        _retain = retainPerClass;
        for (int i = 0; i < _free.Length; i++)
        {
            _free[i] = new Stack<byte[]>();
        }
    }

    /// <summary>The largest packet a buffer can hold.</summary>
    public const int MaxLength = 1 << MaxShift;

    /// <summary>Buffers allocated because the free list of their size was empty (the warm-up, or a burst).</summary>
    public long Allocated { get; private set; }

    /// <summary>Packets held in this pool's buffers now (rented with <c>counted</c>, not yet returned).</summary>
    public long HeldPackets { get; private set; }

    /// <summary>Payload bytes of the packets held now.</summary>
    public long HeldBytes { get; private set; }

    /// <summary>The most packets held at once since <see cref="ResetPeaks"/> (the member's memory high-water mark, in
    /// packets; what <see cref="RegionOptions.PartitionShare"/> cuts).</summary>
    public long PeakHeldPackets { get; private set; }

    /// <summary>The most payload bytes held at once since <see cref="ResetPeaks"/>.</summary>
    public long PeakHeldBytes { get; private set; }

    /// <summary>Starts the peaks again from what is held now.</summary>
    public void ResetPeaks()
    {
        PeakHeldPackets = HeldPackets;
        PeakHeldBytes = HeldBytes;
    }

    /// <summary>Buffers waiting in the free lists.</summary>
    public int Free => _free.Sum(stack => stack.Count);

    /// <summary>A buffer of at least <paramref name="length"/> bytes (at most <see cref="MaxLength"/>); a
    /// <paramref name="counted"/> one holds a packet of that length until it is returned with the same length (the
    /// held counts and their peaks).</summary>
    public byte[] Rent(int length, bool counted = false)
    {
        ArgumentOutOfRangeException.ThrowIfGreaterThan(length, MaxLength);
        if (counted)
        {
            Hold(length);
        }

        int index = ClassOf(length);
        if (_free[index].TryPop(out var buffer))
        {
            return buffer;
        }

        Allocated++;
        return new byte[1 << (index + MinShift)];
    }

    /// <summary>Counts a packet of <paramref name="length"/> bytes held in a buffer that is not this pool's (a datagram
    /// the node's own sender lent its member, <see cref="IPacketLender"/>), until <see cref="EndHold"/>.</summary>
    public void Hold(int length)
    {
        HeldPackets++;
        HeldBytes += length;
        PeakHeldPackets = Math.Max(PeakHeldPackets, HeldPackets);
        PeakHeldBytes = Math.Max(PeakHeldBytes, HeldBytes);
    }

    /// <summary>Ends a <see cref="Hold"/> of that length.</summary>
    public void EndHold(int length)
    {
        HeldPackets--;
        HeldBytes -= length;
    }

    /// <summary>Gives back a buffer <see cref="Rent"/> returned; the caller must not touch it afterwards. A
    /// <paramref name="heldLength"/> of 0 or more ends a counted rental of that length.</summary>
    public void Return(byte[] buffer, int heldLength = -1)
    {
        if (heldLength >= 0)
        {
            EndHold(heldLength);
        }

        int index = ClassOf(buffer.Length);
        if (buffer.Length == 1 << (index + MinShift) && _free[index].Count < _retain)
        {
            _free[index].Push(buffer);
        }
    }

    private static int ClassOf(int length)
        => length <= 1 << MinShift ? 0 : BitOperations.Log2((uint)length - 1) + 1 - MinShift;
}
