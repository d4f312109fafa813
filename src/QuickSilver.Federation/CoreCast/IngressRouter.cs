namespace QuickSilver.Federation.CoreCast;

/// <summary>Where an ingress router's packets go: to a remote domain's egress, or plain unicast to a receiver in a
/// domain without CoreCast.</summary>
public interface IIngressOutput
{
    void ToDomain(uint domain, ReadOnlySpan<byte> packet);

    void Unicast(uint domain, uint destination, ReadOnlySpan<byte> data);
}

/// <summary>
/// CoreCast's ingress demultiplexer, Algorithm 1 (seed 004, §3.4), a state machine without I/O. Per channel one
/// payload record (hash, data, and the set of domains already served with it: the seed's payloadBuffer and servedRLOC);
/// a new payload replaces the old one and clears the set. A header for the current payload is forwarded to the
/// receiver's domain, preceded by the payload the first time that domain is served, so each payload crosses to each
/// domain once however many receivers the domain has. Receivers in domains without CoreCast get the full packet by
/// plain unicast. <see cref="ResendEvery"/> (the seed's optional loss measure) re-sends the payload after every n
/// headers to the same domain. State grows with channels (bounded by <see cref="MaxChannels"/>) and, per channel,
/// with the domains served, never with receivers.
/// </summary>
public sealed class IngressRouter(IIngressOutput output, Func<uint, (uint Domain, bool CoreCast)?> locate, int maxChannels = 1024)
{
    private readonly Dictionary<uint, Record> _channels = [];

    public int MaxChannels { get; } = maxChannels;

    /// <summary>0: off; n: send the payload again after every n headers to one domain.</summary>
    public int ResendEvery { get; init; }

    public CoreCastCounters Counters { get; } = new();

    public int Channels => _channels.Count;

    /// <summary>One packet from the source: a payload or a header.</summary>
    public void OnPacket(ReadOnlySpan<byte> packet)
    {
        if (!CoreCastWire.TryAccept(packet, Counters, out byte type, out uint channel, out var hash, out uint destination, out var data))
        {
            return;
        }

        if (type == CoreCastWire.PayloadType)
        {
            if (!_channels.TryGetValue(channel, out var record))
            {
                if (_channels.Count >= MaxChannels)
                {
                    Counters.ChannelsFull++;
                    return;
                }

                _channels[channel] = record = new Record();
            }

            record.Hash = hash.ToArray();
            record.Packet = packet.ToArray();
            record.Data = record.Packet.AsMemory(CoreCastWire.PayloadOverhead);
            record.Served.Clear();
            Counters.PayloadsStored++;
            return;
        }

        if (!_channels.TryGetValue(channel, out var current) || !current.Hash.AsSpan().SequenceEqual(hash))
        {
            Counters.UnknownPayload++;
            return;
        }

        if (locate(destination) is not { } where)
        {
            Counters.UnknownDestination++;
            return;
        }

        if (!where.CoreCast)
        {
            Counters.UnicastSent++;
            Counters.TransitBytes += current.Data.Length;
            output.Unicast(where.Domain, destination, current.Data.Span);
            return;
        }

        current.Served.TryGetValue(where.Domain, out int headers);
        if (!current.Served.ContainsKey(where.Domain) || (ResendEvery > 0 && headers >= ResendEvery))
        {
            Counters.PayloadsSent++;
            Counters.TransitBytes += current.Packet.Length;
            output.ToDomain(where.Domain, current.Packet);
            headers = 0;
        }

        current.Served[where.Domain] = headers + 1;
        Counters.HeadersSent++;
        Counters.TransitBytes += packet.Length;
        output.ToDomain(where.Domain, packet);
    }

    private sealed class Record
    {
        public byte[] Hash { get; set; } = [];

        public byte[] Packet { get; set; } = [];

        public ReadOnlyMemory<byte> Data { get; set; }

        /// <summary>Domains served with the current payload, and headers sent to each since its last payload copy.</summary>
        public Dictionary<uint, int> Served { get; } = [];
    }
}

/// <summary>Where an egress router delivers: one rebuilt packet per local receiver, or once to local multicast.</summary>
public interface IEgressOutput
{
    void Deliver(uint destination, ReadOnlySpan<byte> data);

    void Multicast(uint channel, ReadOnlySpan<byte> data);
}

/// <summary>
/// CoreCast's egress demultiplexer, Algorithm 2 (seed 004, §3.5): one payload per channel (checked against its hash);
/// each header for it becomes a full packet to its local receiver. With <see cref="LocalMulticast"/> the payload goes
/// once to the domain's own multicast instead and headers only confirm it (the seed's "the domain may decide to use IP
/// multicast internally"). State: one payload per channel, bounded by <see cref="MaxChannels"/>.
/// </summary>
public sealed class EgressRouter(IEgressOutput output, int maxChannels = 1024)
{
    private readonly Dictionary<uint, (byte[] Hash, byte[] Data, bool Multicasted)> _payloads = [];

    public int MaxChannels { get; } = maxChannels;

    public bool LocalMulticast { get; init; }

    public CoreCastCounters Counters { get; } = new();

    public void OnPacket(ReadOnlySpan<byte> packet)
    {
        if (!CoreCastWire.TryAccept(packet, Counters, out byte type, out uint channel, out var hash, out uint destination, out var data))
        {
            return;
        }

        if (type == CoreCastWire.PayloadType)
        {
            if (!_payloads.ContainsKey(channel) && _payloads.Count >= MaxChannels)
            {
                Counters.ChannelsFull++;
                return;
            }

            bool same = _payloads.TryGetValue(channel, out var old) && old.Hash.AsSpan().SequenceEqual(hash);
            _payloads[channel] = (hash.ToArray(), data.ToArray(), same && old.Multicasted);
            Counters.PayloadsStored++;
            return;
        }

        if (!_payloads.TryGetValue(channel, out var stored) || !stored.Hash.AsSpan().SequenceEqual(hash))
        {
            Counters.UnknownPayload++;
            return;
        }

        if (LocalMulticast)
        {
            if (!stored.Multicasted)
            {
                _payloads[channel] = stored with { Multicasted = true };
                Counters.Rebuilt++;
                output.Multicast(channel, stored.Data);
            }

            return;
        }

        Counters.Rebuilt++;
        output.Deliver(destination, stored.Data);
    }
}
