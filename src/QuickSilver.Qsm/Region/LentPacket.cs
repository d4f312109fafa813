namespace QuickSilver.Qsm.Region;

/// <summary>
/// Who lends a sender's own member the datagrams it sent (<see cref="RegionSender"/>), so the member holds the sender's
/// copy instead of one of its own. The member says when it starts to hold one and gives it back when it releases it; a
/// lender never writes into a buffer it lent until it is given back (docs/qsm.md, "The sender's own packets").
/// A datagram is lent to one holder at a time (the node's current member). Core thread only.
/// </summary>
internal interface IPacketLender
{
    /// <summary>The member now holds <paramref name="buffer"/>, the datagram of packet <paramref name="seq"/>.</summary>
    void Lend(ulong seq, byte[] buffer);

    /// <summary>The member no longer holds <paramref name="buffer"/> (lent for <paramref name="seq"/>).</summary>
    void GiveBack(ulong seq, byte[] buffer);
}

/// <summary>A datagram a sender lends its own member: the payload is <c>Buffer[Offset..Offset + Length]</c>.</summary>
internal readonly record struct LentPacket(byte[] Buffer, int Offset, int Length, IPacketLender Lender)
{
    public ReadOnlySpan<byte> Payload => Buffer.AsSpan(Offset, Length);
}
