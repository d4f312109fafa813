namespace QuickSilver.Core.Wire;

/// <summary>Why a decoder rejected its input. Each value is also a drop reason in the counters.</summary>
public enum WireError
{
    None = 0,
    Truncated,
    Oversized,
    BadMagic,
    UnknownVersion,
    UnknownType,
    Malformed,
    UnknownClassId,
}
