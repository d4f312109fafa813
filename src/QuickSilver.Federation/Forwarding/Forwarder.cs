using QuickSilver.Federation.Forwarding;
using QuickSilver.Federation.Naming;
using QuickSilver.Federation.NativeNet;
using QuickSilver.Federation.Peering;
using QuickSilver.Federation.Routing;
using QuickSilver.Federation.Trees;

namespace QuickSilver.Federation.Gateway;

/// <summary>
/// The gateway's data forwarding (seed §5.3.3): native packets into the tree at a root (or from a local source of a
/// multi-source session), DATA frames accepted by flow label with the reverse-path check, the duplicate filter and the
/// ttl, then sent to every tree neighbour but the sender and delivered into the island.
/// </summary>
public sealed partial class BroadcastGateway
{
    /// <summary>A packet from a native channel: the owner island's session (a root sends it down its tree), or a local
    /// source of a multi-source session (sent to every tree neighbour).</summary>
    public void RecvdData(NativeChannel channel, ReadOnlySpan<byte> data)
    {
        if (!_sessions.TryGetValue(channel.Session, out var tree))
        {
            Counters.UnknownLabel++;
            return;
        }

        if (data.Length > _options.MaxPayloadBytes)
        {
            Counters.OversizedPayload++;
            return;
        }

        bool fromRoot = tree.IsRoot && channel.Direction == ChannelDirection.Up;
        if (!fromRoot && !tree.Name.MultiSource)
        {
            return; // our own delivery echoed back by the medium, or a source where the tree is one-way
        }

        Counters.DataFromIsland++;
        var header = new DataHeader(0, DataHeader.DefaultTtl, default, Id, ++_nextSequence);
        if (tree.Name.Delivery != SessionDelivery.Tree)
        {
            ForwardPerReceiverFromRoot(tree, channel.Flow, header, data);
            return;
        }

        _duplicates.FirstTime(Id, header.Sequence);
        data.CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(tree, channel.Flow, header, data.Length, from: null, deliverLocally: false);
    }

    private void OnData(PeeringLink link, ReadOnlySpan<byte> frame)
    {
        Counters.DataReceived++;
        var peer = link.Info.Gateway;
        if (!DataHeader.TryRead(frame, out var header))
        {
            Counters.Malformed[(int)FrameError.BadValue]++;
            return;
        }

        int payload = frame.Length - DataHeader.Size;
        if (payload > _options.MaxPayloadBytes)
        {
            Counters.OversizedPayload++;
            return;
        }

        SessionTree tree;
        int flow;
        if (_upstreamLabels.TryGetValue((peer, header.Label), out var up))
        {
            (tree, flow) = up;
            if (tree.Upstream != peer)
            {
                Counters.RpfDropped++;
                return;
            }
        }
        else if (_myLabels.TryGetValue(header.Label, out var mine))
        {
            // Toward the root: only on a multi-source (bi-directional) tree, and only from one of our downstream peers.
            (tree, flow) = mine;
            if (!tree.Name.MultiSource || !tree.Downstream.ContainsKey(peer))
            {
                Counters.RpfDropped++;
                return;
            }
        }
        else
        {
            Counters.UnknownLabel++;
            return;
        }

        if (!_duplicates.FirstTime(header.Origin, header.Sequence))
        {
            Counters.DuplicatesDropped++;
            return;
        }

        if (header.Ttl <= 1)
        {
            Counters.TtlExpired++;
            return;
        }

        frame[DataHeader.Size..].CopyTo(_scratch.AsSpan(DataHeader.Size));
        Forward(tree, flow, header with { Ttl = (byte)(header.Ttl - 1) }, payload, from: peer, deliverLocally: true);
    }

    // The payload is already in _scratch after the header's room.
    private void Forward(SessionTree tree, int flow, DataHeader header, int payload, GatewayId? from, bool deliverLocally)
    {
        var frame = _scratch.AsSpan(0, DataHeader.Size + payload);
        foreach (var peer in tree.Downstream.Keys)
        {
            if (peer == from)
            {
                continue;
            }

            (header with { Label = tree.Labels[flow] }).Write(frame);
            SendData(tree, peer, frame);
        }

        if (tree.Name.MultiSource && tree.Upstream is { } upstream && upstream != from && tree.UpstreamLabels is { } labels)
        {
            (header with { Label = labels[flow] }).Write(frame);
            SendData(tree, upstream, frame);
        }

        if (deliverLocally && tree.LocalChannels is { } channels)
        {
            if (_native.SendData(channels[flow], frame[DataHeader.Size..]))
            {
                Counters.DataDelivered++;
            }
            else
            {
                Counters.NativeSendFailed++;
            }
        }

        if (deliverLocally && tree.IsRoot && tree.Name.MultiSource && tree.RootChannels is { } roots)
        {
            // A remote source of a multi-source session reaches the owner island's native session too.
            if (_native.SendData(roots[flow], frame[DataHeader.Size..]))
            {
                Counters.DataDelivered++;
            }
            else
            {
                Counters.NativeSendFailed++;
            }
        }
    }

    private void SendData(SessionTree tree, GatewayId peer, ReadOnlySpan<byte> frame)
    {
        bool realTime = tree.Name.RealTime;
        uint endpoint = EndpointOf(tree, peer);
        bool sent = endpoint != 0
            ? _host.SendToDataNode(peer, endpoint, frame, realTime)
            : realTime ? _host.SendDatagram(peer, frame) : _host.Send(peer, frame);
        if (sent)
        {
            Counters.DataForwarded++;
            if (realTime)
            {
                Counters.DataDatagrams++;
            }

            if (_peers.TryGetValue(peer, out var link))
            {
                link.LastSent = _now;
            }
        }
        else
        {
            Counters.PeerSendFailed++;
        }
    }
}
