using System.Buffers.Binary;
using System.Security.Cryptography;
using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Gateway;

/// <summary>
/// Per-receiver delivery over the session tree (<c>delivery=unicast</c> or <c>delivery=corecast</c>): CoreCast (seed 004)
/// as a forwarding mode of the gateway. Each gateway learns from its downstream peers which receivers are behind them
/// (RECEIVERS). With CoreCast, toward a peer that announced it (CAPABILITIES), a packet crosses the link as one
/// CORECAST_PAYLOAD {hash, data} and then one CORECAST_HEADER {hash, receiver} per receiver behind that peer (Algorithm 1);
/// the peer keeps one payload per flow and rebuilds a packet per receiver (Algorithm 2), handing it to its island's
/// receiver or passing header and payload on along the tree. Toward a peer without CoreCast, and for
/// <c>delivery=unicast</c>, each receiver gets its own RECEIVER_DATA frame with the whole payload. Per-receiver sessions
/// are single-source: frames are accepted only from the upstream (reverse-path check), so they cannot loop.
/// </summary>
public sealed partial class BroadcastGateway
{
    /// <summary>Bytes of a CORECAST_HEADER frame: data header, SHA-1, egress gateway, receiver.</summary>
    public const int CoreCastHeaderBytes = DataHeader.Size + HashBytes + 8;

    /// <summary>Bytes a CORECAST_PAYLOAD frame adds to the payload: data header and SHA-1.</summary>
    public const int CoreCastPayloadOverhead = DataHeader.Size + HashBytes;

    /// <summary>Bytes a RECEIVER_DATA frame adds to the payload: data header, egress gateway, receiver.</summary>
    public const int ReceiverDataOverhead = DataHeader.Size + 8;

    private const int HashBytes = 20;

    private byte[]? _perReceiverScratch;

    private Span<byte> PerReceiverScratch(int length) => (_perReceiverScratch ??= new byte[CoreCastPayloadOverhead + 8 + _options.MaxPayloadBytes]).AsSpan(0, length);

    /// <summary>The root: a native packet of a per-receiver session goes to every receiver behind every downstream peer.</summary>
    private void ForwardPerReceiverFromRoot(SessionTree tree, int flow, DataHeader header, ReadOnlySpan<byte> payload)
    {
        byte[]? hash = null;
        foreach (var (peer, receivers) in tree.ReceiversBehind)
        {
            if (!tree.Downstream.ContainsKey(peer))
            {
                continue;
            }

            foreach (var r in receivers)
            {
                SendToReceiver(tree, flow, header, payload, ref hash, peer, r);
            }
        }
    }

    private void OnPerReceiverFrame(PeeringLink link, FrameType type, ReadOnlySpan<byte> frame)
    {
        Counters.DataReceived++;
        var peer = link.Info.Gateway;
        if (!DataHeader.TryRead(frame, type, out var header))
        {
            Counters.Malformed[(int)FrameError.BadValue]++;
            return;
        }

        int fixedBytes = type switch { FrameType.CoreCastPayload => CoreCastPayloadOverhead, FrameType.CoreCastHeader => CoreCastHeaderBytes, _ => ReceiverDataOverhead };
        if (frame.Length < fixedBytes || (type == FrameType.CoreCastHeader && frame.Length != fixedBytes))
        {
            Counters.Malformed[(int)FrameError.Truncated]++;
            return;
        }

        if (frame.Length - fixedBytes > _options.MaxPayloadBytes)
        {
            Counters.OversizedPayload++;
            return;
        }

        if (!_upstreamLabels.TryGetValue((peer, header.Label), out var up))
        {
            Counters.UnknownLabel++;
            return;
        }

        var (tree, flow) = up;
        if (tree.Upstream != peer || tree.Name.Delivery == SessionDelivery.Tree)
        {
            Counters.RpfDropped++;
            return;
        }

        if (header.Ttl <= 1)
        {
            Counters.TtlExpired++;
            return;
        }

        header = header with { Ttl = (byte)(header.Ttl - 1) };
        switch (type)
        {
            case FrameType.CoreCastPayload:
            {
                var hash = frame.Slice(DataHeader.Size, HashBytes);
                var data = frame[CoreCastPayloadOverhead..];
                Span<byte> actual = stackalloc byte[HashBytes];
#pragma warning disable CA5350 // SHA-1 is CoreCast's payload name (seed §3.2), not a security mechanism.
                SHA1.HashData(data, actual);
#pragma warning restore CA5350
                if (!actual.SequenceEqual(hash))
                {
                    Counters.CoreCastHashMismatch++;
                    return;
                }

                // Algorithm 2: one payload per flow, replaced by the next.
                tree.CoreCastPayloads ??= new (byte[], byte[])?[tree.Name.Flows.Count];
                tree.CoreCastPayloads[flow] = (hash.ToArray(), data.ToArray());
                return;
            }

            case FrameType.CoreCastHeader:
            {
                var hash = frame.Slice(DataHeader.Size, HashBytes);
                if (tree.CoreCastPayloads?[flow] is not { } cached || !cached.Hash.AsSpan().SequenceEqual(hash))
                {
                    Counters.CoreCastOrphanHeaders++; // its payload was lost or replaced: nothing to rebuild
                    return;
                }

                var target = ReadReceiver(frame[(DataHeader.Size + HashBytes)..]);
                byte[]? h = cached.Hash;
                Route(tree, flow, header, cached.Data, ref h, target);
                return;
            }

            default:
            {
                var target = ReadReceiver(frame[DataHeader.Size..]);
                byte[]? hash = null;
                Route(tree, flow, header, frame[ReceiverDataOverhead..], ref hash, target);
                return;
            }
        }
    }

    private static ReceiverId ReadReceiver(ReadOnlySpan<byte> bytes)
        => new(new GatewayId(BinaryPrimitives.ReadUInt32LittleEndian(bytes)), BinaryPrimitives.ReadUInt32LittleEndian(bytes[4..]));

    /// <summary>A packet for one receiver: ours (hand it to the island) or behind one of our downstream peers.</summary>
    private void Route(SessionTree tree, int flow, DataHeader header, ReadOnlySpan<byte> payload, ref byte[]? hash, ReceiverId target)
    {
        if (target.Egress == Id)
        {
            if (!tree.LocalReceivers.ContainsKey(target.Receiver) || tree.LocalChannels is not { } channels)
            {
                Counters.UnknownReceiver++;
                return;
            }

            bool sent = _native is IReceiverNativeNet perReceiver
                ? perReceiver.SendToReceiver(channels[flow], target.Receiver, payload)
                : _native.SendData(channels[flow], payload);
            if (sent)
            {
                Counters.ReceiverDelivered++;
                Counters.DataDelivered++;
            }
            else
            {
                Counters.NativeSendFailed++;
            }

            return;
        }

        foreach (var (peer, receivers) in tree.ReceiversBehind)
        {
            if (receivers.Contains(target) && tree.Downstream.ContainsKey(peer))
            {
                SendToReceiver(tree, flow, header, payload, ref hash, peer, target);
                return;
            }
        }

        Counters.UnknownReceiver++;
    }

    /// <summary>Algorithm 1 toward one peer: the payload once (when the peer has not had this one), then a header; or,
    /// without CoreCast, the whole packet for this receiver.</summary>
    private void SendToReceiver(SessionTree tree, int flow, DataHeader header, ReadOnlySpan<byte> payload, ref byte[]? hash, GatewayId peer, ReceiverId target)
    {
        var label = tree.Labels[flow];
        bool coreCast = tree.Name.Delivery == SessionDelivery.CoreCast && _peers.TryGetValue(peer, out var link) && link.CoreCast;
        if (!coreCast)
        {
            var frame = PerReceiverScratch(ReceiverDataOverhead + payload.Length);
            (header with { Label = label }).Write(frame, FrameType.ReceiverData);
            BinaryPrimitives.WriteUInt32LittleEndian(frame[DataHeader.Size..], target.Egress.Value);
            BinaryPrimitives.WriteUInt32LittleEndian(frame[(DataHeader.Size + 4)..], target.Receiver);
            payload.CopyTo(frame[ReceiverDataOverhead..]);
            if (SendPerReceiver(tree, peer, frame))
            {
                Counters.ReceiverDataSent++;
            }

            return;
        }

#pragma warning disable CA5350 // SHA-1 is CoreCast's payload name (seed §3.2), not a security mechanism.
        hash ??= SHA1.HashData(payload);
#pragma warning restore CA5350
        if (!tree.CoreCastServed.TryGetValue((peer, flow), out var served) || !served.AsSpan().SequenceEqual(hash))
        {
            var frame = PerReceiverScratch(CoreCastPayloadOverhead + payload.Length);
            (header with { Label = label }).Write(frame, FrameType.CoreCastPayload);
            hash.CopyTo(frame[DataHeader.Size..]);
            payload.CopyTo(frame[CoreCastPayloadOverhead..]);
            if (SendPerReceiver(tree, peer, frame))
            {
                Counters.CoreCastPayloadsSent++;
                tree.CoreCastServed[(peer, flow)] = hash;
            }
        }

        var h = PerReceiverScratch(CoreCastHeaderBytes);
        (header with { Label = label }).Write(h, FrameType.CoreCastHeader);
        hash.CopyTo(h[DataHeader.Size..]);
        BinaryPrimitives.WriteUInt32LittleEndian(h[(DataHeader.Size + HashBytes)..], target.Egress.Value);
        BinaryPrimitives.WriteUInt32LittleEndian(h[(DataHeader.Size + HashBytes + 4)..], target.Receiver);
        if (SendPerReceiver(tree, peer, h))
        {
            Counters.CoreCastHeadersSent++;
        }
    }

    private bool SendPerReceiver(SessionTree tree, GatewayId peer, ReadOnlySpan<byte> frame)
    {
        bool sent = tree.Name.RealTime ? _host.SendDatagram(peer, frame) : _host.Send(peer, frame);
        if (!sent)
        {
            Counters.PeerSendFailed++;
            return false;
        }

        Counters.DataForwarded++;
        if (_peers.TryGetValue(peer, out var link))
        {
            link.LastSent = _now;
        }

        return true;
    }

    private void OnReceivers(GatewayId peer, ReceiversMessage m)
    {
        if (!_sessions.TryGetValue(m.Session, out var tree) || !tree.Downstream.ContainsKey(peer) || tree.Name.Delivery == SessionDelivery.Tree)
        {
            Counters.ReceiversStale++;
            return;
        }

        int others = tree.LocalReceivers.Count + tree.ReceiversBehind.Where(p => p.Key != peer).Sum(p => p.Value.Count);
        var set = new HashSet<ReceiverId>(m.Receivers.Take(Math.Max(0, _options.MaxReceivers - others)));
        if (set.Count < m.Receivers.Length)
        {
            Counters.ReceiversRefused += m.Receivers.Length - set.Count;
        }

        tree.ReceiversBehind[peer] = set;
    }

    /// <summary>Sends RECEIVERS upstream when the receivers behind us changed (or after a JOIN); drops the lists of
    /// peers that are no longer downstream.</summary>
    private void ReportReceivers(SessionTree tree)
    {
        if (tree.Name.Delivery == SessionDelivery.Tree)
        {
            return;
        }

        foreach (var peer in tree.ReceiversBehind.Keys.Where(p => !tree.Downstream.ContainsKey(p)).ToList())
        {
            tree.ReceiversBehind.Remove(peer);
            foreach (var key in tree.CoreCastServed.Keys.Where(k => k.Item1 == peer).ToList())
            {
                tree.CoreCastServed.Remove(key);
            }
        }

        if (tree.IsRoot || tree.Upstream is not { } up || tree.UpstreamLabels is null)
        {
            return;
        }

        var list = tree.LocalReceivers.Keys.Select(r => new ReceiverId(Id, r))
            .Concat(tree.ReceiversBehind.Values.SelectMany(s => s))
            .Distinct().OrderBy(r => r.Egress.Value).ThenBy(r => r.Receiver).Take(PeerCodec.MaxReceivers).ToArray();
        if (tree.ReceiversReported is { } last && last.AsSpan().SequenceEqual(list))
        {
            return;
        }

        tree.ReceiversReported = list;
        SendControl(up, PeerCodec.Receivers(tree.Name, list));
    }
}
