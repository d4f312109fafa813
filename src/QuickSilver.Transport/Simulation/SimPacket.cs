using QuickSilver.Core.Io;

namespace QuickSilver.Transport.Simulation;

/// <summary>A datagram in flight, shared by all the copies of one multicast (reference counted, pooled).</summary>
internal sealed class SimPacket
{
    public byte[] Buffer = new byte[2048];
    public int Length;
    public NetAddress From;
    public int References;

    public ReadOnlySpan<byte> Span => Buffer.AsSpan(0, Length);
}

/// <summary>One scheduled delivery of a packet to an endpoint (pooled; carried in a pooled alarm's State).</summary>
internal sealed class SimDelivery
{
    public SimPacket? Packet;
    public SimTransport? Target;
    public int TargetIncarnation;
    public bool ViaCpu;
}

/// <summary>A datagram on its way from a sender's uplink to the switch (pooled; carried in a pooled alarm's State).</summary>
internal sealed class SimHop
{
    public SimPacket? Packet;
    public SimTransport? Source;
    public NetAddress To;
}
