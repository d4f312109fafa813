using QuickSilver.Core;
using QuickSilver.Core.Wire;

namespace QuickSilver.Transport.Reliable;

/// <summary>Options of the reliable unicast protocol (docs/reliable-unicast.md): the control channel of a node and of the
/// GMS. A node takes them from <c>QuickSilverNodeOptions.ReliableUnicast</c>. Validated at start-up.</summary>
public sealed record ReliableUnicastOptions
{
    /// <summary>Largest payload of one datagram (one segment); the datagram adds 28 bytes of headers. The default makes
    /// 1,412-byte datagrams, inside an Ethernet MTU. A node (and its embedded GMS) left at this default sizes segments to
    /// its own datagrams instead (<c>QuickSilverNodeOptions.MaxDatagramSize</c> less 64 bytes of headers and the security
    /// trailer); a value set smaller than that is kept.</summary>
    public int MaxSegmentBytes { get; init; } = DefaultMaxSegmentBytes;

    /// <summary>The default of <see cref="MaxSegmentBytes"/>.</summary>
    internal const int DefaultMaxSegmentBytes = 1400 - ReliableWire.DataHeaderSize;

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

    /// <summary>When an unanswered connect is first repeated (then doubling up to MaxRto, MaxRetransmissions times). A
    /// connect is 36 bytes and carries nothing, so repeating it early costs almost nothing, while every first contact
    /// between two peers waits for its handshake: shorter than InitialRto. Once a challenge has given a round-trip
    /// sample, the handshake's remaining steps and the data use the measured RTO.</summary>
    public TimeSpan HandshakeRto { get; init; } = TimeSpan.FromMilliseconds(50);

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

    /// <summary>Connections an endpoint keeps (the peer table), whoever opened them. At the bound a peer's handshake is
    /// not answered (counted as <see cref="ReliableUnicastCounters.RefusedTableFull"/>; the peer retries and gets in once
    /// idle connections have expired), and a send to a new peer is refused (a control channel's Send returns false,
    /// counted the same). Peers that never echoed a cookie take no room.</summary>
    public int MaxPeers { get; init; } = 4096;

    /// <summary>Connections with peers at one IPv4 address, beyond which a handshake from that address is not answered
    /// (counted as <see cref="ReliableUnicastCounters.RefusedPerSource"/>): one host cannot fill the peer table. A host
    /// running more nodes than this (many processes on one machine) needs a larger value. Above MaxPeers it is
    /// MaxPeers.</summary>
    public int MaxConnectionsPerIp { get; init; } = 256;

    /// <summary>How long a handshake cookie is made for: one is accepted for between one and two lifetimes after the
    /// challenge that carried it. Longer than a round trip, short enough that a stolen cookie soon expires.</summary>
    public TimeSpan CookieLifetime { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary>Challenges an endpoint sends per second at most (bursts of a tenth of that), whatever the number of
    /// sources: what a flood of first contacts can cost it in MACs and replies. Beyond it a contact is dropped and
    /// counted (<see cref="ReliableUnicastCounters.ChallengesSuppressed"/>); the real initiator repeats its connect.</summary>
    public int MaxChallengesPerSecond { get; init; } = 10_000;

    /// <summary>A connection that has nothing unacknowledged and has heard nothing from its peer for this long is
    /// dropped without report; the next message to or from that peer starts a new conversation with a handshake.</summary>
    public TimeSpan IdleTimeout { get; init; } = TimeSpan.FromSeconds(60);

    /// <summary>A connection a peer opened (its handshake done) that has delivered no message and on which this side
    /// has sent nothing is dropped after this long: a handshake alone holds a table slot only briefly.</summary>
    public TimeSpan HalfOpenTimeout { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>Throws <see cref="ArgumentException"/> (or <see cref="ArgumentOutOfRangeException"/>) naming the first
    /// invalid option, as <paramref name="name"/>.Option.</summary>
    public void Validate(string name = nameof(ReliableUnicastOptions))
    {
        OptionChecks.InRange(MaxSegmentBytes, 1, 65507 - PacketHeader.Size - ReliableWire.DataHeaderSize, $"{name}.{nameof(MaxSegmentBytes)}");
        OptionChecks.InRange(MaxMessageBytes, 1, 64 << 20, $"{name}.{nameof(MaxMessageBytes)}");
        OptionChecks.InRange(Window, 1, 64, $"{name}.{nameof(Window)}");
        OptionChecks.InRange(SendBufferSegments, Window, 1 << 20, $"{name}.{nameof(SendBufferSegments)}");
        long largest = ((long)MaxMessageBytes + MaxSegmentBytes - 1) / MaxSegmentBytes;
        if (SendBufferSegments < largest)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(SendBufferSegments)}", SendBufferSegments,
                $"{name}.SendBufferSegments must hold the largest message: MaxMessageBytes ({MaxMessageBytes}) needs {largest} segments of MaxSegmentBytes ({MaxSegmentBytes}).");
        }

        OptionChecks.Positive(InitialRto, $"{name}.{nameof(InitialRto)}");
        OptionChecks.Positive(MinRto, $"{name}.{nameof(MinRto)}");
        if (HandshakeRto < MinRto || HandshakeRto > MaxRto)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(HandshakeRto)}", HandshakeRto, $"{name}.HandshakeRto must be between MinRto ({MinRto}) and MaxRto ({MaxRto}).");
        }

        if (MaxRto < MinRto)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(MaxRto)}", MaxRto, $"{name}.MaxRto must be at least MinRto ({MinRto}).");
        }

        if (AckDelay < TimeSpan.Zero || AckDelay >= MinRto)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(AckDelay)}", AckDelay, $"{name}.AckDelay must be in [0, MinRto).");
        }

        OptionChecks.InRange(MaxRetransmissions, 1, 1000, $"{name}.{nameof(MaxRetransmissions)}");
        OptionChecks.InRange(RateLimitBytesPerSecond, 1000, long.MaxValue / 2, $"{name}.{nameof(RateLimitBytesPerSecond)}");
        OptionChecks.InRange(RateBurstBytes, MaxSegmentBytes + PacketHeader.Size + ReliableWire.DataHeaderSize, 1 << 30, $"{name}.{nameof(RateBurstBytes)}");
        OptionChecks.InRange(MaxPeers, 1, 1 << 20, $"{name}.{nameof(MaxPeers)}");
        OptionChecks.InRange(MaxConnectionsPerIp, 1, 1 << 20, $"{name}.{nameof(MaxConnectionsPerIp)}");
        OptionChecks.InRange(MaxChallengesPerSecond, 1, 10_000_000, $"{name}.{nameof(MaxChallengesPerSecond)}");
        if (CookieLifetime < MaxRto)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(CookieLifetime)}", CookieLifetime,
                $"{name}.CookieLifetime ({CookieLifetime}) must be at least MaxRto ({MaxRto}): an initiator must be able to echo a cookie after a backed-off retransmission.");
        }

        if (HalfOpenTimeout < MaxRto || HalfOpenTimeout > IdleTimeout)
        {
            throw new ArgumentOutOfRangeException($"{name}.{nameof(HalfOpenTimeout)}", HalfOpenTimeout,
                $"{name}.HalfOpenTimeout ({HalfOpenTimeout}) must be between MaxRto ({MaxRto}) and IdleTimeout ({IdleTimeout}).");
        }
    }
}
