using QuickSilver.Core.Wire;

namespace QuickSilver.Core.Diagnostics;

/// <summary>Why a packet or message was dropped. Every drop anywhere in QuickSilver is counted under one of these.</summary>
public enum DropReason
{
    // Decoder rejections (one per WireError other than None).
    Truncated = 1,
    Oversized,
    BadMagic,
    UnknownVersion,
    UnknownType,
    Malformed,
    UnknownClassId,

    // Resource bounds.
    SendQueueFull,
    ReceiveBufferFull,
    NoHandler,

    // Simulated network only.
    LinkLoss,
    LinkQueueFull,
    Partitioned,
    NodeDown,

    /// <summary>Dropped on purpose by a transport's injected-loss option (tests and benchmarks).</summary>
    InjectedLoss,

    /// <summary>Well-formed, but addressed to a region (or view) this node is not in: overlapping multicast groups, a stale
    /// view, or the node's own multicast looped back; or a pull for a sender whose stream this member does not hold.
    /// Expected in small numbers around view changes.</summary>
    NotForThisNode,

    /// <summary>Well-formed, but from a node that may not send it here: data from a node the current views do not admit
    /// as a sender into the region (or from another address than the views give it), a repair, token or pull from a node
    /// outside the region's view, a NAK or ACK from outside the sender's view of the region (docs/security.md).</summary>
    NotAMember,
}

/// <summary>
/// Drop counters by reason. Incremented on the owning (core) thread, readable from any thread (metrics, tests).
/// </summary>
public sealed class DropCounters : EnumCounters<DropReason>
{
    /// <summary>Counts a decoder rejection under the matching reason.</summary>
    public void Increment(WireError error) => Increment(FromWireError(error));

    public static DropReason FromWireError(WireError error) => error switch
    {
        WireError.Truncated => DropReason.Truncated,
        WireError.Oversized => DropReason.Oversized,
        WireError.BadMagic => DropReason.BadMagic,
        WireError.UnknownVersion => DropReason.UnknownVersion,
        WireError.UnknownType => DropReason.UnknownType,
        WireError.UnknownClassId => DropReason.UnknownClassId,
        _ => DropReason.Malformed,
    };
}
