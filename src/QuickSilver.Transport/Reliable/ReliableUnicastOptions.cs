using QuickSilver.Core;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>Options of the reliable unicast protocol (docs/reliable-unicast.md). Validated at start-up.</summary>
internal sealed record ReliableUnicastOptions
{
    /// <summary>Largest payload of one datagram (one segment); the datagram adds 28 bytes of headers. The default makes
    /// 1,412-byte datagrams, inside an Ethernet MTU.</summary>
    public int MaxSegmentBytes { get; init; } = 1400 - ReliableWire.DataHeaderSize;

    /// <summary>Largest message, in bytes; a larger one is refused with an ArgumentException. A message longer than
    /// <see cref="MaxSegmentBytes"/> travels as several segments and is reassembled by the receiver, which holds at most
    /// this many bytes per peer while it does.</summary>
    public int MaxMessageBytes { get; init; } = 256 * 1024;

    /// <summary>Segments a connection buffers for sending (queued plus unacknowledged); TrySend fails beyond it. Must
    /// hold the largest message.</summary>
    public int SendBufferSegments { get; init; } = 1024;

    /// <summary>Segments in flight per connection, and the span of the receiver's reorder buffer.</summary>
    public int Window { get; init; } = 64;

    public TimeSpan InitialRto { get; init; } = TimeSpan.FromMilliseconds(200);

    public TimeSpan MinRto { get; init; } = TimeSpan.FromMilliseconds(20);

    public TimeSpan MaxRto { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>How long a receiver may hold an acknowledgement hoping to combine it.</summary>
    public TimeSpan AckDelay { get; init; } = TimeSpan.FromMilliseconds(2);

    /// <summary>Timeouts in a row without progress after which the peer is reported failed.</summary>
    public int MaxRetransmissions { get; init; } = 10;

    /// <summary>Bytes per second all connections of an endpoint may send (QSM §2.3: control traffic is rate-limited).</summary>
    public long RateLimitBytesPerSecond { get; init; } = 50_000_000;

    /// <summary>Token bucket depth of the rate limit.</summary>
    public int RateBurstBytes { get; init; } = 256 * 1024;

    /// <summary>Peers an endpoint keeps state for; datagrams from further peers are dropped and counted.</summary>
    public int MaxPeers { get; init; } = 4096;

    public void Validate()
    {
        OptionChecks.InRange(MaxSegmentBytes, 1, 65507 - PacketHeader.Size - ReliableWire.DataHeaderSize, $"ReliableUnicastOptions.{nameof(MaxSegmentBytes)}");
        OptionChecks.InRange(MaxMessageBytes, 1, 64 << 20, $"ReliableUnicastOptions.{nameof(MaxMessageBytes)}");
        OptionChecks.InRange(Window, 1, 64, $"ReliableUnicastOptions.{nameof(Window)}");
        OptionChecks.InRange(SendBufferSegments, Window, 1 << 20, $"ReliableUnicastOptions.{nameof(SendBufferSegments)}");
        long largest = ((long)MaxMessageBytes + MaxSegmentBytes - 1) / MaxSegmentBytes;
        if (SendBufferSegments < largest)
        {
            throw new ArgumentOutOfRangeException(nameof(SendBufferSegments), SendBufferSegments,
                $"ReliableUnicastOptions.SendBufferSegments must hold the largest message: MaxMessageBytes ({MaxMessageBytes}) needs {largest} segments of MaxSegmentBytes ({MaxSegmentBytes}).");
        }

        OptionChecks.Positive(InitialRto, $"ReliableUnicastOptions.{nameof(InitialRto)}");
        OptionChecks.Positive(MinRto, $"ReliableUnicastOptions.{nameof(MinRto)}");
        if (MaxRto < MinRto)
        {
            throw new ArgumentOutOfRangeException(nameof(MaxRto), MaxRto, $"ReliableUnicastOptions.MaxRto must be at least MinRto ({MinRto}).");
        }

        if (AckDelay < TimeSpan.Zero || AckDelay >= MinRto)
        {
            throw new ArgumentOutOfRangeException(nameof(AckDelay), AckDelay, $"ReliableUnicastOptions.AckDelay must be in [0, MinRto).");
        }

        OptionChecks.InRange(MaxRetransmissions, 1, 1000, $"ReliableUnicastOptions.{nameof(MaxRetransmissions)}");
        OptionChecks.InRange(RateLimitBytesPerSecond, 1000, long.MaxValue / 2, $"ReliableUnicastOptions.{nameof(RateLimitBytesPerSecond)}");
        OptionChecks.InRange(RateBurstBytes, MaxSegmentBytes + PacketHeader.Size + ReliableWire.DataHeaderSize, 1 << 30, $"ReliableUnicastOptions.{nameof(RateBurstBytes)}");
        OptionChecks.InRange(MaxPeers, 1, 1 << 20, $"ReliableUnicastOptions.{nameof(MaxPeers)}");
    }
}
