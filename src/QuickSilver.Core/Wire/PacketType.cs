namespace QuickSilver.Core.Wire;

/// <summary>
/// The packet type byte of the common header: which layer a datagram is for. Core owns none but the reserved 0; each
/// layer declares the ids it owns as constants next to its wire format and registers them with its stack
/// (<see cref="Stack.LayerContext.RegisterPacketType"/>). docs/wire-format.md keeps the table of assigned ids; never
/// reuse a value.
/// </summary>
public enum PacketType : byte
{
    /// <summary>Not a valid type; the dispatcher drops the packet.</summary>
    None = 0,
}
