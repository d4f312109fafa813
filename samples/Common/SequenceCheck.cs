using System.Buffers.Binary;

namespace QuickSilver.Samples;

/// <summary>
/// Checks exactly-once, in-order delivery of numbered messages (an 8-byte little-endian number 1, 2, 3… at the start
/// of each payload), per sender. <see cref="Observe"/> runs on the node's core thread; the counters may be read from
/// any thread.
/// </summary>
internal sealed class SequenceCheck
{
    private readonly Dictionary<uint, long> _next = new();
    private long _delivered;
    private long _anomalies;

    /// <summary>Messages seen.</summary>
    public long Delivered => Interlocked.Read(ref _delivered);

    /// <summary>Messages that were not the next number from their sender (a duplicate, a gap or a reordering).</summary>
    public long Anomalies => Interlocked.Read(ref _anomalies);

    /// <summary>Writes <paramref name="number"/> at the start of <paramref name="payload"/> (at least 8 bytes).</summary>
    public static void Stamp(Span<byte> payload, long number) => BinaryPrimitives.WriteInt64LittleEndian(payload, number);

    /// <summary>A <see cref="GroupMessageHandler"/>: checks one message (on the core thread; nothing is copied).</summary>
    public void Observe(uint sender, ulong sequence, ReadOnlySpan<byte> payload)
    {
        Interlocked.Increment(ref _delivered);
        long number = payload.Length >= 8 ? BinaryPrimitives.ReadInt64LittleEndian(payload) : -1;
        long expected = _next.GetValueOrDefault(sender, 1);
        if (number != expected)
        {
            Interlocked.Increment(ref _anomalies);
        }

        _next[sender] = Math.Max(expected, number + 1);
    }
}
