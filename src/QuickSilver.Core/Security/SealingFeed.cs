using QuickSilver.Core.Io;

namespace QuickSilver.Core.Security;

/// <summary>A layer's datagram feed as a <see cref="SecureTransport"/> registers it with its endpoint: the layer's
/// feed writes into the slot less the trailer's room, and what it wrote is sealed in place before the endpoint queues
/// it. One per registered feed, made once.</summary>
internal sealed class SealingFeed(IDatagramFeed feed, SecureTransport transport) : IDatagramFeed
{
    public int Pull(Span<byte> buffer, out NetAddress to)
    {
        int length = feed.Pull(transport.Layer(buffer), out to);
        return length <= 0 ? length : transport.Seal(buffer, Math.Min(length, buffer.Length - transport.Overhead));
    }
}
