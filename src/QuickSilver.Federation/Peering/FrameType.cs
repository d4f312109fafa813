namespace QuickSilver.Federation.Peering;

/// <summary>The frame types on a peering link (docs/federation.md, "Wire formats"). Byte 1 of every frame.</summary>
public enum FrameType : byte
{
    Hello = 1,
    KeepAlive = 2,
    RouteUpdate = 3,
    SrouteRequest = 4,
    SrouteResponse = 5,
    Join = 6,
    Translation = 7,
    Leave = 8,
    NoRoute = 9,
    Data = 10,
    DataEndpoint = 11,
    Capabilities = 12,
    Receivers = 13,
    CoreCastPayload = 14,
    CoreCastHeader = 15,
    ReceiverData = 16,
    DataChannel = 17,
    PeerAuth = 18,
}

/// <summary>Why a frame was refused (one counter each).</summary>
public enum FrameError : byte
{
    None = 0,
    Truncated,
    BadVersion,
    UnknownType,
    TooLarge,
    BadLength,
    BadValue,
    BadSessionName,
    TrailingBytes,
}
