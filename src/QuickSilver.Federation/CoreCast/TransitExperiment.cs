namespace QuickSilver.Federation.CoreCast;

/// <summary>One row of <see cref="TransitExperiment"/>.</summary>
public sealed record TransitResult(
    int Domains,
    int ReceiversPerDomain,
    int Chunks,
    int ChunkBytes,
    long CoreCastTransitBytes,
    long UnicastTransitBytes,
    double MeasuredRatio,
    double ModelTransitBytes,
    long PayloadPackets,
    long HeaderPackets,
    long Delivered,
    bool EveryReceiverGotEveryChunkOnce);

/// <summary>
/// Drives the real <see cref="IngressRouter"/> and <see cref="EgressRouter"/> with a source that sends each chunk as
/// one payload packet and one header per receiver (seed §3.3), receivers spread evenly over remote domains, and counts
/// the bytes that cross from the ingress to the egresses (each packet plus the core encapsulation header H_L), against
/// per-receiver unicast (each receiver sent its own H_L + payload packet) and against equation 3 of the model with
/// P_CC and H_CC set to this data plane's packet sizes. Every receiver's rebuilt packets are checked. No I/O, no time:
/// the counts are exact and rerun identically.
/// </summary>
public static class TransitExperiment
{
    public static TransitResult Run(int domains, int receiversPerDomain, int chunks = 100, int chunkBytes = 1200, int lispHeader = 20)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(domains, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(receiversPerDomain, 1);
        ArgumentOutOfRangeException.ThrowIfLessThan(chunks, 1);
        ArgumentOutOfRangeException.ThrowIfNotEqual(chunkBytes is >= 1 and <= CoreCastWire.MaxData, true, nameof(chunkBytes));
        int k = domains * receiversPerDomain;
        var received = new int[k, chunks];
        var egressOut = new EgressSink(received);
        var egresses = Enumerable.Range(0, domains).Select(_ => new EgressRouter(egressOut)).ToArray();
        var link = new Link(egresses, egressOut, lispHeader);
        var ingress = new IngressRouter(link, d => d < k ? ((uint)(d / receiversPerDomain), true) : null);
        var data = new byte[chunkBytes];
        for (int c = 0; c < chunks; c++)
        {
            BitConverter.TryWriteBytes(data, c);
            data[^1] = (byte)c;
            var hash = CoreCastWire.Hash(data);
            egressOut.Chunk = c;
            ingress.OnPacket(CoreCastWire.Payload(7, hash, data));
            for (uint r = 0; r < k; r++)
            {
                ingress.OnPacket(CoreCastWire.Header(7, hash, r));
            }
        }

        long unicast = (long)chunks * k * (lispHeader + CoreCastWire.PayloadOverhead + chunkBytes);
        var model = BandwidthModel.Evaluate(BandwidthParameters.Seed with
        {
            HL = lispHeader, PCC = CoreCastWire.PayloadOverhead + chunkBytes, HCC = CoreCastWire.HeaderBytes, J = domains, K = k, D = chunkBytes,
        });
        bool once = true;
        foreach (int n in received)
        {
            once &= n == 1;
        }

        return new TransitResult(domains, receiversPerDomain, chunks, chunkBytes, link.Bytes, unicast, (double)link.Bytes / unicast,
            model.TransitBytesPerPayload * chunks, ingress.Counters.PayloadsSent, ingress.Counters.HeadersSent, egressOut.Delivered, once);
    }

    private sealed class Link(EgressRouter[] egresses, EgressSink sink, int lispHeader) : IIngressOutput
    {
        public long Bytes { get; private set; }

        public void ToDomain(uint domain, ReadOnlySpan<byte> packet)
        {
            Bytes += lispHeader + packet.Length;
            egresses[domain].OnPacket(packet);
        }

        public void Unicast(uint domain, uint destination, ReadOnlySpan<byte> data)
        {
            Bytes += lispHeader + data.Length;
            sink.Deliver(destination, data);
        }
    }

    private sealed class EgressSink(int[,] received) : IEgressOutput
    {
        public int Chunk { get; set; }

        public long Delivered { get; private set; }

        public void Deliver(uint destination, ReadOnlySpan<byte> data)
        {
            Delivered++;
            if (BitConverter.ToInt32(data) == Chunk)
            {
                received[destination, Chunk]++;
            }
        }

        public void Multicast(uint channel, ReadOnlySpan<byte> data)
        {
        }
    }
}
