namespace QuickSilver.Core.Wire;

/// <summary>The packet type byte of the common header. Documented in docs/wire-format.md; never reuse a value.</summary>
public enum PacketType : byte
{
    /// <summary>Not a valid type; a decoder that sees it drops the packet.</summary>
    None = 0,

    /// <summary>An opaque datagram for tests, demos and benchmarks: the body is application bytes.</summary>
    Raw = 1,

    /// <summary>Several framed messages packed into one datagram by the batching component.</summary>
    Batch = 2,

    /// <summary>Reliable unicast: a data segment.</summary>
    ReliableData = 3,

    /// <summary>Reliable unicast: a cumulative + selective acknowledgement.</summary>
    ReliableAck = 4,

    /// <summary>QSM regional data: a sender's multicast into a region, or a repair (push/pull/retransmission).</summary>
    QsmData = 5,

    /// <summary>Reliable unicast: a data segment that does not end its message (the next segment continues it).</summary>
    ReliableFragment = 6,
}
